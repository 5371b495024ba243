"""The workspace of a recorded run as it was at each moment of a replay, rebuilt from its
checkpoints in a temporary directory.

A checkpoint holds the files as a turn began (``{path: hash}``). The first one is written
out whole; each later one changes only the files that differ from what the directory holds,
so a replay writes each version of a file once. Every write gets its own modification time
from a counter, never the wall clock: ``ReadBeforeWritePolicy`` stamps a file by (mtime,
size), and a file the replay did not change must keep its stamp from turn to turn.

Inside a turn the checkpoints say nothing, so the directory tracks what it knows: a call
that wrote a file's whole content (``write_file``, Claude's ``Write``) is written again from
its full input, and a call of a tool that never writes (:data:`LEAVE_FILES`) changes
nothing; after any other call that succeeded, the files the turn changed (the next
checkpoint says which) are *uncertain*, and a guardrail that reads one of them gets "cannot
tell" instead of a guess. After the turn's last call the files are the next checkpoint's
again (:meth:`ReplayWorkspace.settle`), unless a person rewound or paused in between.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.digests import digest_of
from gr_notebook.errors import WorkspaceError
from gr_notebook.guardrails.paths import canonical_path
from gr_notebook.workflow.workspace import Workspace
from gr_notebook.workflow.workspace_restore import stored_parts

if TYPE_CHECKING:
    from gr_notebook.history.checkpoint_store import Checkpoint

__all__ = ["LEAVE_FILES", "WHOLE_WRITES", "ReplayWorkspace"]

LEAVE_FILES = frozenset(
    {"read_file", "list_files", "search", "check_resources", "Read", "Glob", "Grep"}
)
"""Tools that never change a file: a call of one leaves what the replay knows as it was."""

WHOLE_WRITES = frozenset({"write_file", "Write"})
"""Tools whose input holds a file's whole new content (``path``/``file_path`` and
``content``): a replay writes it again, so the file stays known inside the turn."""
_PATH_PARAMS = ("path", "file_path")
_TICK_NS = 1_000_000
_EPOCH_NS = 1_600_000_000 * 1_000_000_000


class ReplayWorkspace:
    """A temporary directory that holds a recorded run's files as the replay goes on.

    ``known`` is False until a checkpoint was applied (a run without checkpoints never
    knows its files). Call :meth:`close` (or use it as a context manager) to delete it.
    """

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="gr-replay-", dir=_in_memory())
        self.workspace = Workspace(self._dir)
        self.known = False
        self._hashes: dict[str, str] = {}
        """What the directory holds at this moment of the run: path → hash of its bytes."""
        self._stamps: dict[str, int] = {}
        """The tick each file was (logically) written at: its modification time."""
        self._content: dict[str, Callable[[], bytes]] = {}
        """How to read each file's bytes when it is written out."""
        self._disk: dict[str, tuple[str, int]] = {}
        """What is written out: path → (hash, tick). Files are written when a guardrail is
        about to read them (:meth:`materialize`), not when the record changes them."""
        self._ticks = 0
        self._following: Mapping[str, str] | None = {}
        """The files as the turn ends (the next checkpoint's; None: not known)."""
        self._changing: frozenset[str] = frozenset()
        """The files this turn changes."""
        self._uncertain: set[str] = set()
        self._all_uncertain = False
        self._read: Callable[[str], bytes] = _nothing
        self._folders: set[str] = set()
        """The folders made so far (a file's folder is made once)."""
        self._names: dict[str, str] = {}

    # -- turn boundaries ----------------------------------------------------------------------

    def begin_turn(
        self, checkpoint: Checkpoint | None, following: Mapping[str, str] | None
    ) -> None:
        """The turn begins: the directory takes ``checkpoint``'s files (when the run has
        one for this turn), and ``following`` (the next checkpoint's files, None when there
        is none) says which files this turn changes."""
        if checkpoint is not None:
            self._read = checkpoint.read
            self._apply(checkpoint.files, checkpoint.read)
        self.known = checkpoint is not None
        self._uncertain.clear()
        self._all_uncertain = False
        self._following = following
        if following is not None:
            self._changing = frozenset(
                p
                for p in set(self._hashes) | set(following)
                if self._hashes.get(p) != following.get(p)
            )

    def _apply(self, files: Mapping[str, str], read: Callable[[str], bytes]) -> None:
        for path in [p for p in self._hashes if p not in files]:
            self._forget(path)
        for path, digest in files.items():
            if self._hashes.get(path) != digest:
                self._set(path, digest, functools.partial(read, digest))

    def _set(self, name: str, digest: str, content: Callable[[], bytes]) -> None:
        """The file ``name`` holds ``content`` from now on, written at the next tick."""
        stored_parts(name)  # a name that leads out of the folder is refused here
        self._ticks += 1
        self._hashes[name], self._stamps[name], self._content[name] = digest, self._ticks, content

    def _forget(self, name: str) -> None:
        for table in (self._hashes, self._stamps, self._content):
            table.pop(name, None)

    # -- inside a turn --------------------------------------------------------------------------

    def after_call(self, tool: str, params: Mapping[str, Any], *, succeeded: bool) -> None:
        """A recorded call ran: write a whole-content write again; after any other call
        that succeeded, the turn's changing files are no longer known."""
        if not succeeded or not self.known or tool in LEAVE_FILES:
            return
        if tool in WHOLE_WRITES:
            path, content = _path_of(params), params.get("content")
            if path is not None and isinstance(content, str):
                data = content.encode()
                try:
                    name = canonical_path(self.workspace, path)
                    self._set(name, digest_of(data), lambda: data)
                except WorkspaceError:
                    return  # refused by the tool live (or names no file), so nothing was written
                self._uncertain.discard(name)
                return
        if self._following is None:
            self._all_uncertain = True
        else:  # a file already as the turn leaves it was written again above: it stays known
            final = self._following
            self._uncertain |= {p for p in self._changing if self._hashes.get(p) != final.get(p)}

    def settle(self) -> None:
        """The turn's last call ran and nothing else touched the files before the next
        checkpoint: they are the next checkpoint's, known again."""
        following = self._following
        if not self.known or following is None:
            return
        self._apply(following, self._read)
        self._uncertain.clear()
        self._all_uncertain = False

    def materialize(self, paths: Iterable[str] | None) -> None:
        """Write out the files a guardrail is about to read (``None``: all of them) as they
        are at this moment, each with the modification time of its logical write, and
        remove what no longer is."""
        if paths is None:
            names = set(self._disk) | set(self._hashes)
        else:
            names = {self._name(p) for p in paths}
        for name in sorted(names):
            want, have = self._hashes.get(name), self._disk.get(name)
            if want is None:
                if have is not None:
                    self._remove(name)
            elif have != (want, self._stamps[name]):
                self._write(name, self._content[name](), self._stamps[name])
                self._disk[name] = (want, self._stamps[name])

    def knows(self, paths: Iterable[str] | None) -> bool:
        """Whether the directory holds these files as they were live at this moment
        (``None``: any file, the whole workspace)."""
        if not self.known:
            return False
        if paths is None:
            return not (self._all_uncertain or self._uncertain)
        if self._all_uncertain:
            return False
        return not any(self._name(p) in self._uncertain for p in paths)

    def _name(self, raw: str) -> str:
        """``raw`` as the workspace names it (remembered: a replay makes no link)."""
        name = self._names.get(raw)
        if name is None:
            try:
                name = canonical_path(self.workspace, raw)
            except WorkspaceError:
                name = raw
            self._names[raw] = name
        return name

    # -- files ----------------------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        """Where the file ``name`` lies: never outside the directory (WorkspaceError)."""
        return Path(self._dir, *stored_parts(name))

    def _write(self, name: str, data: bytes, tick: int) -> None:
        parts = stored_parts(name)
        where = os.path.join(self._dir, *parts)
        if len(parts) > 1:
            folder = os.path.dirname(where)
            if folder not in self._folders:
                for depth in range(1, len(parts)):  # a file written out earlier in the way
                    above = "/".join(parts[:depth])
                    if above in self._disk:
                        self._remove(above)
                os.makedirs(folder, exist_ok=True)
                self._folders.add(folder)
        if os.path.islink(where) or os.path.isdir(where):
            self._remove(name)
        with open(where, "wb") as file:
            file.write(data)
        stamp = _EPOCH_NS + tick * _TICK_NS
        os.utime(where, ns=(stamp, stamp))

    def _remove(self, name: str) -> None:
        path = self._path(name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            self._folders = {f for f in self._folders if not Path(f).is_relative_to(path)}
            self._disk = {p: v for p, v in self._disk.items() if not p.startswith(name + "/")}
        else:
            path.unlink(missing_ok=True)
        self._disk.pop(name, None)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ReplayWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHM = "/dev/shm"


def _in_memory() -> str | None:
    """A folder in memory for the replay's files (tmpfs, where the system has one): a
    replay writes each version of every file, and a disk makes that most of its time.
    None (the system's temporary folder) where there is none, or ``TMPDIR`` says where."""
    if os.environ.get("TMPDIR") is None and os.path.isdir(_SHM) and os.access(_SHM, os.W_OK):
        return _SHM
    return None


def _nothing(digest: str) -> bytes:
    raise LookupError(f"no checkpoint to read {digest} from")


def _path_of(params: Mapping[str, Any]) -> str | None:
    for name in _PATH_PARAMS:
        value = params.get(name)
        if isinstance(value, str):
            return value
    return None
