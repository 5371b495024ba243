"""A spent limit as a value: which limit, how much was used, and the limit.

It rides on the ``run_finished`` and ``request_over_budget`` events and on the run's
outcome, so it sits below both the budget that finds it and the events that carry it; its
sentence is only how it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["LimitKind", "SpentLimit", "usd"]

LimitKind: TypeAlias = Literal["iterations", "tokens", "time", "cost"]
"""``cost`` is US dollars, priced from the model's price table."""


def usd(value: float) -> str:
    """Dollars as a person reads them: cents for whole cents, else four decimals."""
    if abs(value) >= 100 or abs(round(value, 2) - value) < 1e-9:
        return f"${value:,.2f}"
    return f"${value:,.4f}"


@dataclass(frozen=True, slots=True)
class SpentLimit:
    """A limit that ended, or would end, the run: which one, how much was used, the limit.

    ``request`` is set when it is the next model request that does not fit: the input
    tokens it needs, as the model counted them before sending. For the cost limit
    ``request_cost_usd`` is what that request could cost at most.
    """

    kind: LimitKind
    used: float
    limit: float
    request: int | None = None
    request_cost_usd: float | None = None

    @property
    def remaining(self) -> float:
        return self.limit - self.used

    @property
    def reason(self) -> str:
        """The sentence a person reads (the run's reason, the event's text)."""
        if self.kind == "cost":
            if self.request_cost_usd is not None:
                return (
                    f"the next request could cost up to {usd(self.request_cost_usd)} and "
                    f"{usd(max(self.remaining, 0.0))} remain of the cost limit of "
                    f"{usd(self.limit)}; it was not sent"
                )
            return f"the cost limit of {usd(self.limit)} was reached ({usd(self.used)} spent)"
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
