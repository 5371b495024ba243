"""The workspace's files by content: what a checkpoint keeps, and how a resume brings it back.

A :class:`FileTree` holds the hash of every regular file of the workspace, kept up to date
path by path, so a turn that wrote one file rehashes that file alone. What a listing skips
is left out here too: dot-folders (``.gr/``, the system's), temp files and symlinks.
:func:`restore_files` brings a workspace back to a listing, moving aside (never deleting)
what differs, never through a link; :func:`linked` names the files of a run a person
replaced by links, which hashing skips.
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gr_notebook.digests import digest_of
from gr_notebook.errors import WorkspaceError
from gr_notebook.workflow.workspace import (
    SYSTEM_DIR,
    open_folders,
    open_system_folder,
    replace_in,
)

__all__ = [
    "FileTree",
    "Stamp",
    "WorkspaceDiff",
    "diff",
    "hash_files",
    "linked",
    "restore_files",
]

Stamp = tuple[int, int, int]
"""(inode, mtime in ns, size): what changes when a file is rewritten."""


class FileTree:
    """The hashes of a workspace's files, kept up to date path by path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, tuple[str, Stamp]] = {}
        """path -> (hash, stamp) of every file."""

    def listing(self) -> dict[str, str]:
        """``{path: hash}`` of every file, as a checkpoint keeps it."""
        return {path: digest for path, (digest, _) in self.files.items()}

    def scan(self) -> dict[str, bytes]:
        """Look at every file (a stat each; bytes only of what changed); returns the new
        contents by hash."""
        found: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            base = os.path.relpath(dirpath, self.root)
            for name in filenames:
                if not (name.startswith(".") and name.endswith(".tmp")):
                    found.add(name if base == "." else f"{base}/{name}".replace(os.sep, "/"))
        return self.update(found | set(self.files))

    def update(self, paths: Iterable[str]) -> dict[str, bytes]:
        """Rehash ``paths`` (written, added or removed since the last look); returns the
        new contents by hash."""
        blobs: dict[str, bytes] = {}
        for path in paths:
            self._look(path, blobs)
        return blobs

    def _look(self, path: str, blobs: dict[str, bytes]) -> None:
        old = self.files.get(path)
        full = os.path.join(self.root, path)
        try:
            st = os.lstat(full)
        except OSError:
            st = None
        if st is None or not stat_module.S_ISREG(st.st_mode) or _hidden(path):
            self.files.pop(path, None)
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if old is not None and old[1] == stamp:
            return
        try:
            data = _read(full, st.st_size)
        except OSError:
            return  # unreadable now; the next look tries again
        digest = digest_of(data)
        self.files[path] = (digest, stamp)
        if old is None or old[0] != digest:
            blobs[digest] = data


def hash_files(root: Path) -> dict[str, str]:
    """``{path: hash}`` of the files a :class:`FileTree` of ``root`` would hold, now."""
    tree = FileTree(root)
    tree.scan()
    return tree.listing()


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
    found = []
    for path in paths:
        here = str(root)
        for part in path.split("/"):
            here = os.path.join(here, part)
            try:
                mode = os.lstat(here).st_mode
            except OSError:
                break  # absent: nothing below it is a link
            if stat_module.S_ISLNK(mode):
                found.append(path)
                break
    return sorted(found)


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
    (WorkspaceError), so nothing is moved or written outside the workspace.
    """
    root.mkdir(parents=True, exist_ok=True)
    now = hash_files(root)
    change = diff(now, files)
    moving = (*change.changed, *change.added)
    under = aside.relative_to(root / SYSTEM_DIR).parts if moving else ()
    moved: list[str] = []
    for path in moving:
        *folders, name = _inside(root, path).relative_to(root).parts
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
    for path, digest in files.items():
        if now.get(path) != digest:
            *folders, name = _inside(root, path).relative_to(root).parts
            folder = open_folders(root, folders, path)
            try:
                replace_in(folder, name, read(digest), path)
            finally:
                os.close(folder)
    return tuple(moved)


def _inside(root: Path, path: str) -> Path:
    """``root/path``, refused when a stored path would lead out of the workspace."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise WorkspaceError(
            f"a checkpoint names the path {path!r}, which is not inside a workspace"
        )
    return root.joinpath(*parts)


def _hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.split("/")[:-1])


def _read(path: str, size: int) -> bytes:
    """The file's bytes, read with one call when it still has the ``size`` a stat saw."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        chunks = [os.read(fd, size + 1)]
        while chunks[-1]:
            chunks.append(os.read(fd, max(size, 65536)))
        return b"".join(chunks)
    finally:
        os.close(fd)
