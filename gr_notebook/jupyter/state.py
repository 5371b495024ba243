"""What a dashboard shows, as plain values: meters, timeline entries, feedback blocks.

A :class:`RunTracker` follows a run's events and keeps only the last few timeline and
feedback entries, so building a :class:`DashboardState` costs the same at turn 2,000 as at
turn 20. Everything here is pure: renderers and tests take these values, no kernel needed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from gr_notebook.events import Event
from gr_notebook.plan import Plan
from gr_notebook.todos import TodoList

if TYPE_CHECKING:
    from gr_notebook.run import Run

__all__ = [
    "TIMELINE_KINDS",
    "DashboardState",
    "FeedbackEntry",
    "Level",
    "Meter",
    "RunTracker",
    "TimelineEntry",
    "describe",
    "meter_level",
    "plural",
]

Level: TypeAlias = Literal["none", "ok", "warn", "high"]

#: Fractions of a limit past which a meter turns amber, then red (seed 003's 50% and 80%).
WARN_AT = 0.5
HIGH_AT = 0.8
TIMELINE_SIZE = 12
FEEDBACK_SIZE = 5
MAX_TEXT = 160
MAX_BLOCK = 1_000


def meter_level(used: float, limit: float | None) -> Level:
    if not limit:
        return "none"
    fraction = used / limit
    return "high" if fraction > HIGH_AT else "warn" if fraction > WARN_AT else "ok"


@dataclass(frozen=True, slots=True)
class Meter:
    """One resource against its limit; ``limit=None`` means nothing is set to measure it by."""

    label: str
    used: int
    limit: int | None
    unit: str = ""

    @property
    def fraction(self) -> float | None:
        return self.used / self.limit if self.limit else None

    @property
    def level(self) -> Level:
        return meter_level(self.used, self.limit)

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if not self.limit:
            return f"{self.label}: {self.used:,}{unit} (no limit set)"
        return f"{self.label}: {self.used:,} / {self.limit:,}{unit} ({self.fraction:.0%})"


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    seq: int
    turn: int
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class FeedbackEntry:
    """A feedback block as it reached the model (seed 002's ``Feedback``, flattened)."""

    turn: int
    provider: str
    summary: str
    severity: str = "info"
    observations: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()
    text: str = ""
    """The block exactly as the model read it."""

    @classmethod
    def from_event(cls, event: Event) -> FeedbackEntry:
        data = event.data
        observations = tuple(
            f"{o.get('category', '')}: {o.get('description', '')}".strip(": ")
            if isinstance(o, Mapping)
            else str(o)
            for o in data.get("observations", ())
        )
        return cls(
            turn=event.turn,
            provider=str(data.get("provider", "feedback")),
            summary=str(data.get("summary", "")),
            severity=str(data.get("severity", "info")),
            observations=observations,
            suggestions=tuple(str(s) for s in data.get("suggestions", ())),
            text=str(data.get("text", ""))[:MAX_BLOCK],
        )


@dataclass(frozen=True, slots=True)
class DashboardState:
    run_id: str
    state: str
    reason: str | None
    todos: TodoList
    plan: Plan | None
    meters: tuple[Meter, ...]
    timeline: tuple[TimelineEntry, ...]
    """Newest first."""
    timeline_total: int
    feedback: tuple[FeedbackEntry, ...]
    """Newest first."""
    feedback_total: int
    job_summary: str | None = None

    @property
    def ended_early(self) -> bool:
        """The model stopped by itself with the job not complete: not a success."""
        return self.state == "completed" and self.job_summary is None

    @property
    def note(self) -> str | None:
        """Why the run is where it is, when that is worth saying."""
        if self.ended_early:
            return f"{self.reason or 'stopped'}; the job is not complete"
        return self.reason if self.state != "completed" else None

    @property
    def settled(self) -> bool:
        """Finished or paused: a state that is still true when the notebook is saved."""
        return self.state not in ("running", "pausing", "stopping")


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


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


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
    "run_finished": _run_finished,
}

#: Kinds that reach the timeline only sometimes: a denial, not every allowed call; a refused
#: or bypassed stop, not one that was simply allowed.
_NOTEWORTHY: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "policy_decision": lambda d: d.get("allowed") is False,
    "completion_check": lambda d: d.get("complete") is not True,
}

#: Event kinds that appear on the timeline; later layers add theirs with :func:`describe`.
TIMELINE_KINDS = frozenset(_DESCRIBERS)


def describe(event: Event) -> str:
    """One line for the timeline; unknown kinds fall back to the kind and its data."""
    describer = _DESCRIBERS.get(event.kind)
    if describer is not None:
        return _clip(describer(event.data))
    return _clip(f"{event.kind}: {dict(event.data)}")


def _always(data: Mapping[str, Any]) -> bool:
    return True


class RunTracker:
    """Follows a run's events, keeping the bounded lists a dashboard shows."""

    def __init__(
        self,
        *,
        timeline_size: int = TIMELINE_SIZE,
        feedback_size: int = FEEDBACK_SIZE,
        kinds: frozenset[str] = TIMELINE_KINDS,
    ) -> None:
        self.kinds = kinds
        self.timeline: deque[TimelineEntry] = deque(maxlen=timeline_size)
        self.feedback: deque[FeedbackEntry] = deque(maxlen=feedback_size)
        self.timeline_total = 0
        self.feedback_total = 0

    def add(self, event: Event) -> bool:
        """Take one event; True when it changed what the timeline or feedback panel shows."""
        if event.kind == "feedback":
            self.feedback.append(FeedbackEntry.from_event(event))
            self.feedback_total += 1
            return True
        if event.kind in self.kinds and _NOTEWORTHY.get(event.kind, _always)(event.data):
            self.timeline.append(TimelineEntry(event.seq, event.turn, event.kind, describe(event)))
            self.timeline_total += 1
            return True
        return False

    def snapshot(self, run: Run) -> DashboardState:
        summary = run.summary()
        limits = run.limits
        tokens = summary["input_tokens"] + summary["output_tokens"]
        job = run.job
        return DashboardState(
            run_id=run.run_id,
            state=run.state,
            reason=run.reason,
            todos=run.todos,
            plan=run.plan,
            meters=(
                Meter("Tokens used", tokens, limits.token_budget, "tokens"),
                Meter("Iterations", summary["turns"], limits.max_iterations, "turns"),
                Meter("Context", summary["context_tokens"], limits.context_window, "tokens"),
            ),
            timeline=tuple(reversed(self.timeline)),
            timeline_total=self.timeline_total,
            feedback=tuple(reversed(self.feedback)),
            feedback_total=self.feedback_total,
            job_summary=job.summary if job else None,
        )
