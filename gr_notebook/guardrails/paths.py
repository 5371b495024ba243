"""The one name a path denotes inside the workspace, however the model spelled it.

``./a.txt``, ``a/../a.txt``, ``/a.txt`` and ``/workspace/a.txt`` (with a mount point of
``/workspace``) are all ``a.txt``, so a policy that remembers a read recognises the write.
A path that leads outside, by ``..`` or through a symlink, raises ``WorkspaceError``.

This runs several times per tool call, so the common case (no symlinks on the way) costs a
few ``lstat`` calls on the path's own components; anything unusual goes through
:meth:`Workspace.resolve`, which is the authority on what is inside.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_module

from gr_notebook.errors import WorkspaceError
from gr_notebook.workflow.workspace import Workspace, has_link

__all__ = ["canonical_path", "file_stamp", "is_file"]


def canonical_path(workspace: Workspace, raw: str, *, mount_point: str | None = None) -> str:
    """The workspace-relative POSIX name of ``raw``; ``.`` for the workspace itself.

    A leading ``/`` means the workspace root, as in a sandbox mounted at ``/``.
    """
    if not isinstance(raw, str):
        raise WorkspaceError(f"path must be a string, got {type(raw).__name__}")
    if not raw.strip():
        raise WorkspaceError("path is empty; give a path relative to the workspace")
    text = raw.replace("\\", "/").lstrip("/")
    mount = (mount_point or "").strip("/")
    if mount and (text == mount or text.startswith(mount + "/")):
        text = text[len(mount) :].lstrip("/")
    normal = posixpath.normpath(text or ".")
    if normal == "." or "\x00" in normal or normal.startswith("..") or normal[1:2] == ":":
        return _resolved(workspace, text)
    if has_link(str(workspace.root), normal):
        return _resolved(workspace, normal)
    return normal


def _resolved(workspace: Workspace, text: str) -> str:
    return workspace.relative(workspace.resolve(text or "."))


def file_stamp(workspace: Workspace, name: str) -> tuple[int, int] | None:
    """(mtime in ns, size) of a canonical name, or None when no regular file is there."""
    try:
        stat = os.stat(f"{workspace.root}/{name}")
    except OSError:
        return None
    if not stat_module.S_ISREG(stat.st_mode):
        return None
    return (stat.st_mtime_ns, stat.st_size)


def is_file(workspace: Workspace, raw: str) -> bool:
    """Whether ``raw``, however spelled, names a regular file inside the workspace."""
    try:
        return file_stamp(workspace, canonical_path(workspace, raw)) is not None
    except WorkspaceError:
        return False
