"""Seed 003's budget table: what ``assess_task`` allocates to each kind of task.

Seed 003 sized its table for one task of 3-20 tool-calling rounds; seed 000's phases are 5-20
steps, so one assessment covers one phase. The allocation grows with the
number of files the agent expects to touch, linearly from the task type's typical file
count, and at most ``max_multiplier`` times (2x in the seed):

    multiplier = clamp(estimated_files / typical_files, 1, max_multiplier)
    max_iterations = max(ceil(base_iterations x multiplier), ceil(1.25 x estimated_iterations))
    token_budget = max(base_tokens x multiplier,
                       max_iterations x tokens per turn + estimated_files x reading a file)

rounded up to a thousand tokens, where a turn costs 1.25 times what this run's turns have
cost so far (never less than the table's own rate), and reading a file costs 1.25 times a
typical workspace file carried for 2 turns. So an audit of 10 files or fewer
gets at least the base 80K tokens and 20 iterations, and a phase the agent estimates at 24
rounds gets 30. Only the run's hard limits (``gr.Budget``) cap it, at what they leave
before their 80% mark (where ``check_resources`` orders a wrap-up): an estimate over that is
the one the guidance calls too large.

A phase that outgrows its allotment gets it extended by half (``EXTEND_BY``), as often as it
takes, within the same caps (:meth:`TaskAssessment.covering`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from gr_notebook.errors import ConfigError, ToolError
from gr_notebook.eventdata import fields_json
from gr_notebook.events import TaskAssessedEvent
from gr_notebook.validation import whole_number

__all__ = [
    "DEFAULT_BUDGETS",
    "EXTEND_BY",
    "FILE_CARRY",
    "RESERVE",
    "BudgetTable",
    "TaskAssessment",
    "TaskBudget",
]

RESERVE = 1.25
"""An allotment keeps a quarter in reserve over the agent's own estimate and over this
run's cost per turn: estimates run short, and turns late in a phase cost more than the
average (the context grows until the next compaction). A healthy phase ends near 80%."""
FILE_CARRY = 2
"""Turns a file read stays in the context, on average, before summarize_progress prunes it."""
EXTEND_BY = 0.5
"""An allotment a phase outgrows grows by half of itself, as often as it takes: enough for
the few turns a short estimate missed, without hiding a phase that runs far over."""


@dataclass(frozen=True, slots=True)
class TaskBudget:
    """One row of the table."""

    tokens: int
    iterations: int
    typical_files: int = 1
    """Files a task of this type usually touches; more than this scales the budget up."""

    def __post_init__(self) -> None:
        whole_number(self.tokens, "tokens")
        whole_number(self.iterations, "iterations")
        whole_number(self.typical_files, "typical_files")


DEFAULT_BUDGETS: Mapping[str, TaskBudget] = MappingProxyType(
    {
        "simple_query": TaskBudget(10_000, 3, 1),
        "file_edit": TaskBudget(30_000, 8, 2),
        "multi_file_refactor": TaskBudget(60_000, 15, 5),
        "codebase_audit": TaskBudget(80_000, 20, 10),
        "exploration": TaskBudget(40_000, 10, 5),
    }
)


@dataclass(frozen=True, slots=True)
class TaskAssessment:
    """What ``assess_task`` allocated, and from what."""

    task_type: str
    estimated_files: int
    estimated_iterations: int
    strategy: str
    multiplier: float
    token_budget: int
    max_iterations: int
    guidance: str
    turn: int = 0
    narrow: bool = False
    """The guidance asks to narrow the scope: the estimate is over what the limits leave."""
    phase: int = 0
    """The phase the allocation covers."""
    scope: str = "the task"
    """What it covers, in words: ``Phase 2 'Survey'``."""
    tokens_at: int = 0
    """Tokens the run had used when the allocation began; usage counts from here."""
    iterations_at: int = 0

    def covering(
        self,
        tokens_used: int,
        iterations_used: int,
        *,
        max_tokens: int | None,
        max_iterations: int,
    ) -> TaskAssessment | None:
        """The allotment that covers this usage (counted from the assessment): itself while
        it does, else grown by ``EXTEND_BY`` as many times as it takes, each size within
        ``max_tokens`` and ``max_iterations`` (what the hard limits leave, counted from the
        assessment too). None when even those do not cover it: the hard limits are then
        what the phase is measured against."""
        tokens, iterations = self.token_budget, self.max_iterations
        token_cap = None if max_tokens is None else max(max_tokens, tokens)
        iteration_cap = max(max_iterations, iterations)
        while tokens_used > tokens or iterations_used > iterations:
            more_tokens = _thousands(tokens * (1 + EXTEND_BY))
            more_tokens = more_tokens if token_cap is None else min(more_tokens, token_cap)
            more_iterations = min(math.ceil(iterations * (1 + EXTEND_BY)), iteration_cap)
            if (tokens_used > tokens and more_tokens <= tokens) or (
                iterations_used > iterations and more_iterations <= iterations
            ):
                return None
            tokens, iterations = more_tokens, more_iterations
        if (tokens, iterations) == (self.token_budget, self.max_iterations):
            return self
        return replace(self, token_budget=tokens, max_iterations=iterations)

    def event(self, *, approved: bool) -> TaskAssessedEvent:
        """The ``task_assessed`` event; ``approved`` is whether the allotment stands."""
        data = self.to_json()  # as fields, turn and phase would shadow the event's envelope
        data["assessed_turn"], data["assessed_phase"] = data.pop("turn"), data.pop("phase")
        return TaskAssessedEvent(**data, approved=approved)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


def _row(name: str, value: object) -> TaskBudget:
    if isinstance(value, TaskBudget):
        return value
    if isinstance(value, tuple) and len(value) in (2, 3):
        return TaskBudget(*value)
    raise ConfigError(
        f"budget table row {name!r} takes gr.guardrails.TaskBudget(tokens, iterations, "
        f"typical_files) or a (tokens, iterations[, typical_files]) tuple, got {value!r}"
    )


@dataclass(frozen=True, slots=True)
class BudgetTable:
    """Task types and their base budgets; ``gr.BudgetTable({"data_cleaning": (50_000, 12,
    4)})`` replaces the table, ``BudgetTable().with_type(...)`` extends it."""

    budgets: Mapping[str, TaskBudget] = field(default_factory=lambda: DEFAULT_BUDGETS)
    max_multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.budgets, Mapping) or not self.budgets:
            raise ConfigError("a budget table needs at least one task type")
        rows = {str(name): _row(str(name), value) for name, value in self.budgets.items()}
        object.__setattr__(self, "budgets", MappingProxyType(rows))
        m = self.max_multiplier
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 1 <= m < math.inf:
            raise ConfigError(f"max_multiplier must be a number >= 1, got {m!r}")

    @property
    def task_types(self) -> tuple[str, ...]:
        return tuple(self.budgets)

    def with_type(
        self, name: str, *, tokens: int, iterations: int, typical_files: int = 1
    ) -> BudgetTable:
        return BudgetTable(
            {**self.budgets, name: TaskBudget(tokens, iterations, typical_files)},
            self.max_multiplier,
        )

    def multiplier(self, task_type: str, estimated_files: int) -> float:
        row = self.row(task_type)
        return min(max(estimated_files / row.typical_files, 1.0), float(self.max_multiplier))

    def row(self, task_type: str) -> TaskBudget:
        try:
            return self.budgets[task_type]
        except KeyError:
            raise ToolError(
                f"unknown task_type {task_type!r}; use one of: {', '.join(self.budgets)}"
            ) from None

    def assess(
        self,
        task_type: str,
        estimated_files: int,
        estimated_iterations: int,
        strategy: str = "",
        *,
        max_tokens: int | None = None,
        max_iterations: int | None = None,
        tokens_per_iteration: float = 0.0,
        tokens_per_file: float = 0.0,
        turn: int = 0,
        scope: str = "the task",
    ) -> TaskAssessment:
        """The allocation for a task, within what the run's hard limits leave when given.

        ``tokens_per_iteration`` is what a turn of this run has cost so far; the table's own
        rate is the floor. ``tokens_per_file`` is the size of a typical file in the
        workspace: each file examined stays in the context for about ``FILE_CARRY`` turns.
        ``scope`` names what the allocation covers, for the guidance.
        """
        row = self.row(task_type)
        multiplier = self.multiplier(task_type, estimated_files)
        iterations = max(
            math.ceil(row.iterations * multiplier), math.ceil(RESERVE * estimated_iterations)
        )
        rate = max(row.tokens / row.iterations, RESERVE * tokens_per_iteration)
        reading = RESERVE * estimated_files * tokens_per_file * FILE_CARRY
        tokens = _thousands(max(row.tokens * multiplier, iterations * rate + reading))
        notes = []
        if max_tokens is not None and tokens > max_tokens:
            tokens = max_tokens
            notes.append(f"capped at the {max_tokens:,} tokens the run's hard limits leave")
            # the turns those tokens pay for, at this run's rate: the token cap binds as hard
            affordable = max(math.floor((max_tokens - reading) / rate), 1)
            max_iterations = (
                affordable if max_iterations is None else min(max_iterations, affordable)
            )
        if max_iterations is not None and iterations > max_iterations:
            iterations = max_iterations
            notes.append(f"capped at the {max_iterations} iterations the run's hard limits leave")
        guidance = (
            f"Budget for {scope}: {tokens:,} tokens and {iterations} iterations ({task_type} "
            f"over about {estimated_files} files, your estimate of {estimated_iterations} "
            "iterations). Read only what you need (search before reading), call "
            "check_resources every 3-5 tool calls, and call summarize_progress after more "
            "than 10 tool calls."
        )
        if notes:
            guidance += " The budget is " + " and ".join(notes) + "."
        narrow = estimated_iterations > iterations
        if narrow:
            guidance += (
                f" Your estimate of {estimated_iterations} iterations is over the "
                f"{iterations} the run's hard limits leave: narrow the scope or summarize as "
                "you go."
            )
        return TaskAssessment(
            task_type=task_type,
            estimated_files=estimated_files,
            estimated_iterations=estimated_iterations,
            strategy=strategy,
            multiplier=round(multiplier, 3),
            token_budget=tokens,
            max_iterations=iterations,
            guidance=guidance,
            turn=turn,
            narrow=narrow,
            scope=scope,
        )


def _thousands(tokens: float) -> int:
    return math.ceil(tokens / 1000) * 1000
