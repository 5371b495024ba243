"""The workspace's files by content: what a checkpoint keeps of them.

A :class:`FileTree` holds the hash of every regular file of the workspace, kept up to date
path by path, so a turn that wrote one file rehashes that file alone. What a listing skips
is left out here too: dot-folders (``.gr/``, the system's), temp files and symlinks.
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Iterable
from pathlib import Path

from gr_notebook.digests import digest_of
from gr_notebook.errors import WorkspaceError
from gr_notebook.workflow.workspace import read_regular

__all__ = ["FileTree", "Stamp", "hash_files"]

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
            data = read_regular(Path(full))
        except WorkspaceError:
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


def _hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.split("/")[:-1])
