"""Time as the guardrails see it: any ``() -> float`` of epoch seconds, injectable.

Deadlines, ``every_n_seconds`` triggers and event times all read the agent's clock, so a
test drives time with a :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from gr_notebook.errors import ConfigError
from gr_notebook.validation import seconds as _seconds

__all__ = ["Clock", "FakeClock"]

Clock: TypeAlias = Callable[[], float]


class FakeClock:
    """A clock that moves only when told: ``clock.advance(30)``."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = _seconds(start, "start")

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward; time never runs backwards, so negative steps are refused."""
        seconds = _seconds(seconds, "seconds")
        if seconds < 0:
            raise ConfigError(f"a clock cannot go back; advance by >= 0 seconds, not {seconds}")
        self._now += seconds
        return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"
