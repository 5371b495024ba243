"""The sandboxed working directory the agent reads and writes.

Every path the model names goes through :meth:`Workspace.resolve`, which refuses absolute
paths, ``..`` traversal and symlinks that lead outside, so a tool can never touch a file
beyond the workspace. Writes are atomic, so a crash mid-write never leaves half a file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat as stat_module
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gr_notebook.errors import WorkspaceError

__all__ = [
    "TOOL_DOCS_DIR",
    "Workspace",
    "display_name",
    "has_link",
    "open_folders",
    "open_system_file",
    "open_system_folder",
    "read_regular",
    "relative_path",
    "replace_in",
    "special_kind",
]

SYSTEM_DIR = ".gr"
"""The system's own folder (the run's lock, its writes journal, the files a resume sets
aside): no path given to the workspace reaches it, and the system never reaches it through
a link (:func:`open_system_folder`)."""
TOOL_DOCS_DIR = "tools"
"""Where each tool's full documentation is written, for the pointers in Layer 3."""

_SPECIAL_KINDS = (
    (stat_module.S_ISFIFO, "FIFO"),
    (stat_module.S_ISSOCK, "socket"),
    (stat_module.S_ISCHR, "character device"),
    (stat_module.S_ISBLK, "block device"),
)


def has_link(root: str, normal: str) -> bool:
    """Whether the normal relative path ``normal`` under ``root`` is, or lies below, a
    symlink: one ``lstat`` per component, up to the first that is absent."""
    path = root
    for part in normal.split("/"):
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return False  # absent (or not a directory): nothing below it can be a link
        if stat_module.S_ISLNK(mode):
            return True
    return False


def display_name(name: str) -> str:
    """``name`` as text that always encodes as UTF-8, for summaries, listings and events.

    Python keeps the bytes of a file name that is not UTF-8 as lone surrogates, which no
    UTF-8 writer accepts; they are shown as ``\\xNN`` escapes (``caf\\xe9.txt``) instead.
    """
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that never came from a byte
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is neither a regular file nor a directory
    (a FIFO, socket or device: opening one to read can block forever); else None."""
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None)


def read_regular(path: Path, *, limit: int = -1, name: str | None = None) -> bytes:
    """The bytes of a regular file (the first ``limit`` only, if given), or WorkspaceError.

    The kind is checked before opening, and the open never blocks or follows a link, so a
    FIFO, socket or device, even one swapped in after the check, is refused at once.
    """
    name = name or path.name
    try:
        mode = os.stat(path).st_mode
        if stat_module.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                mode = os.fstat(fd).st_mode
                if stat_module.S_ISREG(mode):
                    return handle.read(limit)
    except FileNotFoundError:
        raise WorkspaceError(
            f"no file '{name}' in the workspace; use list_files() to see what exists"
        ) from None
    except OSError as exc:
        raise WorkspaceError(f"'{name}' cannot be read ({exc.strerror})") from None
    if stat_module.S_ISDIR(mode):
        raise WorkspaceError(f"'{name}' is a directory; use list_files('{name}') to see it")
    raise WorkspaceError(
        f"'{name}' is a {special_kind(mode) or 'special file'}, not a regular file; only "
        "regular files can be read"
    )


def _encode(rel: str, text: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(
            f"the text for '{display_name(rel)}' holds a lone surrogate at character "
            f"{exc.start} ({display_name(text[exc.start])}), which UTF-8 cannot store; "
            "remove it or write the character it stands for"
        ) from None


def open_folders(root: Path, folders: list[str], rel: str) -> int:
    """A descriptor of the folder ``root/folders...``, made as needed, never via a link."""

    def refusal(parent: int, depth: int, exc: OSError) -> Exception:
        return _folder_refusal(parent, "/".join(folders[:depth]), folders[depth - 1], rel, exc)

    return _descend(root, folders, create=True, refusal=refusal)


def _descend(
    root: Path,
    names: Sequence[str],
    *,
    create: bool,
    refusal: Callable[[int, int, OSError], Exception],
) -> int:
    """A descriptor of ``root/names...``, each folder made first when ``create``, then opened
    relative to the last with ``O_NOFOLLOW``; ``refusal(parent, depth, error)`` is raised for
    one that cannot be opened."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, name in enumerate(names, start=1):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise refusal(fd, depth, exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _folder_refusal(fd: int, where: str, folder: str, rel: str, exc: OSError) -> WorkspaceError:
    shown, where = display_name(rel), display_name(where)
    try:
        mode = os.stat(folder, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat_module.S_ISLNK(mode):
        return WorkspaceError(
            f"'{where}' became a symlink while '{shown}' was being written, so the write was "
            "refused (it could land outside the workspace); check that folder, then write again"
        )
    if mode and not stat_module.S_ISDIR(mode):
        return WorkspaceError(
            f"'{where}' is a file, not a directory, so '{shown}' cannot be written; "
            "choose another path"
        )
    return WorkspaceError(f"'{shown}' cannot be written ({exc.strerror})")


def open_system_folder(root: Path, *folders: str, create: bool = True) -> int:
    """A descriptor of the folder ``root/.gr/folders...``, made as needed (unless not
    ``create``: a missing one raises FileNotFoundError).

    Each folder is opened relative to the last with ``O_NOFOLLOW``: a ``.gr`` (or a folder
    in it) that is a symlink is refused with a WorkspaceError, never followed, since the
    lock, the journal and the files a resume sets aside would land where it points.
    """
    names = (SYSTEM_DIR, *folders)

    def refusal(parent: int, depth: int, exc: OSError) -> Exception:
        return _system_refusal(root, names[:depth], parent, exc)

    return _descend(root, names, create=create, refusal=refusal)


def open_system_file(root: Path, rel: str, flags: int, mode: int = 0o666) -> int:
    """A descriptor of the file ``root/.gr/rel``, opened with ``flags`` and never through a
    link (see :func:`open_system_folder`); its folders are made when ``flags`` creates.
    A missing file (or folder) raises FileNotFoundError."""
    *folders, name = rel.split("/")
    folder = open_system_folder(root, *folders, create=bool(flags & os.O_CREAT))
    try:
        return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=folder)
    except OSError as exc:
        raise _system_refusal(root, (SYSTEM_DIR, *folders, name), folder, exc) from None
    finally:
        os.close(folder)


