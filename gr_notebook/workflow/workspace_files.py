"""The workspace's files as content-addressed folders, as git keeps a tree.

A :class:`FileTree` holds, for every regular file of the workspace, the hash of its bytes,
and for every folder a small JSON blob naming its files and subfolders by hash; the root
folder's hash names the whole workspace. Rehashing one changed file rewrites only the
folders on its path, so a checkpoint of a turn that changed nothing costs nothing, and one
that changed a file costs that file and a few small folders. What a listing skips is left
out here too: dot-folders (``.gr/``, the system's), temp files and symlinks.

:func:`flatten` reads a root back into ``{path: hash}``, and :func:`restore_files` brings a
workspace back to it, moving aside (never deleting) what differs, never through a link;
:func:`linked` names the files of a run a person replaced by links, which hashing skips.
"""

from __future__ import annotations

import json
import os
import stat as stat_module
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gr_notebook.errors import WorkspaceError
from gr_notebook.history.checkpoint_store import digest_of, json_bytes
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
    "flatten",
    "hash_files",
    "linked",
    "restore_files",
]

Stamp = tuple[int, int, int]
"""(inode, mtime in ns, size): what changes when a file is rewritten."""


class FileTree:
    """The hashes of a workspace's files and folders, kept up to date path by path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, tuple[str, Stamp]] = {}
        """path -> (hash, stamp) of every file."""
        self._folders: dict[str, dict[str, str]] = {"": {}}
        """folder -> {name or 'name/': hash} of its files and subfolders."""
        self._digests: dict[str, str] = {}
        self.digest = ""
        """The root folder's hash: the whole workspace."""

    def scan(self) -> dict[str, bytes]:
        """Look at every file (a stat each; bytes only of what changed); returns the new
        blobs (files and folders) by hash."""
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
        new blobs (files and the folders on their paths) by hash."""
        blobs: dict[str, bytes] = {}
        dirty: set[str] = set()
        for path in paths:
            if self._look(path, blobs):
                dirty.add(path)
        if dirty or not self.digest:
            self._refold(dirty, blobs)
        return blobs

    def _look(self, path: str, blobs: dict[str, bytes]) -> bool:
        """Whether ``path`` changed; its new bytes go to ``blobs``."""
        old = self.files.get(path)
        full = os.path.join(self.root, path)
        try:
            st = os.lstat(full)
        except OSError:
            st = None
        if st is None or not stat_module.S_ISREG(st.st_mode) or _hidden(path):
            if old is None:
                return False
            del self.files[path]
            return True
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if old is not None and old[1] == stamp:
            return False
        try:
            data = _read(full, st.st_size)
        except OSError:
            return False  # unreadable now; the next look tries again
        digest = digest_of(data)
        self.files[path] = (digest, stamp)
        if old is not None and old[0] == digest:
            return False
        blobs[digest] = data
        return True

    def _refold(self, dirty: set[str], blobs: dict[str, bytes]) -> None:
        """Rebuild the folders on the paths of ``dirty`` files, deepest first."""
        touched: set[str] = {""}
        for path in dirty:
            folder, _, name = path.rpartition("/")
            entries = self._folders.setdefault(folder, {})
            entry = self.files.get(path)
            if entry is None:
                entries.pop(name, None)
            else:
                entries[name] = entry[0]
            while True:
                touched.add(folder)
                if not folder:
                    break
                folder = folder.rpartition("/")[0]
        for folder in sorted(touched, key=lambda f: (-f.count("/") - bool(f), f)):
            entries = self._folders.get(folder, {})
            parent, _, name = folder.rpartition("/")
            if not entries and folder:
                self._folders.pop(folder, None)
                self._digests.pop(folder, None)
                self._folders.get(parent, {}).pop(name + "/", None)
                continue
            data = json_bytes(entries, checked=False, sort_keys=True)
            digest = digest_of(data)
            self._digests[folder] = digest
            if folder:
                self._folders.setdefault(parent, {})[name + "/"] = digest
            blobs[digest] = data
        self.digest = self._digests[""]


def flatten(root: str, read: Callable[[str], bytes]) -> dict[str, str]:
    """``{path: hash}`` of every file under the folder blob ``root``."""
    files: dict[str, str] = {}
    pending = [("", root)]
    while pending:
        prefix, digest = pending.pop()
        entries = json.loads(read(digest))
        for name, child in entries.items():
            if name.endswith("/"):
                pending.append((prefix + name, child))
            else:
                files[prefix + name] = child
    return files


def hash_files(root: Path) -> dict[str, str]:
    """``{path: hash}`` of the files a :class:`FileTree` of ``root`` would hold, now."""
    tree = FileTree(root)
    tree.scan()
    return {path: digest for path, (digest, _) in tree.files.items()}


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
