"""What a dashboard shows, as plain values: meters, timeline entries, feedback blocks.

A :class:`RunTracker` follows a run's events and keeps only the last few timeline and
feedback entries, plus the latest budget the events announced, so building a
:class:`DashboardState` costs the same at turn 2,000 as at turn 20. Everything here is pure:
renderers and tests take these values, no kernel needed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeAlias

from gr_notebook.display.timeline import (
    TIMELINE_KINDS,
    Tone,
    describe,
    describe_held_off,
    tone_of,
    worth_a_line,
)
from gr_notebook.eventdata import clip
from gr_notebook.events import (
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionSkippedEvent,
    ModelCallEvent,
    TaskAssessedEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolRecoveredEvent,
    as_typed,
    is_shadow,
)
from gr_notebook.harness import GR_LOOP, Harness
from gr_notebook.limits import usd
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList

if TYPE_CHECKING:
    from gr_notebook.run import Run

__all__ = [
    "TIMELINE_KINDS",
    "DashboardState",
    "FeedbackEntry",
    "Level",
    "Meter",
    "RunTracker",
    "ThinkingEntry",
    "TimelineEntry",
    "Tone",
    "ToolCallEntry",
    "describe",
    "meter_level",
]

Level: TypeAlias = Literal["none", "ok", "warn", "high"]

#: Fractions of a limit past which a meter turns amber, then red (seed 003's 50% and 80%).
WARN_AT = 0.5
HIGH_AT = 0.8
TIMELINE_SIZE = 12
EARLIER_SIZE = 40
"""Lines that left the timeline which its "… N earlier" still unfolds; older ones are in
``run.events_df()``."""
FEEDBACK_SIZE = 5
THINKING_SIZE = 3
CALLS_SIZE = 8
SHADOW_SIZE = 8
MAX_BLOCK = 1_000
MAX_TARGET = 80
_TARGET_KEYS = ("file_path", "notebook_path", "path", "command", "pattern", "url", "query")


def meter_level(used: float, limit: float | None) -> Level:
    if not limit:
        return "none"
    fraction = used / limit
    return "high" if fraction > HIGH_AT else "warn" if fraction > WARN_AT else "ok"


@dataclass(frozen=True, slots=True)
class Meter:
    """One resource against its limit; ``limit=None`` means nothing is set to measure it by."""

    label: str
    used: int | float
    limit: int | float | None
    unit: str = ""
    """``USD`` shows dollars (``$0.41 / $1.00``)."""

    @property
    def fraction(self) -> float | None:
        return self.used / self.limit if self.limit else None

    @property
    def level(self) -> Level:
        return meter_level(self.used, self.limit)

    def describe(self) -> str:
        if self.unit == "USD":
            if self.limit is None:
                return f"{self.label}: {usd(self.used)} (no limit set)"
            share = f" ({self.fraction:.0%})" if self.limit else ""
            return f"{self.label}: {usd(self.used)} / {usd(self.limit)}{share}"
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
    tone: Tone = "plain"


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
        """From a ``feedback`` event (an untyped one is read leniently)."""
        feedback = as_typed(event)
        if not isinstance(feedback, FeedbackEvent):
            raise TypeError(f"a feedback entry comes from a feedback event, not {event.kind}")
        observations = tuple(
            f"{o.get('category', '')}: {o.get('description', '')}".strip(": ")
            if isinstance(o, Mapping)
            else str(o)
            for o in feedback.observations
        )
        return cls(
            turn=event.turn,
            provider=feedback.provider or "feedback",
            summary=feedback.summary,
            severity=feedback.severity or "info",
            observations=observations,
            suggestions=tuple(str(s) for s in feedback.suggestions),
            text=feedback.text[:MAX_BLOCK],
        )


@dataclass(frozen=True, slots=True)
class ThinkingEntry:
    """A reply's thinking as its event kept it (clipped); shown collapsed."""

    turn: int
    text: str
    blocks: int
    redacted: int
    chars: int

    @classmethod
    def from_event(cls, event: ThinkingEvent) -> ThinkingEntry:
        return cls(event.turn, event.text, event.blocks, event.redacted, event.chars)

    @property
    def headline(self) -> str:
        """What shows while the entry is collapsed."""
        size = f"{self.chars:,} characters" if self.chars else "no text shown"
        redacted = f", {self.redacted} redacted" if self.redacted else ""
        return f"Thought ({size}{redacted})"


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """One tool call as a session's dashboard lists it: the tool, what it acted on, and
    how it went (a policy's denial names the policy)."""

    turn: int
    tool: str
    target: str
    """The file, command, pattern or address it was given; empty for none of those."""
    outcome: Literal["ran", "failed", "denied", "unverified"]
    note: str = ""
    """The policy that denied it, or the first line of its error."""

    @classmethod
    def from_event(cls, event: ToolCallEvent) -> ToolCallEntry:
        params = event.input if isinstance(event.input, Mapping) else {}
        target = next((str(params[k]) for k in _TARGET_KEYS if params.get(k)), "")
        target = clip(" ".join(target.split()), MAX_TARGET)
        source = event.directive.source if event.directive is not None else ""
        if event.is_error and source.startswith("policy:"):
            return cls(event.turn, event.tool, target, "denied", source.removeprefix("policy:"))
        if event.is_error:
            first = (event.result.strip().splitlines() or [""])[0]
            return cls(event.turn, event.tool, target, "failed", first[:MAX_TARGET])
        return cls(event.turn, event.tool, target, "ran")

    @property
    def how(self) -> str:
        """How the call went, in words: ``ran``, ``denied by no_secrets``, ``failed: …``."""
        if self.outcome == "denied":
            return f"denied by {self.note}"
        if self.outcome == "failed" and self.note:
            return f"failed: {self.note}"
        if self.outcome == "unverified":
            return "UNVERIFIED: outcome unknown after the interruption"
        return self.outcome

    def describe(self) -> str:
        target = f" {self.target}" if self.target else ""
        return f"{self.tool}{target}: {self.how}"

    def relative_to(self, root: str) -> ToolCallEntry:
        """The target with the workspace's own prefix dropped, as the session's cwd reads."""
        prefix = root.rstrip("/") + "/"
        if prefix == "/" or prefix not in self.target:
            return self
        return replace(self, target=self.target.replace(prefix, ""))


