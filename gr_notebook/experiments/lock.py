"""One experiment at a time in a folder, in any process: a file lock that names its holder.

Two experiments on one root clear each other's live run folders (an attempt's folder is
emptied before it is used) and run every cell twice, so an experiment holds ``<root>/.lock``
for as long as it runs. The lock is ``filelock``'s, an OS lock (``flock`` on Unix): the OS
drops it when the holder's process dies, however it dies, so a lock left by a killed
experiment is never in the way. Separate locks conflict within one process too, which keeps
two experiments of one kernel apart, and one experiment from running twice at once.
``filelock`` truncates its lock file when it opens it, so the holder's record, for the
refusal's message, lives beside it in ``.lock.json``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gr_notebook.errors import ConfigError, RunError

if TYPE_CHECKING:
    from filelock import BaseFileLock

__all__ = ["HOLDER_FILE", "LOCK_FILE", "ExperimentLock", "Holder"]

LOCK_FILE = ".lock"
HOLDER_FILE = ".lock.json"
"""The holder's record; it may outlive a killed holder, and is then never read (the lock is
free, so the next experiment takes it and writes its own)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who runs an experiment in a folder: enough for a person to find it."""

    experiment: str
    pid: int
    host: str
    started_at: float

    @classmethod
    def this_process(cls, experiment: str) -> Holder:
        return cls(experiment, os.getpid(), socket.gethostname(), time.time())

    def describe(self) -> str:
        mine = self.pid == os.getpid() and self.host == socket.gethostname()
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        where = "this process, " if mine else ""
        return (
            f"experiment {self.experiment!r} ({where}process {self.pid} on {self.host}, "
            f"running since {since})"
        )


class ExperimentLock:
    """The held lock of one running experiment; :meth:`release` it when the run ends."""

    def __init__(self, root: Path, lock: BaseFileLock) -> None:
        self.root = root
        self._lock: BaseFileLock | None = lock

    @classmethod
    def acquire(cls, root: Path, experiment: str) -> ExperimentLock:
        """Take ``root`` for this experiment, or refuse with the holder's name."""
        from filelock import FileLock, Timeout  # imported here, by the first run that needs it

        lock = FileLock(root / LOCK_FILE, thread_local=False)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            raise _in_use(root, _read_holder(root)) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot take the experiment's lock {root / LOCK_FILE}: {exc.strerror or exc}; "
                "give root= a folder you can write"
            ) from None
        try:
            _write_holder(root, Holder.this_process(experiment))
        except BaseException:
            lock.release()
            raise
        return cls(root, lock)

    def release(self) -> None:
        """Give the folder back; the record goes first. Safe to call twice."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            (self.root / HOLDER_FILE).unlink(missing_ok=True)
        finally:
            lock.release()

    @property
    def held(self) -> bool:
        return self._lock is not None


def _write_holder(root: Path, holder: Holder) -> None:
    """Written whole then renamed in, so a refused experiment never reads half a record."""
    path = root / HOLDER_FILE
    spare = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    spare.write_text(json.dumps(asdict(holder)), encoding="utf-8")
    os.replace(spare, path)


def _read_holder(root: Path) -> Holder | None:
    try:
        data = json.loads((root / HOLDER_FILE).read_text(encoding="utf-8"))
        return Holder(
            str(data["experiment"]), int(data["pid"]), str(data["host"]), float(data["started_at"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # the holder has not written it yet


def _in_use(root: Path, holder: Holder | None) -> RunError:
    who = holder.describe() if holder else "another experiment"
    return RunError(
        f"experiment folder {root} is in use by {who}; wait for it to end, or stop it "
        "(call .cancel() on that experiment object, or press Ctrl-C in its cell), or give "
        "this experiment another name= (or root=)"
    )
