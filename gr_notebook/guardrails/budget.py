"""``Budget``: the limits a run works within, and the one test of whether one is spent.

Every limit is compared the same way: a limit is *exhausted* once usage has reached it
(``used >= limit``). That is the rule for tokens, for iterations, for the deadline and for
the cost, and it is the rule that ends a run and that lets a task-completion check be
bypassed.

``Budget.suggest`` learns limits from past runs, which ``history/adaptive.py`` reads: it asks
the :class:`BudgetAdvisor` that ``import gr_notebook`` sets, so this module and that one,
which makes budgets, do not import each other. The token
and cost limits are also checked before each model request (:meth:`BudgetUsage.admits`): a
request that needs more than is left, or could cost more, is never sent.

A spent limit is a value, :class:`SpentLimit` (which limit, how much was used, the limit),
carried on the event and on the run's outcome; its sentence is only how it reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from gr_notebook.errors import ConfigError
from gr_notebook.limits import LimitKind, SpentLimit
from gr_notebook.validation import seconds, whole_number
from gr_notebook.wording import plural

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget_table import BudgetTable
    from gr_notebook.history.store import StoreLike

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "Budget",
    "BudgetAdvisor",
    "BudgetSuggestion",
    "BudgetUsage",
    "Deadline",
    "LimitKind",
    "SpentLimit",
    "set_advisor",
]


DEFAULT_MAX_ITERATIONS = 200
"""The default cap on model calls: room for the README's and the notebooks' jobs twice over
before the 80% wrap-up mark, for a real model and phases that outgrow their allotments, while
still stopping a runaway loop."""


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one run; ``None`` means no limit of that kind."""

    max_tokens: int | None = None
    """Cumulative input and output tokens over every model call."""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    """Model calls (turns)."""
    deadline_s: float | None = None
    """Wall-clock seconds from the start of the run, read from the agent's clock."""
    max_cost_usd: float | None = None
    """US dollars over every model call, as the model's prices count them; the agent must
    know its model's prices (``gr.Agent(price=...)`` for a model with none)."""

    def __post_init__(self) -> None:
        whole_number(self.max_iterations, "max_iterations")
        if self.max_tokens is not None:
            whole_number(self.max_tokens, "max_tokens")
        if self.deadline_s is not None:
            seconds(self.deadline_s, "deadline_s", minimum=0, above=True)
        if self.max_cost_usd is not None:
            cost = self.max_cost_usd
            if (
                isinstance(cost, bool)
                or not isinstance(cost, (int, float))
                or not math.isfinite(cost)
                or cost < 0
            ):
                raise ConfigError(
                    "max_cost_usd is the most the run may spend on model calls, in US "
                    "dollars: a finite number >= 0 such as gr.Budget(max_cost_usd=2.50), or "
                    f"None for no cost limit; got {cost!r}"
                )

    def __repr__(self) -> str:  # a cost limit only when set: older outputs read the same
        cost = "" if self.max_cost_usd is None else f", max_cost_usd={self.max_cost_usd!r}"
        return (
            f"Budget(max_tokens={self.max_tokens!r}, max_iterations={self.max_iterations!r}, "
            f"deadline_s={self.deadline_s!r}{cost})"
        )

    def usage(
        self, *, tokens: int, iterations: int, elapsed_s: float, cost_usd: float = 0.0
    ) -> BudgetUsage:
        return BudgetUsage(self, tokens, iterations, elapsed_s, cost_usd)

    @staticmethod
    def suggest(
        task_type: str,
        *,
        store: StoreLike | None = None,
        percentile: int = 90,
        table: BudgetTable | None = None,
    ) -> BudgetSuggestion:
        """Limits from the usage of past completed runs of ``task_type`` in the store (the
        ``percentile``-th), shown with the numbers; the budget table's row when there are
        none. Use the result's ``.budget`` in ``gr.Agent(budget=...)``."""
        if _advisor is None:
            raise ConfigError("Budget.suggest reads the run history: import gr_notebook first")
        return _advisor(task_type, store=store, percentile=percentile, table=table)


