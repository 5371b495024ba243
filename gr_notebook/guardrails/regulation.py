"""Seed 003's session state: what the agent assessed, used, summarized and already read.

The three self-regulation tools read and write this state (``summarize_progress`` asks for
the pruning as an effect of its call); the tool-execution step asks it about redundant
reads. It reads the run through its :class:`~gr_notebook.guardrails.view.RunView`. One
instance belongs to one run, and :meth:`SelfRegulation.to_json` is its part of the run
state's snapshot.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from gr_notebook.errors import WorkspaceError
from gr_notebook.eventdata import fields_json
from gr_notebook.events import AllotmentExtendedEvent, ConfirmationEvent
from gr_notebook.guardrails.budget import BudgetUsage
from gr_notebook.guardrails.budget_table import BudgetTable, TaskAssessment
from gr_notebook.guardrails.feedback import Feedback, Observation
from gr_notebook.guardrails.paths import canonical_path, file_stamp
from gr_notebook.guardrails.resources import (
    WRAP_UP_AT,
    ResourceReport,
    allotment_in_force,
    recommendation_for,
    typical_file_tokens,
)
from gr_notebook.guidance import Directive
from gr_notebook.wording import plural

if TYPE_CHECKING:
    from gr_notebook.guardrails.view import RunView

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
MAX_LISTED = 50


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
        return fields_json(self)


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
    confirm_above: int | None = None
    """Ask above this many tokens; ``None``: above ``DEFAULT_CONFIRM_ABOVE`` when there is
    a confirmer to ask, and never when there is none: nobody would answer."""


class SelfRegulation:
    """One run's self-regulation state, read and written by the three tools."""

    def __init__(self, settings: RegulationSettings, run: RunView) -> None:
        self.table = settings.table
        self.confirm = settings.confirm
        self.confirm_above = settings.confirm_above
        if self.confirm_above is None and self.confirm is not None:
            self.confirm_above = DEFAULT_CONFIRM_ABOVE
        self.usage = run.usage
        self.emit = run.emit
        self.workspace = run.workspace
        self.phase_ahead = run.phase_ahead
        """Which phase an assessment made now covers, and its label."""
        self.run_id = run.run_id
        self.assessment: TaskAssessment | None = None
        """The allotment in force: it covers one phase and lapses when another begins."""
        self.answer: str | None = None
        """What assess_task last answered (a budget, or a person's denial): an order that
        must outlive the compaction that follows the transition."""
        self.wrap_up: str | None = None
        """The recommendation that ordered a wrap-up, once one did; it stands for the run."""
        self._requested: frozenset[str] = frozenset()
        self.summaries: tuple[ProgressSummary, ...] = ()
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
        usage = self.usage()
        hard = usage.budget
        phase, scope = self.phase_ahead()
        assessment = self.table.assess(
            task_type,
            estimated_files,
            estimated_iterations,
            strategy,
            # what the limits leave before the wrap-up mark: no allotment runs into that order
            max_tokens=None
            if hard.max_tokens is None
            else max(int(hard.max_tokens * WRAP_UP_AT / 100) - usage.tokens, 1),
            max_iterations=max(int(hard.max_iterations * WRAP_UP_AT / 100) - usage.iterations, 1),
            tokens_per_iteration=usage.tokens / usage.iterations if usage.iterations else 0.0,
            tokens_per_file=typical_file_tokens(self.workspace),
            turn=turn,
            scope=scope,
        )
        assessment = replace(
            assessment, phase=phase, tokens_at=usage.tokens, iterations_at=usage.iterations
        )
        approved = True
        if self.confirm_above is not None and assessment.token_budget > self.confirm_above:
            approved = await self._confirm(assessment)
        if approved:
            self.assessment = assessment
        self.emit(assessment.event(approved=approved))
        return assessment, approved

    def report(self, usage: BudgetUsage | None = None) -> ResourceReport:
        """Usage against the allotment in force (the run's limits without one)."""
        return ResourceReport.of(usage or self.usage(), self.assessment)

    def check(self) -> ResourceReport:
        """``check_resources``: the report, and a wrap-up order that stands once given."""
        report = self.report()
        if report.wrap_up and self.wrap_up is None:
            self.wrap_up = report.recommendation
        return report

    def extend(self) -> Directive | None:
        """A phase that outgrew its allotment while the hard limits leave room: the
        extension the reports already measure against becomes the allotment in force, and
        the line that tells the model so, in plain facts. None otherwise."""
        if self.assessment is None or self.wrap_up is not None:
            return None
        usage = self.usage()
        grown = allotment_in_force(usage, self.assessment)
        if grown is None or grown is self.assessment:
            return None
        before, self.assessment = self.assessment, grown
        limits = ResourceReport.of(usage, None).limits_percentage_used
        self.emit(
            AllotmentExtendedEvent(
                scope=grown.scope,
                assessed_phase=grown.phase,
                token_budget=grown.token_budget,
                max_iterations=grown.max_iterations,
                previous_token_budget=before.token_budget,
                previous_max_iterations=before.max_iterations,
                tokens_used=usage.tokens - grown.tokens_at,
                iterations_used=usage.iterations - grown.iterations_at,
                limits_percentage_used=limits,
            )
        )
        return Directive(_extension_line(before, grown, usage, limits), "allotment", "continue")

    def on_phase_started(self, phase: int) -> None:
        """An allotment covers its own phase: another phase starts unassessed, measured
        against the run's limits until the agent assesses it."""
        if self.assessment is not None and self.assessment.phase != phase:
            if self.answer == self.assessment.guidance:  # a newer answer (a denial) stays
                self.answer = None
            self.assessment = None

    def expect_reads(self, paths: Sequence[str]) -> None:
        """The latest workflow prompt asked for these reads: they are not redundant."""
        requested = set()
        for raw in paths:
            try:
                requested.add(canonical_path(self.workspace, raw))
            except WorkspaceError:
                continue
        self._requested = frozenset(requested)

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
        self.summaries = (*self.summaries, summary)
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
        if name in self._requested:
            self._requested = self._requested - {name}
        elif seen is not None and seen[0] == stamp and seen[2] == self.generation:
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

    # -- snapshots ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "assessment": self.assessment.to_json() if self.assessment else None,
            "answer": self.answer,
            "wrap_up": self.wrap_up,
            "requested": sorted(self._requested),
            "summaries": [s.to_json() for s in self.summaries],
            "explored": [
                [name, list(stamp), turn, generation]
                for name, (stamp, turn, generation) in self._explored.items()
            ],
            "generation": self.generation,
        }

    def load_json(self, data: Mapping[str, Any]) -> Callable[[], None]:
        """Check a saved state; returns the function that applies it."""
        assessment = TaskAssessment(**data["assessment"]) if data["assessment"] else None
        summaries = tuple(
            ProgressSummary(
                tuple(s["key_findings"]),
                tuple(s["files_examined"]),
                tuple(s["next_steps"]),
                int(s["turn"]),
            )
            for s in data["summaries"]
        )
        explored = {
            str(name): ((int(stamp[0]), int(stamp[1])), int(turn), int(generation))
            for name, stamp, turn, generation in data["explored"]
        }
        requested = frozenset(str(r) for r in data["requested"])
        generation = int(data["generation"])
        answer, wrap_up = data["answer"], data["wrap_up"]

        def apply() -> None:
            self.assessment, self.answer, self.wrap_up = assessment, answer, wrap_up
            self._requested, self.summaries = requested, summaries
            self._explored, self.generation = explored, generation

        return apply

    async def _confirm(self, assessment: TaskAssessment) -> bool:
        request = ConfirmationRequest(
            operation="assess_task",
            estimated_tokens=assessment.token_budget,
            threshold=self.confirm_above or 0,
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
        asked = fields_json(request)
        del asked["run_id"]  # the event is the run's already
        self.emit(ConfirmationEvent(**asked, approved=approved, by=by))
        return approved


def _extension_line(
    before: TaskAssessment, grown: TaskAssessment, usage: BudgetUsage, limits: float
) -> str:
    """What the model reads when its allotment grows: what the phase needed, how far the
    hard limits are, and the new allotment; facts and the next action, not a rebuke."""
    outgrown = []
    if usage.iterations - before.iterations_at > before.max_iterations:
        outgrown.append(plural(before.max_iterations, "iteration"))
    if usage.tokens - before.tokens_at > before.token_budget:
        outgrown.append(f"{before.token_budget:,} tokens")
    scope = grown.scope[:1].upper() + grown.scope[1:]
    return (
        f"ALLOTMENT EXTENDED: {scope} has needed more than the {' and '.join(outgrown)} "
        f"assessed for it. The run's hard limits are {limits:.0f}% used, so its allotment is "
        f"now {plural(grown.max_iterations, 'iteration')} and {grown.token_budget:,} tokens, "
        "counted from the assessment. Carry on with your todo list."
    )
