"""Seed 003's session state: what the agent assessed, used, summarized and already read.

The three self-regulation tools read and write this state; the loop reads it back to prune
the conversation after ``summarize_progress`` and to mark redundant reads. One instance
belongs to one run.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from gr_notebook.errors import WorkspaceError
from gr_notebook.guardrails.budget import BudgetUsage
from gr_notebook.guardrails.budget_table import BudgetTable, TaskAssessment
from gr_notebook.guardrails.feedback import Feedback, Observation
from gr_notebook.guardrails.paths import canonical_path, file_stamp
from gr_notebook.workspace import Workspace

__all__ = [
    "DEFAULT_CONFIRM_ABOVE",
    "ConfirmationRequest",
    "Confirmer",
    "ProgressSummary",
    "RegulationSettings",
    "ResourceReport",
    "SelfRegulation",
    "recommendation_for",
]

DEFAULT_CONFIRM_ABOVE = 100_000
WARNING = "WARNING: Low on resources. Summarize and wrap up."
CAUTION = "CAUTION: Monitor usage carefully."
HEALTHY = "Resources healthy, continue."
MAX_LISTED = 50


def recommendation_for(percentage_used: float) -> str:
    """Seed 003's wording: above 80%, above 50%, otherwise."""
    if percentage_used > 80:
        return WARNING
    if percentage_used > 50:
        return CAUTION
    return HEALTHY


@dataclass(frozen=True, slots=True)
class ResourceReport:
    """``check_resources``' answer. ``percentage_used`` is the larger of the token and the
    iteration fractions: whichever runs out first is the one to plan around."""

    tokens_used: int
    tokens_budget: int | None
    tokens_remaining: int | None
    percentage_used: float
    iterations_used: int
    iterations_max: int
    iterations_remaining: int
    recommendation: str
    budget_source: str
    """``assessment`` when assess_task set the budget, ``limits`` for the run's own."""

    @classmethod
    def of(cls, usage: BudgetUsage, assessment: TaskAssessment | None) -> ResourceReport:
        hard = usage.budget
        if assessment is not None:
            tokens_budget: int | None = assessment.token_budget
            iterations_max, source = assessment.max_iterations, "assessment"
        else:
            tokens_budget, iterations_max, source = hard.max_tokens, hard.max_iterations, "limits"
        fractions = [usage.iterations / iterations_max]
        if tokens_budget:
            fractions.append(usage.tokens / tokens_budget)
        percentage = round(100 * max(fractions), 1)
        return cls(
            tokens_used=usage.tokens,
            tokens_budget=tokens_budget,
            tokens_remaining=None if tokens_budget is None else tokens_budget - usage.tokens,
            percentage_used=percentage,
            iterations_used=usage.iterations,
            iterations_max=iterations_max,
            iterations_remaining=iterations_max - usage.iterations,
            recommendation=recommendation_for(percentage),
            budget_source=source,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_used": self.tokens_used,
            "tokens_budget": self.tokens_budget,
            "tokens_remaining": self.tokens_remaining,
            "percentage_used": self.percentage_used,
            "iterations_used": self.iterations_used,
            "iterations_max": self.iterations_max,
            "iterations_remaining": self.iterations_remaining,
            "recommendation": self.recommendation,
            "budget_source": self.budget_source,
        }


@dataclass(frozen=True, slots=True)
class ProgressSummary:
    """What ``summarize_progress`` stores; rendered into layer 4 after the pruning."""

    key_findings: tuple[str, ...]
    files_examined: tuple[str, ...]
    next_steps: tuple[str, ...]
    turn: int

    def render(self) -> str:
        files = self.files_examined[-MAX_LISTED:]
        more = len(self.files_examined) - len(files)
        lines = [
            f"PROGRESS SUMMARY (you wrote it at turn {self.turn}; older messages were pruned)",
            "Key findings:",
            *(f"- {f}" for f in self.key_findings[-MAX_LISTED:]),
            "Files examined (reuse what you learned; re-read only files that changed):",
            ("- " + ", ".join(files) + (f" and {more} more" if more else ""))
            if files
            else "- none",
            "Next steps:",
            *(f"- {s}" for s in self.next_steps[-MAX_LISTED:]),
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "key_findings": list(self.key_findings),
            "files_examined": list(self.files_examined),
            "next_steps": list(self.next_steps),
            "turn": self.turn,
        }


@dataclass(frozen=True, slots=True)
class ConfirmationRequest:
    """An operation large enough that a person should say yes first."""

    operation: str
    estimated_tokens: int
    threshold: int
    description: str
    run_id: str = ""


class Confirmer(Protocol):
    """Says whether a large operation may go ahead; may be async (a notebook widget)."""

    def __call__(self, request: ConfirmationRequest) -> bool | Awaitable[bool]: ...


