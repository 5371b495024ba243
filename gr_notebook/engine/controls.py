"""The controls a person uses on a live run: stop, pause, unpause and rewind, asked for at any
time and applied at the run's next safe point.

gr's loop honours them between turns (:class:`~gr_notebook.engine.loop.Loop` is built on
this class); a session of another harness (the Claude Agent SDK, LangChain) holds the same
controls without a loop, and its hooks honour a stop at the next call or reply. The
:class:`~gr_notebook.run.Run` handle and the dashboard act on a run only through them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gr_notebook.engine.outcome import RunStatus
    from gr_notebook.engine.state import RunState

__all__ = ["Controls"]


class Controls:
    """A run's state and the requests a person made of it, not yet applied."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self._stop_requested: str | None = None
        self.stop_status: RunStatus = "cancelled"
        """What a requested stop ends as: ``interrupted`` for Ctrl-C, else ``cancelled``."""
        self._resume = asyncio.Event()
        self._resume.set()
        self.paused = False
        """The run is waiting at a safe point (only gr's loop pauses)."""
        self.started = False
        """The run's turns have begun (only gr's loop runs them)."""

    def request_rewind(self, issue: str, *, reset_policies: bool = False) -> None:
        self.state.rewinds.append((issue, reset_policies))

    def request_stop(
        self, reason: str = "stopped by request", *, interrupted: bool = False
    ) -> None:
        self._stop_requested = reason
        self.stop_status = "interrupted" if interrupted else "cancelled"
        self._resume.set()  # a paused run wakes up to stop

    def request_pause(self) -> None:
        if not self._stop_requested:  # a stop already asked for wins; never hold it
            self._resume.clear()

    def request_unpause(self) -> None:
        self._resume.set()

    @property
    def pause_requested(self) -> bool:
        return not self._resume.is_set()

    @property
    def stop_reason(self) -> str | None:
        return self._stop_requested