@dataclass(frozen=True, slots=True)
class BudgetSuggestion:
    """Limits for a task type, with the numbers they came from (``Budget.suggest``)."""

    task_type: str
    budget: Budget
    source: Literal["history", "table"]
    percentile: int
    tokens: tuple[int, ...] = ()
    """Tokens each past run used, in the order they were recorded."""
    iterations: tuple[int, ...] = ()
    skipped: int = 0
    """Runs of this task type left out because they did not complete."""

    def __str__(self) -> str:
        b = self.budget
        if self.source == "table":
            return (
                f"{self.task_type}: no completed runs in the store, so the budget table's "
                f"numbers: max_tokens={b.max_tokens:,}, max_iterations={b.max_iterations}"
            )
        n = len(self.tokens)
        left_out = f"; {plural(self.skipped, 'unfinished run')} left out" if self.skipped else ""
        return (
            f"{self.task_type}: p{self.percentile} of {plural(n, 'completed run')}"
            f"{left_out}\n"
            f"  max_tokens={b.max_tokens:,} (used: median {_median(self.tokens):,.0f}, "
            f"min {min(self.tokens):,}, max {max(self.tokens):,})\n"
            f"  max_iterations={b.max_iterations} (used: median "
            f"{_median(self.iterations):g}, min {min(self.iterations)}, "
            f"max {max(self.iterations)})"
        )


def _median(values: Sequence[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class BudgetAdvisor(Protocol):
    """What ``Budget.suggest`` asks: ``gr_notebook.history.adaptive.suggest_budget``."""

    def __call__(
        self,
        task_type: str,
        *,
        store: StoreLike | None,
        percentile: int,
        table: BudgetTable | None,
    ) -> BudgetSuggestion: ...


_advisor: BudgetAdvisor | None = None


def set_advisor(advisor: BudgetAdvisor) -> None:
    """Make ``advisor`` answer ``Budget.suggest``; ``import gr_notebook`` sets
    ``history/adaptive.py``'s."""
    global _advisor
    _advisor = advisor


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """What a run has used of its budget at one moment."""

    budget: Budget
    tokens: int
    iterations: int
    elapsed_s: float
    cost_usd: float = 0.0
    """Dollars spent on the calls made so far."""

    @property
    def spent(self) -> SpentLimit | None:
        """Which limit is spent, or None while every limit has room."""
        b = self.budget
        if self.iterations >= b.max_iterations:
            return SpentLimit("iterations", self.iterations, b.max_iterations)
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return SpentLimit("tokens", self.tokens, b.max_tokens)
        if b.max_cost_usd is not None and not self.cost_usd < b.max_cost_usd:  # NaN is spent
            return SpentLimit("cost", self.cost_usd, b.max_cost_usd)
        if b.deadline_s is not None and self.elapsed_s >= b.deadline_s:
            return SpentLimit("time", self.elapsed_s, b.deadline_s)
        return None

    @property
    def exhausted(self) -> str | None:
        """Which limit is spent, as a sentence, or None while every limit has room."""
        spent = self.spent
        return None if spent is None else spent.reason

    def nearest(self) -> SpentLimit:
        """The limit closest to being spent (the largest fraction used): the one a wrap-up
        order is about."""
        b = self.budget
        candidates = [SpentLimit("iterations", self.iterations, b.max_iterations)]
        if b.max_tokens is not None:
            candidates.append(SpentLimit("tokens", self.tokens, b.max_tokens))
        if b.deadline_s is not None:
            candidates.append(SpentLimit("time", self.elapsed_s, b.deadline_s))
        if b.max_cost_usd is not None:
            candidates.append(SpentLimit("cost", self.cost_usd, b.max_cost_usd))
        return max(candidates, key=lambda c: c.used / c.limit if c.limit else math.inf)

    def admits(
        self, request_tokens: int | None, *, request_cost_usd: float | None = None
    ) -> SpentLimit | None:
        """None when a request of ``request_tokens`` input tokens (as the model counted
        them) fits what the token budget has left, and one that could cost
        ``request_cost_usd`` at most fits what the cost limit has left; else the limit it
        would pass. Either may be None: not known, so not checked."""
        limit, cap = self.budget.max_tokens, self.budget.max_cost_usd
        if (
            limit is not None
            and request_tokens is not None
            and request_tokens > limit - self.tokens
        ):
            return SpentLimit("tokens", self.tokens, limit, request_tokens)
        cost = request_cost_usd
        if cap is not None and cost is not None and not cost <= cap - self.cost_usd:  # or NaN
            return SpentLimit("cost", self.cost_usd, cap, request_tokens, request_cost_usd=cost)
        return None

    @property
    def deadline(self) -> Deadline | None:
        if self.budget.deadline_s is None:
            return None
        return Deadline(self.budget.deadline_s, self.elapsed_s)


@dataclass(frozen=True, slots=True)
class Deadline:
    """Time against the run's deadline, as a feedback provider sees it."""

    limit_s: float
    elapsed_s: float

    @property
    def remaining_s(self) -> float:
        return self.limit_s - self.elapsed_s

    @property
    def expired(self) -> bool:
        return self.elapsed_s >= self.limit_s
