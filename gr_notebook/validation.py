"""The checks every configurable number goes through, so each says the same thing."""

from __future__ import annotations

import math

from gr_notebook.errors import ConfigError

__all__ = ["seconds", "whole_number"]


def whole_number(value: object, what: str) -> int:
    """A count of at least 1; ``True`` is not a count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def seconds(
    value: object, what: str, *, minimum: float | None = None, above: bool = False
) -> float:
    """A finite number of seconds; at least ``minimum`` (or above it, with ``above``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number of seconds, got {value!r}")
    if minimum is not None and (value <= minimum if above else value < minimum):
        bound = f"{'>' if above else '>='} {minimum:g}"
        raise ConfigError(f"{what} must be a number of seconds {bound}, got {value!r}")
    return float(value)
