"""One line per event for the dashboard's timeline: what it says, and how loudly.

Describers are small functions of an event's data, looked up by kind, so a new event kind
costs one entry here and nothing anywhere else. Each takes O(1): the dashboard calls them
on every event of a live run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

from gr_notebook.events import Event
from gr_notebook.wording import plural

__all__ = [
    "TIMELINE_KINDS",
    "Tone",
    "describe",
    "describe_held_off",
    "tone_of",
    "worth_a_line",
]

Tone: TypeAlias = Literal["plain", "muted", "notice", "alert"]
"""How loudly a timeline line speaks: a skipped check is muted, a tier-3 stop is an alert."""

MAX_TEXT = 160


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _list_name(kind: Any, number: Any, name: Any) -> str:
    if kind == "bootstrap":
        return "Bootstrap"
    if kind == "job_completion":
        return "Job completion"
    return f"Phase {number}" + (f" '{name}'" if name else "")


def _phase_transition(d: Mapping[str, Any]) -> str:
    what = _list_name(d.get("kind"), d.get("from_phase", "?"), d.get("name"))
    text = f"{what} {d.get('outcome', 'ended')}: {d.get('done', 0)}/{d.get('tasks', 0)} tasks"
    return text + (f" → {d['archive']}" if d.get("archive") else "")


def _compaction(d: Mapping[str, Any]) -> str:
    return (
        f"Compacted: {d.get('messages_removed', 0)} messages folded into a recap, "
        f"conversation {d.get('tokens_before', 0):,} → {d.get('tokens_after', 0):,} tokens"
    )


def _error(d: Mapping[str, Any]) -> str:
    where = d.get("tool") or d.get("source", "run")
    kind = f"{d['error_type']}: " if d.get("error_type") else ""
    return f"Error in {where}: {kind}{d.get('message', '')}"


def _run_finished(d: Mapping[str, Any]) -> str:
    reason = f" ({d['reason']})" if d.get("reason") else ""
    return f"Run {d.get('status', 'finished')}{reason} after {plural(d.get('turns', 0), 'turn')}"


def _policy_decision(d: Mapping[str, Any]) -> str:
    return (
        f"Denied {d.get('tool', 'a tool')} by {d.get('policy', 'a policy')}: {d.get('reason', '')}"
    )


def _completion_check(d: Mapping[str, Any]) -> str:
    stop = "job_complete" if d.get("stop") == "job_complete" else "the final reply"
    if d.get("bypassed"):
        return f"Stop by {stop} allowed unchecked: {d['bypassed']}"
    feedback = str(d.get("feedback") or "").replace("<blocker>", "").replace("</blocker>", "")
    ending = " — giving up" if d.get("give_up") else ""
    return f"Stop by {stop} refused ({d.get('refusals', 1)} in a row){ending}: {feedback}"


def _intervention(d: Mapping[str, Any]) -> str:
    return (
        f"Intervention tier {d.get('tier', '?')} ({d.get('action', '?')}) at step "
        f"{d.get('step', '?')}: {plural(d.get('steps_since_progress', 0), 'step')} without "
        "progress"
    )


def describe_held_off(d: Mapping[str, Any], *, first_step: Any = None, count: int = 1) -> str:
    """A check a safeguard held off; ``count`` such checks in a row, for one reason and
    starting at ``first_step``, share one line."""
    reason = d.get("skip_reason") or "skipped"
    detail = {
        "min_steps": f"only {plural(d.get('step', 0), 'step')} so far",
        "grace_period": f"{plural(d.get('steps_since_reset') or 0, 'step')} since the reset",
        "actively_implementing": f"{plural(d.get('recent_edits', 0), 'recent edit')}",
        "not_stuck": f"{plural(d.get('stuck_counter', 0), 'check')} in a row without progress",
    }.get(reason, "")
    what = f"Check at step {d.get('step', '?')}"
    if count > 1:
        what = f"{count:,} checks at steps {first_step}–{d.get('step', '?')}"
    return f"{what} held off: {reason}" + (f" ({detail})" if detail else "")


def _pruned(d: Mapping[str, Any]) -> str:
    files = len(d.get("files_examined", ()))
    return (
        f"Pruned after summarize_progress: {plural(d.get('messages_removed', 0), 'message')} "
        f"removed, conversation {d.get('tokens_before', 0):,} → {d.get('tokens_after', 0):,} "
        f"tokens; the summary keeps {plural(files, 'file')} examined"
    )


def _assessed(d: Mapping[str, Any]) -> str:
    scope = f" for {d['scope']}" if d.get("scope") else ""
    return (
        f"Task assessed as {d.get('task_type', '?')}{scope}: budget "
        f"{d.get('token_budget', 0):,} tokens, {plural(d.get('max_iterations', 0), 'iteration')}"
    )


def _confirmation(d: Mapping[str, Any]) -> str:
    return (
        f"Denied {d.get('operation', 'an operation')} asking for "
        f"{d.get('estimated_tokens', 0):,} tokens (confirm above {d.get('threshold', 0):,}): "
        f"{d.get('by', 'not confirmed')}"
    )


def _model_retry(d: Mapping[str, Any]) -> str:
    what = f"{d.get('status')} {d.get('error_type')}" if d.get("status") else d.get("error_type")
    wait = f"{d.get('delay_s', 0):.2g} s" + (" (retry-after)" if d.get("retry_after") else "")
    attempt = f"{d.get('attempt', '?')}/{d.get('max_retries', '?')}"
    return f"Model retry {attempt} after {what}, in {wait}"


def _over_budget(d: Mapping[str, Any]) -> str:
    return (
        f"Request not sent: it needs {d.get('needed', 0):,} tokens, "
        f"{d.get('remaining', 0):,} remain"
    )


_DESCRIBERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "run_started": lambda d: f"Run started on {d.get('model', 'a model')}",
    "phase_started": lambda d: (
        f"{_list_name(d.get('kind'), d.get('phase', '?'), d.get('name'))} started"
    ),
    "phase_transition": _phase_transition,
    "compaction": _compaction,
    "rewind": lambda d: f"Rewind by the {d.get('source', 'model')}: {d.get('issue', '')}",
    "stuck_checkpoint": lambda d: "Stuck checkpoint: the todo list has not changed",
    "run_paused": lambda d: "Paused",
    "run_resumed": lambda d: "Resumed",
    "job_complete": lambda d: f"Job complete: {d.get('summary', '')}",
    "error": _error,
    "policy_decision": _policy_decision,
    "completion_check": _completion_check,
    "policies_reset": lambda d: f"Policy memory reset by the {d.get('source', 'model')}",
    "intervention": _intervention,
    "intervention_skipped": describe_held_off,
    "task_assessed": _assessed,
    "confirmation": _confirmation,
    "conversation_pruned": _pruned,
    "model_retry": _model_retry,
    "request_over_budget": _over_budget,
    "run_finished": _run_finished,
}

#: Kinds that reach the timeline only sometimes: a denial, not every allowed call; a refused
#: or bypassed stop, not one that was simply allowed; an assessment that stands (a denied one
#: already has its confirmation line).
_NOTEWORTHY: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "policy_decision": lambda d: d.get("allowed") is False,
    "completion_check": lambda d: d.get("complete") is not True,
    "confirmation": lambda d: d.get("approved") is not True,
    "task_assessed": lambda d: d.get("approved") is True,
}

#: Kinds whose lines stand out (or step back) from the rest of the timeline.
_TONES: dict[str, Callable[[Mapping[str, Any]], Tone]] = {
    "intervention": lambda d: "alert" if d.get("action") == "stop" else "notice",
    "intervention_skipped": lambda d: "muted",
    "confirmation": lambda d: "notice",
    "model_retry": lambda d: "notice",
    "request_over_budget": lambda d: "alert",
}

#: Event kinds that appear on the timeline; later layers add theirs with :func:`describe`.
TIMELINE_KINDS = frozenset(_DESCRIBERS)


def describe(event: Event) -> str:
    """One line for the timeline; unknown kinds fall back to the kind and its data."""
    describer = _DESCRIBERS.get(event.kind)
    if describer is not None:
        return _clip(describer(event.data))
    return _clip(f"{event.kind}: {dict(event.data)}")


def worth_a_line(kind: str, data: Mapping[str, Any]) -> bool:
    """Whether an event of a timeline kind earns a line (a denial does, an allowed call not)."""
    check = _NOTEWORTHY.get(kind)
    return check is None or check(data)


def tone_of(kind: str, data: Mapping[str, Any]) -> Tone:
    tone = _TONES.get(kind)
    return "plain" if tone is None else tone(data)