@dataclass(frozen=True, slots=True)
class DashboardState:
    run_id: str
    status: str
    reason: str | None
    todos: TodoList
    plan: Plan | None
    """The plan beside the todo layer: its current phase is the one the layer works."""
    meters: tuple[Meter, ...]
    timeline: tuple[TimelineEntry, ...]
    """Newest first."""
    timeline_total: int
    feedback: tuple[FeedbackEntry, ...]
    """Newest first."""
    feedback_total: int
    job_summary: str | None = None
    thinking: tuple[ThinkingEntry, ...] = ()
    """The model's latest thinking, newest first (empty unless it thinks)."""
    harness: Harness = GR_LOOP
    """What ran the model: a harness that is not ``phased`` has no todo list or plan to show."""
    calls: tuple[ToolCallEntry, ...] = ()
    """The latest tool calls, newest first: what a session without a todo list shows."""
    calls_total: int = 0
    shadow: tuple[TimelineEntry, ...] = ()
    """What the shadow guardrails would have done (and did not), newest first."""
    shadow_total: int = 0
    timeline_earlier: tuple[TimelineEntry, ...] = ()
    """The latest lines that left the timeline (at most :data:`EARLIER_SIZE`), newest
    first: what its "… N earlier" unfolds."""

    @property
    def ended_early(self) -> bool:
        """The model stopped by itself with the job not reported complete: not a success."""
        return self.status == "ended"

    @property
    def note(self) -> str | None:
        """Why the run is where it is, when that is worth saying."""
        if self.ended_early:  # either harness ends so only with no checker to judge the stop
            return f"{self.reason or 'stopped'}; no completion check confirmed the job"
        return self.reason if self.status != "completed" else None

    @property
    def settled(self) -> bool:
        """Finished or paused: a state that is still true when the notebook is saved."""
        return self.status not in ("running", "pausing", "stopping")


