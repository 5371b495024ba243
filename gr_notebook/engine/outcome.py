"""How a run ends: its statuses, its outcome, and the rules that make a stop a status.

The loop and the Claude Agent SDK bridge both end runs through these functions, so a stop
reads the same whichever runtime made it. ``completed`` means the job is done: the model
reported it (``job_complete``), a plan written during the run is finished, or the agent's
completion checker found it done. A model that ends its turn with none of those is
``ended``; a limit that presses while work is left makes either ``budget_exhausted``. The
whole table is decision 129, in docs/decisions/run-status-and-lifecycle.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from gr_notebook.engine.state import RunState
from gr_notebook.eventdata import clip
from gr_notebook.guardrails.completion import StopKind
from gr_notebook.guardrails.runtime import StopVerdict
from gr_notebook.limits import SpentLimit
from gr_notebook.workflow.phases import JobResult

__all__ = ["LoopOutcome", "RunStatus", "gave_up", "settle", "turn_ended"]

RunStatus: TypeAlias = Literal[
    "running",
    "pausing",
    "paused",
    "stopping",
    "completed",
    "ended",
    "failed",
    "cancelled",
    "interrupted",
    "budget_exhausted",
    "incomplete",
    "stuck",
]
"""What a live run is doing (the first four), then how it ended: the status table of decision
129, in docs/decisions/run-status-and-lifecycle.md. ``completed`` is the job done; ``ended`` is
a model that stopped without it."""


@dataclass(frozen=True, slots=True)
class LoopOutcome:
    status: RunStatus
    reason: str | None = None
    error: BaseException | None = None
    limit: SpentLimit | None = None
    """The limit that ended the run, when one did (``budget_exhausted``)."""


def turn_ended(state: RunState, verdict: StopVerdict, final_text: str) -> LoopOutcome:
    """The model ended its turn and the stop went through: ``completed`` when the job is
    done, else ``ended``, unless :func:`settle` finds work left under a pressing limit. When
    the agent's checker is what found the job done, its verdict is recorded as the job
    (``source="completion_check"``), as a ``job_complete`` call would be."""
    reason = "the model ended its turn"
    if verdict.bypassed:
        reason += f"; the completion check was bypassed: {verdict.bypassed}"
    phases = state.phases
    phases.complete_if_planned(final_text)
    outcome = settle(state, LoopOutcome("completed", reason), "end_turn", final_text)
    if outcome.status != "completed" or phases.job is not None:
        return outcome
    if state.guards.spec.checker is None:
        return LoopOutcome("ended", reason)
    summary = final_text.strip() or "The completion check found the job complete."
    phases.complete_job(JobResult(summary, source="completion_check"))
    return outcome


def settle(state: RunState, outcome: LoopOutcome, kind: StopKind, tentative: Any) -> LoopOutcome:
    """A stop made while a hard limit pressed (spent, or a wrap-up ordered) is a success
    only if the job is done: otherwise the limit ended it, ``budget_exhausted``, as when
    it runs out between turns (the status table: decision 129, in
    docs/decisions/run-status-and-lifecycle.md)."""
    guards = state.guards
    usage = state.usage()
    pressed = guards.pressing(usage)
    if not pressed:
        return outcome
    left = guards.work_left(kind, tentative)
    if left is None:
        return outcome
    why = "" if pressed in str(outcome.reason) else f" ({pressed})"
    return LoopOutcome(
        "budget_exhausted",
        f"{outcome.reason}; a limit ended the job with work left{why}: {left}",
        limit=guards.pressing_limit(usage),
    )


def gave_up(state: RunState, verdict: StopVerdict) -> LoopOutcome:
    """The refusal cap was reached: the run ends ``incomplete``."""
    first = (verdict.feedback or "").replace("<blocker>", "").strip().split("\n")[0]
    return LoopOutcome(
        "incomplete",
        f"the stop was refused {state.guards.refusals} times in a row"
        + (f": {clip(first, 200)}" if first else ""),
    )