def _system_refusal(
    root: Path, names: tuple[str, ...], parent: int, exc: OSError
) -> WorkspaceError | OSError:
    """Why ``root/names`` could not be opened: a link (refused), or the OS's own error."""
    try:
        linked = stat_module.S_ISLNK(
            os.stat(names[-1], dir_fd=parent, follow_symlinks=False).st_mode
        )
    except OSError:
        linked = False
    where = os.path.join(root, *names)
    if linked:
        return WorkspaceError(
            f"{where} is a symlink; the system's folder {SYSTEM_DIR}/ is never reached "
            "through a link (the run's lock, its journal and the files a resume sets aside "
            "would land where it points): remove the link, then try again"
        )
    if isinstance(exc, FileNotFoundError):
        return exc
    return WorkspaceError(
        f"{where} cannot be used ({exc.strerror}); the system keeps its lock and journal "
        f"in {SYSTEM_DIR}/: make it a writable folder, then try again"
    )


def replace_in(folder: int, name: str, data: bytes, rel: str) -> None:
    """Write ``data`` to a fresh temp file in ``folder``, then rename it over ``name``.

    Neither step follows a link: the temp file is created exclusively with ``O_NOFOLLOW``,
    and a rename replaces a link at ``name`` rather than writing through it.
    """
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=folder
        )
    except OSError as exc:
        raise WorkspaceError(f"'{display_name(rel)}' cannot be written ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        if isinstance(exc, OSError):
            raise WorkspaceError(
                f"'{display_name(rel)}' cannot be written ({exc.strerror})"
            ) from None
        raise


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
    try:
        os.fsencode(raw)
    except UnicodeEncodeError:
        raise WorkspaceError(
            f"'{display_name(raw)}' holds characters no file name can; use plain text"
        ) from None
    pure = raw.replace("\\", "/")
    if pure.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise WorkspaceError(
            f"'{raw}' is an absolute path; give a path relative to the workspace, e.g. 'notes.md'"
        )
    normal = os.path.normpath(pure)
    if normal == ".." or normal.startswith("../"):
        raise WorkspaceError(
            f"'{raw}' leads outside the workspace (..); give a path inside it, e.g. 'notes.md'"
        )
    if normal == SYSTEM_DIR or normal.startswith(f"{SYSTEM_DIR}/"):
        raise WorkspaceError(
            f"'{raw}' is in {SYSTEM_DIR}/, which the system keeps for itself (the run's lock); "
            "use any other path, e.g. 'notes.md'"
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
        self._root_text = str(self._root)
        self._watchers: list[Callable[[str], object]] = []

    def watch(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(path)`` before each write made through this workspace, with the
        file's workspace-relative POSIX path (a run's checkpoints hash only what changed);
        returns a function that stops it."""
        self._watchers.append(callback)

        def unwatch() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)

        return unwatch

    @property
    def root(self) -> Path:
        return self._root

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        """Map a workspace-relative path to a real path inside the workspace, or refuse it.

        The root is real already, so only the components below it are looked at: without a
        symlink among them the path is the root joined with the normal form, one ``lstat``
        per component; with one, ``os.path.realpath`` resolves it all and the result must
        still be inside. Every tool call resolves paths, so this is on the loop's hot path.
        """
        raw = os.fspath(rel)
        normal = relative_path(raw)
        if normal == ".":
            return self._root
        if has_link(self._root_text, normal):
            return self._through_links(raw, normal)
        return Path(self._root_text, normal)

    def _through_links(self, raw: str, normal: str) -> Path:
        real = Path(os.path.realpath(os.path.join(self._root_text, normal)))
        if real != self._root and not real.is_relative_to(self._root):
            raise WorkspaceError(
                f"'{raw}' resolves outside the workspace through a symlink; "
                "only files inside the workspace can be used"
            )
        return real

    def relative(self, path: Path) -> str:
        """The workspace-relative POSIX name of a path inside the workspace."""
        return path.relative_to(self._root).as_posix()

    def shown(self, path: Path) -> str:
        """:meth:`relative`, as text safe to write anywhere (see :func:`display_name`)."""
        return display_name(self.relative(path))

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
        """The text of a regular UTF-8 file; anything else is refused without blocking."""
        data = read_regular(self.resolve(rel), name=rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkspaceError(
                f"'{rel}' is not UTF-8 text (byte {exc.start}); it cannot be read as text"
            ) from None

    def write_text(self, rel: str, text: str) -> Path:
        """Write atomically (temp file, then rename), creating parent directories.

        After :meth:`resolve` checks the path, the write walks it again from the root one
        directory at a time, each opened relative to the last with ``O_NOFOLLOW``: a symlink
        swapped in between the check and the write is refused, never followed.
        """
        path = self.resolve(rel)
        data = _encode(rel, text)
        *folders, name = path.relative_to(self._root).parts or ("",)
        if not name or path.is_dir():
            raise WorkspaceError(f"'{display_name(rel)}' is a directory; give a file path")
        for watcher in self._watchers:
            watcher("/".join((*folders, name)))
        parent = open_folders(self._root, folders, rel)
        try:
            replace_in(parent, name, data, rel)
        finally:
            os.close(parent)
        return path

    def files(self, rel: str = ".") -> Iterator[Path]:
        """Every regular file below ``rel``, sorted, skipping dot-directories and temp files.

        Symlinks are listed only when they resolve to a file inside the workspace, so a
        listing never reveals, or leads a reader to, anything outside it.
        """
        return (path for path, kind in self.entries(rel) if kind is None)

    def entries(self, rel: str = ".") -> Iterator[tuple[Path, str | None]]:
        """:meth:`files`, with FIFOs, sockets and devices too, each with its
        :func:`special_kind` (None for a regular file), so listings can label them."""
        top = self.resolve(rel)
        if not top.exists():
            raise WorkspaceError(f"no directory '{rel}' in the workspace; try list_files('.')")
        if not top.is_dir():
            yield top, special_kind(top.stat().st_mode)
            return
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith(".") and name.endswith(".tmp"):
                    continue
                path = Path(dirpath, name)
                try:
                    mode = path.lstat().st_mode
                except OSError:
                    continue  # gone since the walk listed it
                if stat_module.S_ISLNK(mode):
                    if self._inside(path):
                        yield path, None
                    continue
                yield path, special_kind(mode)

    def _inside(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return real.is_file() and real.is_relative_to(self._root)

    def __repr__(self) -> str:
        return f"Workspace('{self._root}')"

    def __fspath__(self) -> str:
        return str(self._root)