ConfirmerLike: TypeAlias = Confirmer | Callable[[ConfirmationRequest], Any]


@dataclass(frozen=True, slots=True)
class RegulationSettings:
    """What an agent definition fixes about self-regulation; each run gets its own state."""

    table: BudgetTable = field(default_factory=BudgetTable)
    confirm: ConfirmerLike | None = None
    confirm_above: int = DEFAULT_CONFIRM_ABOVE


class SelfRegulation:
    """One run's self-regulation state, read and written by the three tools."""

    def __init__(
        self,
        settings: RegulationSettings,
        *,
        usage: Callable[[], BudgetUsage],
        emit: Callable[[str, Mapping[str, Any]], None],
        workspace: Workspace,
        run_id: str = "",
    ) -> None:
        self.table = settings.table
        self.confirm = settings.confirm
        self.confirm_above = settings.confirm_above
        self.usage = usage
        self.emit = emit
        self.workspace = workspace
        self.run_id = run_id
        self.assessment: TaskAssessment | None = None
        self.summaries: list[ProgressSummary] = []
        self.pending_prune: ProgressSummary | None = None
        self._explored: dict[str, tuple[tuple[int, int], int, int]] = {}
        self.generation = 0
        """Bumped whenever the conversation is pruned or compacted: older reads are gone."""

    # -- the tools ------------------------------------------------------------------------------

    async def assess(
        self,
        task_type: str,
        estimated_files: int,
        estimated_iterations: int,
        strategy: str,
        *,
        turn: int,
    ) -> tuple[TaskAssessment, bool]:
        """The allocation, and whether it may stand (a large one needs a person's yes)."""
        hard = self.usage().budget
        assessment = self.table.assess(
            task_type,
            estimated_files,
            estimated_iterations,
            strategy,
            max_tokens=hard.max_tokens,
            max_iterations=hard.max_iterations,
            turn=turn,
        )
        approved = True
        if assessment.token_budget > self.confirm_above:
            approved = await self._confirm(assessment)
        if approved:
            self.assessment = assessment
        self.emit("task_assessed", {**assessment.to_json(), "approved": approved})
        return assessment, approved

    def report(self) -> ResourceReport:
        return ResourceReport.of(self.usage(), self.assessment)

    def summarize(
        self,
        key_findings: Sequence[str],
        files_examined: Sequence[str],
        next_steps: Sequence[str],
        *,
        turn: int,
    ) -> ProgressSummary:
        summary = ProgressSummary(
            tuple(key_findings), tuple(dict.fromkeys(files_examined)), tuple(next_steps), turn
        )
        self.summaries.append(summary)
        self.pending_prune = summary
        return summary

    # -- redundancy detection -------------------------------------------------------------------

    def on_read(self, raw_path: str, *, turn: int, call_index: int) -> Feedback | None:
        """A successful read: feedback when the same unchanged file was read before and
        that read is still in the conversation."""
        try:
            name = canonical_path(self.workspace, raw_path)
        except WorkspaceError:
            return None
        stamp = file_stamp(self.workspace, name)
        if stamp is None:
            return None
        seen = self._explored.get(name)
        if seen is not None and seen[0] == stamp and seen[2] == self.generation:
            return Feedback(
                provider_name="Redundancy",
                summary=(
                    f"You already read {name} on turn {seen[1]} and it has not changed since; "
                    "that content is still in your conversation above."
                ),
                observations=(Observation("first read", f"turn {seen[1]}"),),
                suggestions=(
                    "Reuse what you learned instead of reading it again.",
                    "Call summarize_progress to keep your findings when the context grows.",
                ),
                severity="info",
                call_index=call_index,
            )
        self._explored[name] = (stamp, turn, self.generation)
        return None

    def note_pruned(self) -> None:
        self.generation += 1

    async def _confirm(self, assessment: TaskAssessment) -> bool:
        request = ConfirmationRequest(
            operation="assess_task",
            estimated_tokens=assessment.token_budget,
            threshold=self.confirm_above,
            description=(
                f"{assessment.task_type} over about {assessment.estimated_files} files: "
                f"{assessment.strategy}"
            ),
            run_id=self.run_id,
        )
        if self.confirm is None:
            approved, by = False, "no confirmer (headless runs deny)"
        else:
            try:
                answer = self.confirm(request)
                if inspect.isawaitable(answer):
                    answer = await answer
                approved, by = answer is True, "confirmer"
            except Exception as exc:  # a broken confirmer denies: never spend unasked
                approved, by = False, f"confirmer failed: {type(exc).__name__}: {exc}"
        self.emit(
            "confirmation",
            {
                "operation": request.operation,
                "estimated_tokens": request.estimated_tokens,
                "threshold": request.threshold,
                "description": request.description,
                "approved": approved,
                "by": by,
            },
        )
        return approved
