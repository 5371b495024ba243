"""Ctrl-C in a cell that blocks on a run: stop the run, then raise, at a safe point.

A blocking ``%%agent`` cell waits for a run that goes on in a worker thread
(:func:`~gr_notebook.blocking.run_blocking`). A ``KeyboardInterrupt`` raised in the waiting
thread would cancel the run's task wherever it is. So while the cell blocks, SIGINT only asks
the run to stop (through its loop's thread-safe door); the run records ``run_finished`` as
``interrupted`` and the cell raises ``KeyboardInterrupt`` once it has. ipykernel does the same
for top-level ``await`` cells, by cancelling them. A second Ctrl-C raises at once, for a run
stuck where a stop cannot reach it.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gr_notebook.run import Run

__all__ = ["INTERRUPTED", "CtrlC"]

INTERRUPTED = "interrupted by the person (Ctrl-C)"


class CtrlC:
    """Used as ``with CtrlC() as ctrl_c:`` around the blocking wait; :meth:`watch` the run
    once it exists. Outside the main thread (where signals cannot be handled) it does
    nothing."""

    def __init__(self) -> None:
        self.pressed = 0
        self._stop: functools.partial[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = None
        self._installed = False

    def watch(self, run: Run) -> None:
        """Stop ``run`` on Ctrl-C; call it on the loop the run runs on."""
        self._loop = asyncio.get_running_loop()
        self._stop = functools.partial(run.cancel, INTERRUPTED, interrupted=True)
        if self.pressed:
            self._stop()

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
        if self.pressed and exc is None:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt
        if self._stop is not None and self._loop is not None:  # no run yet: watch() stops it
            self._loop.call_soon_threadsafe(self._stop)
