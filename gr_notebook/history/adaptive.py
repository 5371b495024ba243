"""Adaptive budgets (seed 003's first future enhancement): limits learnt from past runs.

``gr.Budget.suggest("codebase_audit", store=...)`` looks up the completed runs in the store
whose agent assessed that task type, and proposes the ``percentile``-th of what they used,
with the numbers it came from. Runs that ran out of budget are left out: what they used
says only that they needed more.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gr_notebook.errors import ConfigError
from gr_notebook.events import RunFinishedEvent, TaskAssessedEvent, as_typed
from gr_notebook.guardrails.budget import Budget
from gr_notebook.guardrails.budget_table import BudgetTable
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store
from gr_notebook.wording import plural

__all__ = ["BudgetSuggestion", "suggest_budget"]


@dataclass(frozen=True, slots=True)
class BudgetSuggestion:
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


def suggest_budget(
    task_type: str,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    percentile: int = 90,
    table: BudgetTable | None = None,
) -> BudgetSuggestion:
    table = table or BudgetTable()
    if (
        isinstance(percentile, bool)
        or not isinstance(percentile, int)
        or not 1 <= percentile <= 100
    ):
        raise ConfigError(f"percentile must be a whole number from 1 to 100, got {percentile!r}")
    if not isinstance(task_type, str) or not task_type:
        raise ConfigError("task_type names a row of the budget table, e.g. 'codebase_audit'")
    if isinstance(store, Store):
        found = _history(store, task_type)
    else:
        with Store(DEFAULT_STORE_PATH if store is None else store) as opened:
            found = _history(opened, task_type)
    used, skipped = found
    if not used:
        if task_type not in table.budgets:
            raise ConfigError(
                f"no completed runs of {task_type!r} in the store, and the budget table has no "
                f"such row; its task types are: {', '.join(table.task_types)}"
            )
        row = table.row(task_type)
        return BudgetSuggestion(
            task_type, Budget(row.tokens, row.iterations), "table", percentile, skipped=skipped
        )
    tokens = tuple(t for t, _ in used)
    iterations = tuple(i for _, i in used)
    budget = Budget(
        max_tokens=math.ceil(_nearest_rank(tokens, percentile) / 1000) * 1000,
        max_iterations=max(_nearest_rank(iterations, percentile), 1),
    )
    return BudgetSuggestion(task_type, budget, "history", percentile, tokens, iterations, skipped)


def _history(store: Store, task_type: str) -> tuple[list[tuple[int, int]], int]:
    """(tokens, iterations) of each completed run whose last approved assessment was
    ``task_type``, and how many such runs did not complete."""
    assessed: dict[str, str] = {}
    finished: dict[str, tuple[str, int, int]] = {}
    for run_id, stored in store.events_of_kind("task_assessed", "run_finished"):
        event = as_typed(stored)
        if isinstance(event, TaskAssessedEvent) and event.approved:
            assessed[run_id] = event.task_type
        elif isinstance(event, RunFinishedEvent):
            # What the budget counted, cache reads and writes included (decision 100); runs
            # recorded before tokens_used existed have input and output only (read as 0).
            tokens = int(event.tokens_used or event.input_tokens + event.output_tokens)
            finished[run_id] = (event.status, tokens, int(event.turns))
    used, skipped = [], 0
    for run_id, kind in assessed.items():
        if kind != task_type or run_id not in finished:
            continue
        status, tokens, turns = finished[run_id]
        if status == "completed":
            used.append((tokens, turns))
        else:
            skipped += 1
    return used, skipped


def _nearest_rank(values: Sequence[int], percentile: int) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(percentile / 100 * len(ordered)) - 1, 0)]


def _median(values: Sequence[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
