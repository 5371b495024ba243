"""Rate-limit redraws: many events a second in, at most ``1 / interval`` renders out.

Events only mark the view stale; the render itself is deferred to the event loop (a
trailing call), so a subscriber costs the agent loop a flag check, never a redraw. Without
a running loop (a script, a finished run) it renders inline, still rate-limited.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["DEFAULT_INTERVAL", "Scheduler", "Throttle", "loop_scheduler"]

DEFAULT_INTERVAL = 0.1  # seconds: 10 Hz at most
logger = logging.getLogger("gr_notebook")


class Scheduler(Protocol):
    """Calls ``callback`` after ``delay`` seconds; returns False when it cannot schedule."""

    def __call__(self, delay: float, callback: Callable[[], None]) -> bool: ...


def loop_scheduler(delay: float, callback: Callable[[], None]) -> bool:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.call_later(delay, callback)
    return True


class Throttle:
    def __init__(
        self,
        render: Callable[[], None],
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        scheduler: Scheduler = loop_scheduler,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self._render = render
        self.interval = interval
        self._clock = clock
        self._scheduler = scheduler
        self._on_error = on_error
        self._last = float("-inf")
        self._scheduled = False
        self.stale = False
        self.renders = 0

    def poke(self) -> None:
        """Something changed: render soon, but not sooner than ``interval`` after the last."""
        self.stale = True
        if self._scheduled:
            return
        delay = max(0.0, self._last + self.interval - self._clock())
        if self._scheduler(delay, self._fire):
            self._scheduled = True
        elif delay == 0.0:
            self._fire()

    def flush(self) -> None:
        """Render now if anything is stale (a run ended; its final state must show)."""
        if self.stale:
            self._draw()

    def _fire(self) -> None:
        self._scheduled = False
        if self.stale:
            self._draw()

    def _draw(self) -> None:
        """A failing render goes to ``on_error``, never to the event loop's handler, which
        would print into whatever cell happens to be running."""
        self.stale = False
        self._last = self._clock()
        self.renders += 1
        try:
            self._render()
        except Exception as exc:
            if self._on_error is None:
                logger.exception("a redraw failed")
            else:
                self._on_error(exc)
