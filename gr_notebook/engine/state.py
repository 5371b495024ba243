"""``RunState``: everything one run knows, in one object (the anchor is pydantic-ai's
``RunContext``).

Identity, workspace and plan file, the clock, the event log, the turn and token counters,
the phase workflow (todos, plan, journal), the guardrails (policy memories, trigger state,
the refusal streak), self-regulation, the intervention tracker, the stuck detector and the
conversation. Nothing else keeps run state: the loop holds only the controls a person uses
(stop, pause), and each extension reads its own typed view of this object: guardrails a
:class:`~gr_notebook.guardrails.view.RunView`, tools a :class:`~gr_notebook.tools.ToolContext`,
policies a ``PolicyContext``, feedback providers a ``FeedbackContext``, completion checkers a
``TaskCompletionContext``, models a :class:`~gr_notebook.models.call_context.CallContext`.

:meth:`RunState.snapshot` turns all of it into JSON values and :meth:`RunState.restore`
brings it back, the guardrails' part through their own versioned snapshot: what a
checkpoint captures. Workspace files (plan, todos.json, notes, archive) are not copied; they
are the workspace's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gr_notebook.engine.context import ContextManager
from gr_notebook.engine.definition import AgentDefinition
from gr_notebook.engine.orders import guidance_data
from gr_notebook.errors import RunError
from gr_notebook.eventdata import plain_json
from gr_notebook.events import (
    Event,
    EventLog,
    FeedbackEvent,
    GuidanceEvent,
    GuidanceRecord,
    ModelCallEvent,
    PhaseStartedEvent,
    PoliciesResetEvent,
    as_typed,
    decode,
)
from gr_notebook.guardrails.approval import Approvals
from gr_notebook.guardrails.budget import Budget, BudgetUsage
from gr_notebook.guardrails.interventions import InterventionEngine, ProgressTracker
from gr_notebook.guardrails.regulation import ResourceReport, SelfRegulation
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.shadow import run_guardrails
from gr_notebook.guidance import Directive, feedback_directive
from gr_notebook.messages import Usage
from gr_notebook.models.call_context import CallContext, DeltaFeed
from gr_notebook.models.secrets import key_redactor
from gr_notebook.tools.base import ToolContext
from gr_notebook.workflow.phases import PhaseController
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.stuck import StuckDetector
from gr_notebook.workflow.todos import TodoList
from gr_notebook.workflow.workspace import Workspace

__all__ = ["STATE_VERSION", "RunState"]

STATE_VERSION = 1
"""The layout of :meth:`RunState.snapshot`; its guardrails part has its own version."""


class RunState:
    """One run's state; built by the agent for each run, read by the loop and its parts."""

    def __init__(
        self,
        definition: AgentDefinition,
        *,
        workspace: Workspace,
        clock: Callable[[], float],
        run_id: str = "",
        events: EventLog | None = None,
    ) -> None:
        self.run_id = run_id
        self.name = definition.name
        self.workspace = workspace
        self.plan_file = definition.plan_file
        self.budget: Budget = definition.budget
        self.clock = clock
        self.events = events if events is not None else EventLog(clock)
        self.turn = 0
        """Model calls made (the iteration counter)."""
        self.tokens = 0
        """Every token the model read or wrote, cached or not."""
        self.cost_usd = 0.0
        """Dollars spent on the model calls priced so far."""
        self.started_at = clock()
        self.regulation: SelfRegulation | None = None
        self.phases = PhaseController(
            workspace,
            definition.plan_file,
            self.emit,
            clock,
            regulated=definition.regulation is not None,
        )
        if definition.regulation is not None:
            self.regulation = SelfRegulation(definition.regulation, self)
        self.guards: Guardrails = run_guardrails(
            definition.guardrails, self, shadow=definition.shadow
        )
        """The live guardrails, which tee every point to the shadow ones."""
        self.approvals = Approvals(
            emit=self.emit,
            confirm=definition.confirm,
            run_id=run_id,
            time_left=self.time_left,
            clock=clock,
        )
        """Tool calls that wait for a person, and who answers them; not part of a snapshot."""
        self.interventions = (
            InterventionEngine(definition.interventions) if definition.interventions else None
        )
        self.stuck_detector: StuckDetector | None = definition.new_stuck_detector()
        self.context = ContextManager()
        self.rewinds: list[tuple[str, bool]] = []
        """A person's rewinds (issue, reset_policies), applied at the next safe point."""
        self.todo_order: str | None = None
        """The todo layer's INSTRUCTION line last recorded as guidance."""
        self.deltas = DeltaFeed()
        """Who watches the model's turns as they stream; not part of a snapshot."""
        self.redact_key: Callable[[str], str] = key_redactor(definition.model)
        """Removes the model adapter's API key from a tool's result (decision 383)."""
        self._wrap_up: str | None = None
        """The wrap-up order of a run without self-regulation's state (a session)."""
        self.root_run_id = run_id
        """The first run of this run's lineage (a resume's and a fork's is their parent's):
        what a call's idempotency key is made from; not part of a snapshot."""
        self.keep: Callable[[bytes], str] | None = None
        """Keeps bytes in the run's store by their hash and returns it (None without a
        store): the model's reply and what else the side-effect records need whole."""

    # -- the run as the guardrails read it (RunView) ---------------------------------------------

    @property
    def todos(self) -> TodoList:
        return self.phases.todos

    def plan(self) -> Plan | None:
        return self.phases.plan()

    def phase_ahead(self) -> tuple[int, str]:
        return self.phases.phase_ahead()

    @property
    def wrap_up(self) -> str | None:
        """The recommendation that ordered a wrap-up, once one did: a stop then goes
        through unchecked."""
        return self.regulation.wrap_up if self.regulation is not None else self._wrap_up

    def order_wrap_up(self, recommendation: str) -> None:
        """The run was told to wrap up (by a host without gr's todo layer)."""
        if self.regulation is not None:
            self.regulation.wrap_up = self.regulation.wrap_up or recommendation
        else:
            self._wrap_up = self._wrap_up or recommendation

    @property
    def winding_down(self) -> bool:
        """Told to wrap up, the run is finishing, not stuck: no intervention watches it."""
        return self.phases.wrap_up_ordered or (self.regulation is None and bool(self._wrap_up))

    def usage(self) -> BudgetUsage:
        """What the run has used of its budget, now."""
        return self.budget.usage(
            tokens=self.tokens,
            iterations=self.turn,
            elapsed_s=self.clock() - self.started_at,
            cost_usd=self.cost_usd,
        )

    def time_left(self) -> float | None:
        """Seconds until the run's deadline, or None without one."""
        deadline = self.budget.deadline_s
        return None if deadline is None else deadline - (self.clock() - self.started_at)

    def emit(self, event: Event) -> None:
        """Record ``event`` at this turn and phase; a feedback block carries its order."""
        if isinstance(event, FeedbackEvent) and event.directive is None:
            order = feedback_directive(event.provider, event.text)
            event = replace(event, directive=self.guidance(order))
        self.events.append(event, turn=self.turn, phase=self.phases.todos.phase_number)
        if isinstance(event, PhaseStartedEvent) and self.regulation is not None:
            self.regulation.on_phase_started(event.phase_number)

    def reset_policies(self, source: str) -> None:
        """Forget what the tool policies remember (a rewind that asked for it)."""
        self.guards.reset_policies()
        self.emit(PoliciesResetEvent(source=source, policies=list(self.guards.memories)))

    # -- views for the other extension points ---------------------------------------------------

    def tool_context(self, source: str = "model", *, key: str = "") -> ToolContext:
        return ToolContext(
            self.workspace, self.phases, self.clock, self.turn, source, self.regulation, key
        )

    def call_context(self, input_tokens: int | None = None) -> CallContext:
        limit = self.budget.max_tokens
        remaining = None if limit is None else max(0, limit - self.tokens)
        return CallContext(self.emit, remaining, input_tokens, self.deltas, self.turn)

    # -- guidance and meters ---------------------------------------------------------------------

    def guidance(self, directive: Directive) -> GuidanceRecord:
        """An order given to the model, with the state of the job at that moment: recorded
        on the event that delivers it (see :mod:`gr_notebook.guidance`)."""
        return guidance_data(
            directive,
            todos=self.phases.todos,
            plan=self.phases.plan(),
            usage=self.usage(),
            job_done=self.phases.job is not None,
        )

    def direct(self, directive: Directive) -> None:
        """An order that no other event delivers (the todo layer, the kickoff)."""
        self.emit(GuidanceEvent(directive=self.guidance(directive)))

    def record_model_call(
        self,
        usage: Usage,
        *,
        context_tokens: int,
        layers: Sequence[int] = (0, 0, 0, 0, 0),
        messages: int = 0,
        **call: Any,
    ) -> None:
        """One model call's ``model_call`` event, its tokens already counted: with the
        budget the agent is measured against now, as the meters show it (what
        check_resources would report: the phase's allotment, else the run's limits). A host
        that assembles its own request has no ``layers`` to give."""
        usage_now = self.usage()
        report = (
            self.regulation.report(usage_now)
            if self.regulation is not None
            else ResourceReport.of(usage_now, None)
        )
        one, two, three, four, five = layers
        self.emit(
            ModelCallEvent(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens,
                cache_write_tokens=usage.cache_creation_input_tokens,
                context_tokens=context_tokens,
                layer1_tokens=one,
                layer2_tokens=two,
                layer3_tokens=three,
                layer4_tokens=four,
                layer5_tokens=five,
                messages=messages,
                tokens_used=self.tokens,
                iterations_used=usage_now.iterations,
                tokens_budget=report.tokens_budget,
                iterations_max=report.iterations_max,
                budget_tokens_used=report.tokens_used,
                budget_iterations_used=report.iterations_used,
                budget_scope=report.scope,
                **call,
            )
        )

    # -- snapshots -------------------------------------------------------------------------------

    def snapshot(self, *, history: bool = True) -> dict[str, Any]:
        """All of the run's state as JSON values, for :meth:`restore`; taken between turns.
        ``history=False`` leaves out what a checkpoint keeps apart, each once: the events,
        layer 5's messages and the feedback's recent tool calls."""
        engine = self.interventions
        snapshot: dict[str, Any] = {
            "version": STATE_VERSION,
            "run": {
                "run_id": self.run_id,
                "name": self.name,
                "workspace": str(self.workspace.root),
                "plan_file": self.plan_file,
            },
            "counters": {
                "turn": self.turn,
                "tokens": self.tokens,
                "elapsed_s": self.clock() - self.started_at,
                "cost_usd": self.cost_usd,
            },
            "context": self.context.to_json(messages=history),
            "phases": self.phases.to_json(),
            "regulation": self.regulation.to_json() if self.regulation else None,
            "guardrails": self.guards.snapshot(recent=history),
            "interventions": engine.to_json() if engine else None,
            "shadow": self.guards.shadow_snapshot(),
            "stuck_detector": _detector_json(self.stuck_detector),
            "pending": {
                "rewinds": [[issue, reset] for issue, reset in self.rewinds],
                "todo_order": self.todo_order,
            },
        }
        if history:
            snapshot["events"] = [_event_json(e) for e in self.events]
        return snapshot

    def restore(
        self, snapshot: Mapping[str, Any], *, events: Sequence[Event] | None = None
    ) -> None:
        """Bring back a :meth:`snapshot` into this state, built from the same agent
        definition and with no events yet. The identity stays this run's (a fork is a new
        run); everything else is the snapshot's. ``events``, when given, stand for the
        snapshot's (a checkpoint reads them from the store). Refused whole, leaving the
        state as it was, when the snapshot does not fit."""
        if len(self.events):
            raise RunError("restore a snapshot into a fresh run state, before its first event")
        try:
            if not isinstance(snapshot, Mapping) or snapshot.get("version") != STATE_VERSION:
                raise ValueError(f"expected a run state snapshot of version {STATE_VERSION}")
            if snapshot["run"]["plan_file"] != self.plan_file:
                raise ValueError(
                    f"its plan file is {snapshot['run']['plan_file']!r}, this run's is "
                    f"{self.plan_file!r}"
                )
            counters = snapshot["counters"]
            turn, tokens = int(counters["turn"]), int(counters["tokens"])
            elapsed = float(counters["elapsed_s"])
            if events is None:
                events = [_event_of(e) for e in snapshot["events"]]
            cost = counters.get("cost_usd")
            cost = _priced_calls(events) if cost is None else float(cost)
            apply_phases = self.phases.load_json(snapshot["phases"])
            context = ContextManager()
            context.load_json(snapshot["context"])
            _same_parts(self.regulation, snapshot["regulation"], "self-regulation")
            _same_parts(self.interventions, snapshot["interventions"], "interventions")
            apply_regulation = (
                self.regulation.load_json(snapshot["regulation"]) if self.regulation else None
            )
            tracker = (
                ProgressTracker.from_json(snapshot["interventions"]) if self.interventions else None
            )
            pending = snapshot["pending"]
            rewinds = [(str(issue), bool(reset)) for issue, reset in pending["rewinds"]]
            todo_order = pending["todo_order"]
            if todo_order is not None and not isinstance(todo_order, str):
                raise TypeError("pending.todo_order must be text or null")
            detector_state = snapshot["stuck_detector"]
            guardrails = snapshot["guardrails"]
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise RunError(
                f"this is not a run state snapshot of this agent ({type(exc).__name__}: {exc}); "
                "pass what RunState.snapshot() returned"
            ) from None
        self.guards.restore_shadow(snapshot.get("shadow"), recent=guardrails["feedback"]["recent"])
        self.guards.restore(guardrails)  # checks, then applies, or raises: before any change
        self.turn, self.tokens, self.cost_usd = turn, tokens, cost
        self.started_at = self.clock() - elapsed
        self.events.load(events)
        apply_phases()
        self.context = context
        if apply_regulation is not None:
            apply_regulation()
        if self.interventions is not None and tracker is not None:
            self.interventions.tracker = tracker
        loader = getattr(self.stuck_detector, "load_json", None)
        if detector_state is not None and callable(loader):
            loader(detector_state)
        self.rewinds, self.todo_order = rewinds, todo_order


