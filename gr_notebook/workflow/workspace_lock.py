"""One live run per workspace, in any process: an OS file lock that names its owner.

Two runs writing one ``todos.json`` and one plan corrupt each other silently, so a run takes
``.gr/run.lock`` in its workspace for as long as it lives. The lock is ``flock`` on an open
file: the kernel drops it when the owner's process dies, however it dies, so a lock left by a
killed run is recognised as stale without guessing from process ids, and the same test tells
a live run from a dead one (:func:`live_owner`). The file holds the owner's record, for the
refusal's message. Separate opens conflict even within one process, so this also keeps two
runs of one kernel apart.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from gr_notebook.errors import RunError, WorkspaceError
from gr_notebook.workflow.workspace import SYSTEM_DIR, open_system_file

try:
    import fcntl

    FLOCK = True
except ImportError:  # Windows: no flock; runs are then kept apart within a process only
    FLOCK = False

__all__ = ["LOCK_FILE", "LockOwner", "WorkspaceLock", "live_owner"]

_LOCK_NAME = "run.lock"
LOCK_FILE = f"{SYSTEM_DIR}/{_LOCK_NAME}"
"""Under a dot-directory, so ``list_files`` and the workspace summary never show it; never
opened through a link (a ``.gr`` that is one is refused: WorkspaceError)."""

_ATTEMPTS = 5
"""A probe by :func:`live_owner` holds the lock for an instant; an acquire retries past it."""

_LOCAL: set[Path] = set()  # the fallback without fcntl


@dataclass(frozen=True, slots=True)
class LockOwner:
    """Who holds a workspace: enough for a person to find the run and its process."""

    run_id: str
    pid: int
    host: str
    started_at: float

    @classmethod
    def this_process(cls, run_id: str, started_at: float) -> LockOwner:
        return cls(run_id, os.getpid(), socket.gethostname(), started_at)

    def describe(self) -> str:
        return f"run {self.run_id} (process {self.pid} on {self.host})"


class WorkspaceLock:
    """The held lock of one run; :meth:`release` it when the run ends."""

    def __init__(self, root: Path, handle: IO[str] | None) -> None:
        self._root = root
        self._handle = handle

    @classmethod
    def acquire(cls, root: Path, owner: LockOwner) -> WorkspaceLock:
        """Take the workspace for ``owner``, or refuse with the live owner's name."""
        if not FLOCK:
            if root in _LOCAL:
                raise _in_use(root, None)
            _LOCAL.add(root)
            return cls(root, None)
        handle = _open(root)
        for attempt in range(_ATTEMPTS):
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == _ATTEMPTS - 1:
                    current = _read_owner(handle)
                    handle.close()
                    raise _in_use(root, current) from None
                time.sleep(0.01)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(asdict(owner)))
        handle.flush()
        return cls(root, handle)

    def release(self) -> None:
        """Give the workspace back; the record is cleared first. Safe to call twice."""
        handle, self._handle = self._handle, None
        if handle is None:
            _LOCAL.discard(self._root)
            return
        try:
            handle.seek(0)
            handle.truncate()
        finally:
            handle.close()  # closing drops the flock


def live_owner(root: str | os.PathLike[str]) -> LockOwner | None:
    """The owner of the workspace's lock if a live process holds it, else None.

    A held lock whose record cannot be read yet (its owner is writing it) reads as an
    owner with an empty run id: someone live holds it, but not a known run. A ``.gr`` that
    is a symlink is refused (WorkspaceError), never read through.
    """
    if not FLOCK:  # no way to tell: never call a run dead that may be alive
        return LockOwner("", 0, "", 0.0)
    try:
        fd = open_system_file(Path(root), _LOCK_NAME, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:  # no lock file, or no workspace: nobody holds it
        return None
    handle = os.fdopen(fd, "r", encoding="utf-8")
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_owner(handle) or LockOwner("", 0, "", 0.0)
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


def _open(root: Path) -> IO[str]:
    path = root / LOCK_FILE
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = open_system_file(root, _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        return os.fdopen(fd, "a+", encoding="utf-8")
    except OSError as exc:
        raise WorkspaceError(
            f"cannot take the workspace lock {path}: {exc.strerror or exc}; give a writable "
            "workspace"
        ) from None


def _read_owner(handle: IO[str]) -> LockOwner | None:
    try:
        handle.seek(0)
        data = json.loads(handle.read())
        return LockOwner(
            str(data["run_id"]), int(data["pid"]), str(data["host"]), float(data["started_at"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _in_use(root: Path, owner: LockOwner | None) -> RunError:
    who = owner.describe() if owner else "another run"
    return RunError(
        f"workspace {root} is in use by {who}; give each concurrent run its own workspace "
        "(workspace=None makes a fresh one), or stop that run first"
    )
