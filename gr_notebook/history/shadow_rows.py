"""Where a run's shadow guardrails would have acted otherwise than its live ones: the rows of
``run.shadow_df()``.

Each shadow decision is set beside what happened live at the same point: a policy's decision
by the call's ``tool_use_id``; a stop by the live check recorded just before it (a stop with
no live check was let through); feedback by the call it follows; an intervention check by its
step (tool calls observed, the same count live and shadow). Only the decisions that differ
make a row, so an empty frame says the shadows agree with what the run did.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gr_notebook.events import (
    CompletionCheckEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    ModelCallEvent,
    PolicyDecisionEvent,
    ToolCallEvent,
    as_typed,
)

__all__ = ["SHADOW_COLUMNS", "ShadowRow", "shadow_rows"]

SHADOW_COLUMNS = [
    "seq",
    "turn",
    "kind",
    "guardrail",
    "tool",
    "tool_use_id",
    "live",
    "decision",
    "reason",
]


@dataclass(frozen=True, slots=True)
class ShadowRow:
    """One shadow decision that differs from what happened live.

    ``kind`` is ``policy``, ``feedback``, ``checker`` or ``intervention``; ``guardrail``
    the shadow's name (policy key, provider, checker class, ``interventions``). ``decision``
    (the shadow's) and ``live`` are in the verdicts of the kind, as every frame and trace
    says them (:data:`~gr_notebook.events.guardrails.GUARDRAIL_KINDS`): ``allow``/``deny``/
    ``ask`` for a call, ``accept``/``refuse``/``bypass`` for a stop, ``fire``/``skip`` for
    feedback (``fire`` on the live side when live delivered other blocks there), and
    ``skip`` or the tier's action for an intervention check. ``reason`` says why the
    shadow decided as it did (for a call it allowed and live denied: the live reason)."""

    seq: int
    turn: int
    kind: str
    guardrail: str
    tool: str | None
    tool_use_id: str | None
    live: str
    decision: str
    reason: str | None

    def values(self) -> list[Any]:
        return [getattr(self, c) for c in SHADOW_COLUMNS]


def shadow_rows(events: Iterable[Event]) -> list[ShadowRow]:
    """The shadow decisions of ``events`` that differ from the live ones, in order."""
    events = [as_typed(e) for e in events]
    live_calls = {
        e.tool_use_id: e
        for e in events
        if isinstance(e, PolicyDecisionEvent) and e.mode is None and e.tool_use_id
    }
    live_checks = {
        e.step: e for e in events if isinstance(e, InterventionCheckEvent) and e.mode is None
    }
    rows: list[ShadowRow] = []
    call: ToolCallEvent | None = None
    stop: CompletionCheckEvent | None = None
    """The live stop check since the latest call or model call."""
    fed: dict[int, set[str]] = {}
    """The live feedback texts by call index."""
    for e in events:
        if isinstance(e, ToolCallEvent | ModelCallEvent):
            call = e if isinstance(e, ToolCallEvent) else None
            stop = None
            continue
        mode = getattr(e, "mode", None)
        if mode is None:
            if isinstance(e, CompletionCheckEvent):
                stop = e
            elif isinstance(e, FeedbackEvent):
                fed.setdefault(e.call_index, set()).add(e.text)
            continue
        if isinstance(e, PolicyDecisionEvent):
            row = _policy(e, live_calls.get(e.tool_use_id or ""))
        elif isinstance(e, CompletionCheckEvent):
            row = _stop(e, stop)
        elif isinstance(e, FeedbackEvent):
            row = _feedback(e, fed.get(e.call_index, set()), call)
        elif isinstance(e, InterventionCheckEvent):
            row = _intervention(e, live_checks.get(e.step), call)
        else:
            continue
        if row is not None:
            rows.append(row)
    return rows


def _policy(e: PolicyDecisionEvent, live: PolicyDecisionEvent | None) -> ShadowRow | None:
    live_verdict = "allow" if live is None else live.verdict
    if live_verdict == e.verdict:
        return None
    reason = e.reason if not e.allowed else f"live: {live.reason}" if live else None
    name = e.policy if not e.allowed else ", ".join(e.policies)
    return ShadowRow(
        e.seq,
        e.turn,
        "policy",
        name or "",
        e.tool,
        e.tool_use_id,
        live_verdict,
        e.verdict,
        reason,
    )


def _stop(e: CompletionCheckEvent, live: CompletionCheckEvent | None) -> ShadowRow | None:
    live_verdict = "accept" if live is None else live.verdict
    if (live_verdict == "refuse") == (e.verdict == "refuse"):  # a bypass stops as an accept
        return None
    return ShadowRow(
        e.seq,
        e.turn,
        "checker",
        e.checker,
        None,
        None,
        live_verdict,
        e.verdict,
        e.feedback if e.verdict == "refuse" else (live.feedback if live else None),
    )


def _feedback(e: FeedbackEvent, live: set[str], call: ToolCallEvent | None) -> ShadowRow | None:
    if e.text in live:
        return None
    return ShadowRow(
        e.seq,
        e.turn,
        "feedback",
        e.provider,
        e.tool or None,
        call.tool_use_id if call is not None else None,
        "fire" if live else "skip",
        e.verdict,
        e.summary,
    )


def _intervention(
    e: InterventionCheckEvent, live: InterventionCheckEvent | None, call: ToolCallEvent | None
) -> ShadowRow | None:
    live_action = live.verdict if live is not None else "skip"
    action = e.verdict
    if live_action == action:
        return None
    return ShadowRow(
        e.seq,
        e.turn,
        "intervention",
        "interventions",
        call.tool if call is not None else None,
        call.tool_use_id if call is not None else None,
        live_action,
        action,
        e.why,
    )