class RunTracker:
    """Follows a run's events, keeping the bounded lists a dashboard shows and the budget
    the latest events announced (an approved assessment replaces the run's own limits)."""

    def __init__(
        self,
        *,
        timeline_size: int = TIMELINE_SIZE,
        feedback_size: int = FEEDBACK_SIZE,
        thinking_size: int = THINKING_SIZE,
        calls_size: int = CALLS_SIZE,
        kinds: frozenset[str] = TIMELINE_KINDS,
        shadow_size: int = SHADOW_SIZE,
        earlier_size: int = EARLIER_SIZE,
    ) -> None:
        self.kinds = kinds
        self.shadow: deque[TimelineEntry] = deque(maxlen=shadow_size)
        self.shadow_total = 0
        """A shadow guardrail's decisions and failures: listed apart, never as the run's."""
        self.timeline_size = timeline_size
        self.timeline: deque[TimelineEntry] = deque()
        self.earlier: deque[TimelineEntry] = deque(maxlen=earlier_size)
        """The latest lines that made room for newer ones, in the order they left."""
        self.feedback: deque[FeedbackEntry] = deque(maxlen=feedback_size)
        self.thinking: deque[ThinkingEntry] = deque(maxlen=thinking_size)
        self.calls: deque[ToolCallEntry] = deque(maxlen=calls_size)
        self.calls_total = 0
        self.timeline_total = 0
        self.feedback_total = 0
        self.tokens_budget: int | None = None
        """The token budget the latest event announced; ``None`` until one does."""
        self.iterations_max: int | None = None
        self.assessed = False
        """An approved ``assess_task`` set the budget (rather than the run's limits)."""
        self.budget_used: tuple[int, int] | None = None
        """(tokens, turns) used of that budget, as the latest event counted them: an
        allotment counts from its assessment."""
        self._unverified: set[str] = set()
        """Calls a resume could not verify, until their ``tool_call`` comes."""
        self._held: tuple[str | None, int, int] | None = None
        """(skip reason, first step, count) while the newest line is a run of skipped checks."""

    def add(self, event: Event) -> bool:
        """Take one event; True when it changed what the timeline, the feedback panel, the
        thinking panel or the tool calls show."""
        event = as_typed(event)
        kind = event.kind
        if is_shadow(event):
            return self._add_shadow(event)
        if isinstance(event, ModelCallEvent):
            self.tokens_budget = event.tokens_budget
            self.iterations_max = event.iterations_max or None  # 0: an untyped call had none
            self.assessed = event.budget_scope not in ("the run", "")
            self.budget_used = (event.budget_tokens_used, event.budget_iterations_used)
            return False
        if isinstance(event, TaskAssessedEvent) and event.approved is True:
            self.tokens_budget = event.token_budget
            self.iterations_max = event.max_iterations
            self.assessed = True
            self.budget_used = (0, 0)
        if isinstance(event, FeedbackEvent):
            self.feedback.append(FeedbackEntry.from_event(event))
            self.feedback_total += 1
            return True
        if isinstance(event, ThinkingEvent):
            self.thinking.append(ThinkingEntry.from_event(event))
            return True
        if isinstance(event, ToolRecoveredEvent) and event.verdict == "unverified":
            self._unverified.add(event.tool_use_id)  # its tool_call follows
        if isinstance(event, ToolCallEvent):
            call = ToolCallEntry.from_event(event)
            if event.tool_use_id in self._unverified:
                self._unverified.discard(event.tool_use_id)
                call = replace(call, outcome="unverified", note="")
            self.calls.append(call)
            self.calls_total += 1
            return True
        if kind not in self.kinds or not worth_a_line(event):
            return False
        entry = TimelineEntry(event.seq, event.turn, kind, describe(event), tone_of(event))
        held, self._held = self._held, None
        if isinstance(event, InterventionSkippedEvent):
            reason, step = event.skip_reason, event.step
            if held is not None and held[0] == reason and self.timeline:
                # Checks held off in a row for one reason share a line: a healthy run's
                # check every few steps must not push the interventions off the timeline.
                first, count = held[1], held[2] + 1
                text = describe_held_off(event, first_step=first, count=count)
                self.timeline[-1] = replace(entry, text=text)
                self._held = (reason, first, count)
                return True
            self._held = (reason, step, 1)
        self.timeline.append(entry)
        self.timeline_total += 1
        if len(self.timeline) > self.timeline_size:
            self._make_room()
        return True

    def _add_shadow(self, event: Event) -> bool:
        """A shadow's decision that would have changed something (a denial, feedback, a
        refused stop, an intervention) or its failure; the rest (allowed calls, accepted
        stops, checks held off) would not have, and is left to ``run.shadow_df()``."""
        if not isinstance(event, FeedbackEvent | ErrorEvent) and (
            isinstance(event, InterventionSkippedEvent) or not worth_a_line(event)
        ):
            return False
        self.shadow.append(TimelineEntry(event.seq, event.turn, event.kind, describe(event)))
        self.shadow_total += 1
        return True

    def _make_room(self) -> None:
        """Drop the oldest muted line (a held-off check) before any other, so a healthy
        run's checks every few steps never push a pause, a phase or an intervention off the
        timeline; the newest line always stays. Costs the timeline's length, not the run's."""
        for i in range(len(self.timeline) - 1):
            if self.timeline[i].tone == "muted":
                self.earlier.append(self.timeline[i])
                del self.timeline[i]
                return
        self.earlier.append(self.timeline.popleft())

    def meters(self, run: Run) -> tuple[Meter, ...]:
        """Tokens against the budget the events announced, else the run's limits;
        iterations likewise; the context against the model's window; the dollars spent
        against the cost limit, when one is set."""
        summary = run.summary()
        limits = run.limits
        tokens, turns = summary["input_tokens"] + summary["output_tokens"], summary["turns"]
        if self.assessed and self.budget_used is not None:
            tokens, turns = self.budget_used
        budget = self.tokens_budget if self.tokens_budget is not None else limits.token_budget
        cap = self.iterations_max if self.iterations_max is not None else limits.max_iterations
        basis = " (assessed)" if self.assessed else ""
        meters = (
            Meter(f"Tokens used{basis}", tokens, budget, "tokens"),
            Meter(f"Iterations{basis}", turns, cap, "turns"),
            Meter("Context", summary["context_tokens"], limits.context_window, "tokens"),
        )
        if limits.cost_limit_usd is None:
            return meters
        return (*meters, Meter("Cost", summary["cost_usd"] or 0.0, limits.cost_limit_usd, "USD"))

    def snapshot(self, run: Run) -> DashboardState:
        job = run.job
        return DashboardState(
            run_id=run.run_id,
            status=run.status,
            reason=run.reason,
            todos=run.todos,
            plan=_plan_beside(run.plan, run.todos) if run.harness.phased else run.plan,
            meters=self.meters(run),
            timeline=tuple(reversed(self.timeline)),
            timeline_total=self.timeline_total,
            feedback=tuple(reversed(self.feedback)),
            feedback_total=self.feedback_total,
            job_summary=job.summary if job else None,
            thinking=tuple(reversed(self.thinking)),
            harness=run.harness,
            calls=tuple(c.relative_to(str(run.workspace.root)) for c in reversed(self.calls)),
            calls_total=self.calls_total,
            shadow=tuple(reversed(self.shadow)),
            shadow_total=self.shadow_total,
            timeline_earlier=tuple(sorted(self.earlier, key=lambda e: e.seq, reverse=True)),
        )


def _plan_beside(plan: Plan | None, todos: TodoList) -> Plan | None:
    """The plan as the dashboard shows it: its current phase is the one the todo layer
    works, whatever the file marks (the model marks Phase 1 current while it still
    bootstraps, and the next phase before it writes that phase's todos)."""
    if plan is None:
        return None
    return plan.with_current(todos.phase_number if todos.kind == "phase" else None)
