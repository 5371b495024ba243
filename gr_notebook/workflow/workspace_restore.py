"""Bringing a workspace back to a checkpoint's files, and telling what differs.

:func:`restore_files` makes a workspace hold a listing (``{path: hash}``), moving aside (never
deleting) what differs, never through a link; :func:`linked` names the files of a run a
person replaced by links, which hashing skips.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gr_notebook.errors import WorkspaceError
from gr_notebook.workflow.workspace import (
    SYSTEM_DIR,
    has_link,
    open_folders,
    open_system_folder,
    replace_in,
)
from gr_notebook.workflow.workspace_files import hash_files

__all__ = ["WorkspaceDiff", "diff", "linked", "restore_files", "stored_parts"]


@dataclass(frozen=True, slots=True)
class WorkspaceDiff:
    """How a workspace differs from a checkpoint's files."""

    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return (*self.changed, *self.added, *self.removed)

    def __bool__(self) -> bool:
        return bool(self.paths)

    def describe(self, limit: int = 5) -> str:
        parts = []
        for label, paths in (
            ("changed", self.changed),
            ("added", self.added),
            ("removed", self.removed),
        ):
            if paths:
                shown = ", ".join(paths[:limit]) + (
                    f" and {len(paths) - limit} more" if len(paths) > limit else ""
                )
                parts.append(f"{label}: {shown}")
        return "; ".join(parts)


def diff(now: Mapping[str, str], then: Mapping[str, str]) -> WorkspaceDiff:
    return WorkspaceDiff(
        changed=tuple(sorted(p for p in now if p in then and now[p] != then[p])),
        added=tuple(sorted(p for p in now if p not in then)),
        removed=tuple(sorted(p for p in then if p not in now)),
    )


def linked(root: Path, paths: Iterable[str]) -> list[str]:
    """The ``paths`` that are, or lie below, a symlink in ``root``, sorted.

    Hashing skips links, so a file of the run that a person replaced by one (or whose folder
    they did) would read as unchanged, or as gone; the run writes regular files only, so
    such a link is a change by hand.
    """
    return sorted(path for path in paths if has_link(str(root), path))


def restore_files(
    root: Path,
    files: Mapping[str, str],
    read: Callable[[str], bytes],
    *,
    aside: Path,
) -> tuple[str, ...]:
    """Make ``root`` hold exactly ``files``: what differs or is extra moves into ``aside``
    (its folders kept), then the checkpoint's bytes are written. Returns what moved aside.

    ``aside`` lies in the system's folder (``root/.gr/...``). No step follows a link: a
    ``.gr`` that is one, or a folder of the workspace that became one, is refused
    (WorkspaceError), so nothing is moved or written outside the workspace. Every blob is
    read (and so checked) before anything moves: a damaged one leaves ``root`` as it was.
    """
    root.mkdir(parents=True, exist_ok=True)
    now = hash_files(root)
    writing = {p: stored_parts(p) for p, digest in files.items() if now.get(p) != digest}
    data = {digest: read(digest) for digest in {files[p] for p in writing}}
    change = diff(now, files)
    moving = (*change.changed, *change.added)
    under = aside.relative_to(root / SYSTEM_DIR).parts if moving else ()
    moved: list[str] = []
    for path in moving:
        *folders, name = stored_parts(path)
        source = open_folders(root, folders, path)
        try:
            target = open_system_folder(root, *under, *folders)
            try:
                os.replace(name, name, src_dir_fd=source, dst_dir_fd=target)
            finally:
                os.close(target)
        finally:
            os.close(source)
        moved.append(path)
    for path, (*folders, name) in writing.items():
        folder = open_folders(root, folders, path)
        try:
            replace_in(folder, name, data[files[path]], path)
        finally:
            os.close(folder)
    return tuple(moved)


def stored_parts(path: str) -> tuple[str, ...]:
    """The names along a path a checkpoint holds, refused (WorkspaceError) unless it is
    relative and plain: a crafted store must not lead whoever reads it (a resume, a fork, a
    replay) out of its folder, nor hand the OS a NUL byte."""
    parts = tuple(path.split("/"))
    if path.startswith("/") or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise WorkspaceError(
            f"a checkpoint names the path {path!r}, which is not a path inside a workspace"
        )
    return parts
