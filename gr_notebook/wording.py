"""How counts read in the sentences the package writes, for people and for the model."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, word: str) -> str:
    """``plural(1, "run")`` is "1 run", ``plural(1200, "run")`` is "1,200 runs"."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"
