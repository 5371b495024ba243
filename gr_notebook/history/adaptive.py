"""Adaptive budgets (seed 003's first future enhancement): limits learnt from past runs.

``gr.Budget.suggest("codebase_audit", store=...)`` looks up the completed runs in the store
whose agent assessed that task type, and proposes the ``percentile``-th of what they used,
with the numbers it came from. Runs that ran out of budget are left out: what they used
says only that they needed more. The result, :class:`BudgetSuggestion`, is a value of the
guardrails layer, kept with :class:`Budget` (and importable from here too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from gr_notebook.errors import ConfigError
from gr_notebook.events import JobCompleteEvent, RunFinishedEvent, TaskAssessedEvent, as_typed
from gr_notebook.guardrails.budget import Budget, BudgetSuggestion
from gr_notebook.guardrails.budget_table import BudgetTable
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, StoreLike, reading, status_as_read

__all__ = ["BudgetSuggestion", "suggest_budget"]


def suggest_budget(
    task_type: str,
    *,
    store: StoreLike | None = None,
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
    path = None if isinstance(store, Store) else Path(store or DEFAULT_STORE_PATH)
    if path is not None and not path.exists():  # no store yet: no history, and none made
        found: tuple[list[tuple[int, int]], int] = ([], 0)
    else:
        with reading(store) as opened:
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
    jobs: set[str] = set()
    for run_id, stored in store.events_of_kind("task_assessed", "job_complete", "run_finished"):
        event = as_typed(stored)
        if isinstance(event, TaskAssessedEvent) and event.approved:
            assessed[run_id] = event.task_type
        elif isinstance(event, JobCompleteEvent):
            jobs.add(run_id)
        elif isinstance(event, RunFinishedEvent):
            # What the budget counted, cache reads and writes included; runs
            # recorded before tokens_used existed have input and output only (read as 0).
            tokens = int(event.tokens_used or event.input_tokens + event.output_tokens)
            finished[run_id] = (event.status, tokens, int(event.turns))
    used, skipped = [], 0
    for run_id, kind in assessed.items():
        if kind != task_type or run_id not in finished:
            continue
        status, tokens, turns = finished[run_id]
        if status_as_read(status, job=run_id in jobs) == "completed":
            used.append((tokens, turns))
        else:
            skipped += 1
    return used, skipped


def _nearest_rank(values: Sequence[int], percentile: int) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(percentile / 100 * len(ordered)) - 1, 0)]
