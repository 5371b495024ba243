"""``Budget``: the limits a run works within, and the one test of whether one is spent.

Every limit is compared the same way: a limit is *exhausted* once usage has reached it
(``used >= limit``). That is the rule for tokens, for iterations and for the deadline, and
it is the rule that ends a run and that lets a task-completion check be bypassed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gr_notebook.validation import seconds, whole_number

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget_table import BudgetTable
    from gr_notebook.history.adaptive import BudgetSuggestion
    from gr_notebook.history.store import Store

__all__ = ["Budget", "BudgetUsage", "Deadline"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one run; ``None`` means no limit of that kind."""

    max_tokens: int | None = None
    """Cumulative input and output tokens over every model call."""
    max_iterations: int = 50
    """Model calls (turns)."""
    deadline_s: float | None = None
    """Wall-clock seconds from the start of the run, read from the agent's clock."""

    def __post_init__(self) -> None:
        whole_number(self.max_iterations, "max_iterations")
        if self.max_tokens is not None:
            whole_number(self.max_tokens, "max_tokens")
        if self.deadline_s is not None:
            seconds(self.deadline_s, "deadline_s", minimum=0, above=True)

    def usage(self, *, tokens: int, iterations: int, elapsed_s: float) -> BudgetUsage:
        return BudgetUsage(self, tokens, iterations, elapsed_s)

    @staticmethod
    def suggest(
        task_type: str,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        percentile: int = 90,
        table: BudgetTable | None = None,
    ) -> BudgetSuggestion:
        """Limits from the usage of past completed runs of ``task_type`` in the store (the
        ``percentile``-th), shown with the numbers; the budget table's row when there are
        none. Use the result's ``.budget`` in ``gr.Agent(budget=...)``."""
        from gr_notebook.history.adaptive import suggest_budget

        return suggest_budget(task_type, store=store, percentile=percentile, table=table)


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """What a run has used of its budget at one moment."""

    budget: Budget
    tokens: int
    iterations: int
    elapsed_s: float

    @property
    def exhausted(self) -> str | None:
        """Which limit is spent, as a sentence, or None while every limit has room."""
        b = self.budget
        if self.iterations >= b.max_iterations:
            return f"the iteration cap of {b.max_iterations} was reached"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"the token budget of {b.max_tokens:,} was used ({self.tokens:,} tokens)"
        if b.deadline_s is not None and self.elapsed_s >= b.deadline_s:
            return f"the deadline of {b.deadline_s:g} s passed ({self.elapsed_s:.1f} s elapsed)"
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
