"""A spent limit as a value: which limit, how much was used, and the limit.

It rides on the ``run_finished`` and ``request_over_budget`` events and on the run's
outcome, so it sits below both the budget that finds it and the events that carry it; its
sentence is only how it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["LimitKind", "SpentLimit"]

LimitKind: TypeAlias = Literal["iterations", "tokens", "time"]


@dataclass(frozen=True, slots=True)
class SpentLimit:
    """A limit that ended, or would end, the run: which one, how much was used, the limit.

    ``request`` is set when it is the next model request that does not fit: the input
    tokens it needs, as the model counted them before sending.
    """

    kind: LimitKind
    used: float
    limit: float
    request: int | None = None

    @property
    def remaining(self) -> float:
        return self.limit - self.used

    @property
    def reason(self) -> str:
        """The sentence a person reads (the run's reason, the event's text)."""
        if self.request is not None:
            return (
                f"the next request needs {self.request:,} input tokens (counted before "
                f"sending) and {self.remaining:,.0f} remain of the token budget; it was "
                "not sent"
            )
        if self.kind == "iterations":
            return f"the iteration cap of {self.limit:.0f} was reached"
        if self.kind == "tokens":
            return f"the token budget of {self.limit:,.0f} was used ({self.used:,.0f} tokens)"
        return f"the deadline of {self.limit:g} s passed ({self.used:.1f} s elapsed)"

    def __str__(self) -> str:
        return self.reason
