"""When to try a failed model request again, and how long to wait first.

The adapter retries by itself (the SDK's own retries are off), so that every retry is an
event a person can see, and a stop during the wait is honoured at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from gr_notebook.errors import ConfigError

__all__ = ["MAX_RETRY_AFTER_S", "RetryPolicy", "parse_retry_after"]

MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: ``base_s``, doubling each retry, at most ``max_s``. A server's
    ``retry-after`` wins when it is above 0 and at most ``MAX_RETRY_AFTER_S``, as in the SDK:
    a longer wait is not worth holding a run for, and 0 would retry in a tight loop."""

    max_retries: int = 4
    base_s: float = 1.0
    max_s: float = 30.0

    def __post_init__(self) -> None:
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"max_retries must be a whole number >= 0, got {retries!r}")
        for name in ("base_s", "max_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a number of seconds >= 0, got {value!r}")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        if retry_after is not None and 0 < retry_after <= MAX_RETRY_AFTER_S:
            return retry_after
        return float(min(self.max_s, self.base_s * 2.0 ** (retry - 1)))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """A ``retry-after`` header in seconds (``"2"``, ``"0.5"``) or as an HTTP date."""
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = when - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)
