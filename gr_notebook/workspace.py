"""The sandboxed working directory the agent reads and writes.

Every path the model names goes through :meth:`Workspace.resolve`, which refuses absolute
paths, ``..`` traversal and symlinks that lead outside, so a tool can never touch a file
beyond the workspace. Writes are atomic, so a crash mid-write never leaves half a file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from gr_notebook.errors import WorkspaceError

__all__ = ["TOOL_DOCS_DIR", "Workspace", "relative_path"]

TOOL_DOCS_DIR = "tools"
"""Where each tool's full documentation is written, for the pointers in Layer 3."""


def relative_path(raw: str | os.PathLike[str]) -> str:
    """The normalised relative form of a path the workspace may use, or a refusal.

    The lexical half of :meth:`Workspace.resolve` (no ``..``, nothing absolute, ``\\`` read
    as ``/``), for a path checked before any workspace exists, such as ``plan_file``.
    """
    raw = os.fspath(raw)
    if not isinstance(raw, str):
        raise WorkspaceError(f"path must be a string, got {type(raw).__name__}")
    if "\x00" in raw:
        raise WorkspaceError("path contains a NUL character; give a plain relative path")
    if not raw.strip():
        raise WorkspaceError("path is empty; give a path relative to the workspace")
    pure = PurePosixPath(raw.replace("\\", "/"))
    if pure.is_absolute() or (len(raw) > 1 and raw[1] == ":"):
        raise WorkspaceError(
            f"'{raw}' is an absolute path; give a path relative to the workspace, e.g. 'notes.md'"
        )
    normal = os.path.normpath(str(pure))
    if normal == ".." or normal.startswith("../"):
        raise WorkspaceError(
            f"'{raw}' leads outside the workspace (..); give a path inside it, e.g. 'notes.md'"
        )
    return normal


class Workspace:
    """A directory that confines every path given to it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        root = Path(path).expanduser()
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"workspace path '{root}' is a file; give a directory path")
        root.mkdir(parents=True, exist_ok=True)
        self._root = root.resolve()

    @property
    def root(self) -> Path:
        return self._root

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        """Map a workspace-relative path to a real path inside the workspace, or refuse it."""
        raw = os.fspath(rel)
        real = Path(os.path.realpath(self._root / relative_path(raw)))
        if real != self._root and not real.is_relative_to(self._root):
            raise WorkspaceError(
                f"'{raw}' resolves outside the workspace through a symlink; "
                "only files inside the workspace can be used"
            )
        return real

    def relative(self, path: Path) -> str:
        """The workspace-relative POSIX name of a path inside the workspace."""
        return path.relative_to(self._root).as_posix()

    def exists(self, rel: str) -> bool:
        try:
            return self.resolve(rel).exists()
        except WorkspaceError:
            return False

    def version(self, rel: str) -> tuple[int, int, int] | None:
        """What changes whenever the file is rewritten (inode, mtime, size); None if absent.

        Writes are atomic renames, so every write gets a new inode even within one mtime tick.
        """
        try:
            stat = self.resolve(rel).stat()
        except (OSError, WorkspaceError):
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def read_text(self, rel: str) -> str:
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"'{rel}' is a directory; use list_files('{rel}') to see it")
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise WorkspaceError(
                f"no file '{rel}' in the workspace; use list_files() to see what exists"
            ) from None
        except UnicodeDecodeError as exc:
            raise WorkspaceError(
                f"'{rel}' is not UTF-8 text (byte {exc.start}); it cannot be read as text"
            ) from None

    def write_text(self, rel: str, text: str) -> Path:
        """Write atomically (temp file, then rename), creating parent directories."""
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"'{rel}' is a directory; give a file path")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def files(self, rel: str = ".") -> Iterator[Path]:
        """Every regular file below ``rel``, sorted, skipping dot-directories and temp files.

        Symlinks are listed only when they resolve to a file inside the workspace, so a
        listing never reveals, or leads a reader to, anything outside it.
        """
        top = self.resolve(rel)
        if not top.exists():
            raise WorkspaceError(f"no directory '{rel}' in the workspace; try list_files('.')")
        if top.is_file():
            yield top
            return
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith(".") and name.endswith(".tmp"):
                    continue
                path = Path(dirpath, name)
                if path.is_symlink() and not self._inside(path):
                    continue
                yield path

    def _inside(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return real.is_file() and real.is_relative_to(self._root)

    def __repr__(self) -> str:
        return f"Workspace('{self._root}')"

    def __fspath__(self) -> str:
        return str(self._root)