def _priced_calls(events: Sequence[Event]) -> float:
    """What the model calls recorded cost: for a snapshot made before the cost was kept."""
    total = 0.0
    for event in map(as_typed, events):
        if isinstance(event, ModelCallEvent) and isinstance(event.cost_usd, (int, float)):
            total += event.cost_usd
    return total


def _same_parts(mine: object, saved: object, what: str) -> None:
    """A part the agent has on (or off) must be in the snapshot (or not)."""
    if (mine is None) != (saved is None):
        on, off = ("has", "has no") if saved is not None else ("has no", "has")
        raise ValueError(f"the snapshot {on} {what} state and this agent {off}")


def _detector_json(detector: object) -> Any:
    to_json = getattr(detector, "to_json", None)
    return to_json() if callable(to_json) else None


def _event_json(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "turn": event.turn,
        "phase": event.phase,
        "time": event.time,
        "data": plain_json(event.to_data()),
    }


def _event_of(data: Mapping[str, Any]) -> Event:
    payload = data["data"]
    if not isinstance(payload, Mapping):
        raise ValueError(f"event {data.get('seq')}: data must be an object")
    return decode(
        str(data["kind"]),
        payload,
        seq=int(data["seq"]),
        turn=int(data["turn"]),
        phase=int(data["phase"]),
        time=float(data["time"]),
    )
