"""``Run``: the handle on one execution of an agent, live or finished.

It is what a notebook holds on to: status, events, todos and plan while the loop is going,
controls (wait, cancel, rewind) to steer it, and DataFrames to analyse it afterwards. Its
state is the loop's :class:`~gr_notebook.engine.state.RunState`; its end is
:attr:`Run.outcome` (status, reason, and the limit that ended it as a value).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gr_notebook.engine.outcome import LoopOutcome, RunStatus
from gr_notebook.errors import RunError
from gr_notebook.events import (
    ConversationReleasedEvent,
    Event,
    EventLog,
    ModelCallEvent,
    PhaseTransitionEvent,
    Subscriber,
    TaskAssessedEvent,
    as_typed,
)
from gr_notebook.guardrails.policy import PolicyState
from gr_notebook.harness import GR_LOOP, Harness
from gr_notebook.history.store import Store
from gr_notebook.models.call_context import ModelDelta
from gr_notebook.reprs import notebook_display, to_html
from gr_notebook.wording import plural
from gr_notebook.workflow.phases import JobResult
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList
from gr_notebook.workflow.workspace import Workspace

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.engine.controls import Controls
    from gr_notebook.guardrails.approval import ApprovalDesk
    from gr_notebook.history.labels import Label

__all__ = ["Limits", "PhaseState", "Run", "RunStatus", "current_run", "set_forker", "set_sharer"]

_latest: Run | None = None


class Forker(Protocol):
    """What :meth:`Run.fork` asks: filled by the facade, since this layer imports no review
    code."""

    def __call__(
        self,
        run: Run,
        turn: int,
        agent: object,
        *,
        workspace: str | os.PathLike[str] | None,
        wait: bool,
    ) -> Run: ...


_forker: Forker | None = None


def set_forker(forker: Forker) -> None:
    global _forker
    _forker = forker


class Sharer(Protocol):
    """What :meth:`Run.to_html` and :meth:`Run.view` ask (``gr_notebook.share``, filled in
    by the facade like the forker)."""

    def export_html(
        self,
        runs: object,
        path: str | os.PathLike[str],
        *,
        store: Store | str | os.PathLike[str] | None = None,
        title: str | None = None,
    ) -> Path: ...

    def view(
        self,
        runs: object,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        height: int = 760,
    ) -> object: ...


_sharer: Sharer | None = None


def set_sharer(sharer: Sharer) -> None:
    global _sharer
    _sharer = sharer


def current_run() -> Run | None:
    """The most recently started run in this process, or ``None`` before the first."""
    return _latest


def _nothing() -> None:
    """Unsubscribing from what never sends."""


class PhaseState(Protocol):
    """The phases as a run reads them: gr's ``PhaseController``, or a recorded run's end."""

    @property
    def todos(self) -> TodoList: ...
    @property
    def job(self) -> JobResult | None: ...
    def plan(self) -> Plan | None: ...
    def add_todo(self, title: str, *, source: str = "person") -> str: ...
    def complete_todo(self, *, source: str = "model") -> str: ...


@dataclass(frozen=True, slots=True)
class Limits:
    """What a run's resource meters measure against."""

    max_iterations: int
    context_window: int
    token_budget: int | None = None
    cost_limit_usd: float | None = None


class Run:
    def __init__(
        self,
        run_id: str,
        *,
        controls: Controls | None = None,
        workspace: Workspace,
        events: EventLog | None = None,
        phases: PhaseState | None = None,
        instructions: str,
        limits: Limits,
        harness: Harness = GR_LOOP,
    ) -> None:
        self.run_id = run_id
        self.limits = limits
        self.harness = harness
        """What runs the model: gr's phased loop, or another harness (no todo list, no plan)."""
        self.workspace = workspace
        self.instructions = instructions
        self.error: BaseException | None = None
        self.reason: str | None = None
        self.outcome: LoopOutcome | None = None
        """How the run ended, once it has: ``outcome.limit`` is the limit that ended it."""
        if controls is not None:
            events, phases = controls.state.events, controls.state.phases
        if events is None or phases is None:
            raise TypeError("Run takes controls=, or events= and phases= for a recorded run")
        self._events = events
        self._phases = phases
        self._loop = controls
        """The run's state and a person's requests of it, from the start (an ``agent.on_run``
        callback attends the desk before the first call can ask); None for a run read back
        from its store."""
        self._task: asyncio.Task[Run] | None = None
        self._totals = _Totals()
        self._released = False
        for event in events:  # a run resumed from a checkpoint counts what came before
            self._totals.add(event)
        events.subscribe(self._totals.add)
        self._agent: object = None
        """Kept alive while the run is: ``gr.resume(run_id)`` finds it (``runner.started_by``)."""
        self._store: Store | None = None
        self._recorded = False

    def read_back(self, outcome: LoopOutcome, store: Store) -> None:
        """Make this run the record of one that ended, read back from ``store``
        (``gr_notebook.review.recorded``): its state to read, its dashboard, DataFrames and
        forks; nothing of it can be steered."""
        self.settle(outcome)
        self._store, self._recorded = store, True

    @property
    def read_only(self) -> bool:
        """Read back from its store (``gr.Dashboard(run_id)``): nothing of it runs here."""
        return self._recorded

    # -- state ----------------------------------------------------------------------------------

    @property
    def events(self) -> EventLog:
        return self._events

    @property
    def todos(self) -> TodoList:
        return self._phases.todos

    @property
    def plan(self) -> Plan | None:
        return self._phases.plan()

    @property
    def job(self) -> JobResult | None:
        return self._phases.job

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def turns(self) -> int:
        return self._loop.state.turn if self._loop else self._totals.turns

    @property
    def paused(self) -> bool:
        """True while the loop is actually waiting at a safe point, not merely asked to."""
        loop = self._loop
        return loop is not None and loop.paused and loop.pause_requested

    @property
    def status(self) -> RunStatus:
        """How the run ended (decision 129's status table, in
        docs/decisions/run-status-and-lifecycle.md); while it is live, ``running``,
        ``pausing``, ``paused`` or ``stopping``. :attr:`done` says which."""
        loop = self._loop
        if self.outcome is not None:
            return self.outcome.status
        if loop is None:
            return "running"
        if loop.stop_reason:
            return "stopping"
        if loop.pause_requested:
            return "paused" if loop.paused else "pausing"
        return "running"

    # -- control --------------------------------------------------------------------------------

    async def wait(self) -> Run:
        if self._task is None:
            raise RunError("this run was never started; use agent.start(...) or agent.run(...)")
        await asyncio.shield(self._task)
        return self

    def cancel(self, reason: str = "cancelled by request", *, interrupted: bool = False) -> None:
        """Stop the run; a model request in flight is cancelled too. ``interrupted=True``
        is Ctrl-C's stop: the run ends ``interrupted`` rather than ``cancelled``."""
        if self.done or self._loop is None:
            return
        # honoured between turns, even before the first
        self._loop.request_stop(reason, interrupted=interrupted)
        if self._loop.started and self._task is not None and not self._task.done():
            self._task.cancel(reason)  # cuts a model request or tool call in flight

    def add_todo(self, title: str) -> str:
        """Append a task to the active list, as a person; the model sees it next turn."""
        title = " ".join(title.split())
        if not title:
            raise RunError("say what the task is: run.add_todo('Check the glossary')")
        self._live_loop("add a todo")
        return self._phases.add_todo(title, source="person")

    def complete_todo(self) -> str:
        """Tick the current task, as a person; finishing the list starts the transition."""
        self._live_loop("complete a todo")
        return self._phases.complete_todo(source="person")

    def pause(self) -> None:
        """Hold the run at the next safe point between turns, until :meth:`unpause`."""
        loop = self._live_loop("pause")
        if loop.stop_reason:
            raise RunError(f"cannot pause: run {self.run_id} is stopping ({loop.stop_reason})")
        loop.request_pause()

    def unpause(self) -> None:
        """Let a paused run go on. (``gr.resume`` is another thing: it restarts a run that
        was killed, from its checkpoint.)"""
        self._live_loop("unpause").request_unpause()

    def rewind(self, issue: str, *, reset_policies: bool = False) -> None:
        """Run the rewind workflow at the next safe point between turns.

        What the tool policies remember (files read, tools run) is kept, as the workspace
        is, unless ``reset_policies=True``.
        """
        if not issue.strip():
            raise RunError("say what is wrong: run.rewind('the approach fails because …')")
        self._live_loop("rewind").request_rewind(issue, reset_policies=reset_policies)

    # -- time travel ----------------------------------------------------------------------------

    def fork(
        self,
        turn: int,
        agent: object = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        wait: bool = True,
    ) -> Run:
        """A new run from this run's checkpoint of ``turn`` (the state as that turn began),
        in a new workspace holding the files as they were, under ``agent`` (default: the
        agent that ran this one), which may have other policies, feedback, budget,
        interventions or model. It records this run as its parent.

        Returns the new run once it has ended, in a script, a notebook cell and async code
        alike (as ``agent.run_sync`` does); ``wait=False`` returns it live at once (as
        ``agent.start`` does), and needs a running event loop. ``gr.fork(run_id, turn)`` is
        the same for a stored run known by its id."""
        if _forker is None:
            raise RunError("forking needs the package: import gr_notebook first")
        return _forker(self, turn, agent, workspace=workspace, wait=wait)

    # -- kernel hygiene -------------------------------------------------------------------------

    @property
    def conversation_released(self) -> bool:
        return self._released

    def release_conversation(self) -> None:
        """Free the finished run's in-memory conversation (a long-lived kernel holds many
        runs); events, the store and the workspace keep everything else."""
        if not self.done:
            raise RunError(f"cannot release run {self.run_id}: it is still {self.status}")
        if self._released or self._loop is None:
            return
        state = self._loop.state
        messages = len(state.context.messages)
        state.context.release()
        self._released = True
        state.emit(ConversationReleasedEvent(messages=messages))

    # -- guardrail state ------------------------------------------------------------------------

    def guardrail_state(self) -> dict[str, Any]:
        """All guardrail state (policy memories, trigger cadences, the refusal streak) as
        JSON-serialisable data, for :meth:`restore_guardrail_state`. A snapshot is the whole
        run's state (``RunState.snapshot``, what a checkpoint keeps); this is one part of it."""
        return self._controls("read guardrail state").state.guards.snapshot()

    def restore_guardrail_state(self, state: Mapping[str, Any]) -> None:
        """Bring back guardrail state from :meth:`guardrail_state`; refused whole if it does
        not fit this agent's guardrails."""
        self._controls("restore guardrail state").state.guards.restore(state)

    @property
    def approvals(self) -> ApprovalDesk:
        """The tool calls waiting for a person: ``run.approvals.approve()``, ``.deny(reason)``,
        ``.edit(input)``, ``.pending``; the dashboard answers here too. It is there from
        ``agent.on_run`` on, before the first call can ask."""
        loop = self._loop
        if loop is None:
            raise RunError(
                f"run {self.run_id} was read from its store: nothing of it waits for approval"
            )
        return loop.state.approvals.desk

    def policy_state(self, name: str) -> PolicyState:
        """What the policy called ``name`` remembers in this run."""
        return self._controls("read policy state").state.guards.policy_state(name)

    def _controls(self, action: str) -> Controls:
        """The live run's controls; a run read back from its store has none."""
        if self._loop is None:
            raise RunError(
                f"cannot {action}: run {self.run_id} was read from its store, which keeps "
                "guardrail state only in its checkpoints; fork it to go on from one"
            )
        return self._loop

    def _live_loop(self, action: str) -> Controls:
        refusal = self.loop_control_refusal(action)
        if refusal is not None:
            raise refusal
        if self.done:
            again = "fork it: run.fork(turn, agent)" if self._recorded else "start a new run"
            raise RunError(
                f"cannot {action}: run {self.run_id} has finished ({self.status}); {again}"
            )
        return self._controls(action)

    def loop_control_refusal(self, action: str) -> RunError | None:
        """None if ``action`` (pause, rewind, fork, a todo edit) can act on this run, else the
        error that refuses it: a session of another harness never runs gr's loop, so such a
        request would wait forever. The dashboard shows the same words."""
        if self.harness.phased:
            return None
        instead = (
            "start a new run"
            if self.done
            else "stop it instead (it ends at its next tool call or reply)"
        )
        return RunError(
            f"cannot {action}: run {self.run_id} is {self.harness.label}, which runs outside "
            f"gr's loop; {instead}"
        )

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Deliver every new event to ``callback``; returns a function that unsubscribes."""
        return self._events.subscribe(callback)

    def subscribe_stream(self, callback: Callable[[ModelDelta], object]) -> Callable[[], None]:
        """Deliver the model's turns as they stream, piece by piece (a ``ModelDelta``: text,
        thinking, a tool's name), to ``callback``; returns a function that unsubscribes.
        Only a streaming model sends them, and they are not events: the finished turn is
        the ``model_call`` event. A finished run sends nothing more."""
        if self.done or self._loop is None:
            return _nothing
        return self._loop.state.deltas.subscribe(callback)

    # -- analysis -------------------------------------------------------------------------------

    def events_df(self) -> pd.DataFrame:
        from gr_notebook.history.analysis import events_df

        return events_df(self._events)

    def turns_df(self) -> pd.DataFrame:
        from gr_notebook.history.analysis import turns_df

        return turns_df(self._events)

    def phases_df(self) -> pd.DataFrame:
        from gr_notebook.history.analysis import phases_df

        return phases_df(self._events)

    def tool_calls_df(self) -> pd.DataFrame:
        from gr_notebook.history.analysis import tool_calls_df

        return tool_calls_df(self._events)

    def policy_df(self) -> pd.DataFrame:
        """One row per tool call a policy governed: allowed, or denied with the reason (and
        the ``traceback`` of a policy that raised while checking)."""
        from gr_notebook.history.analysis import policy_df

        return policy_df(self._events)

    def approvals_df(self) -> pd.DataFrame:
        """One row per question a person was asked about a tool call, with the answer, who
        gave it and the seconds the call waited."""
        from gr_notebook.history.analysis import approvals_df

        return approvals_df(self._events)

    def feedback_df(self) -> pd.DataFrame:
        from gr_notebook.history.analysis import feedback_df

        return feedback_df(self._events)

    def thinking_df(self) -> pd.DataFrame:
        """One row per reply in which the model thought (Claude's extended thinking)."""
        from gr_notebook.history.analysis import thinking_df

        return thinking_df(self._events)

    def guidance_df(self) -> pd.DataFrame:
        """One row per order the system gave the model: the turn, its source, the action it
        names, its text, and the phase, tasks left and limits used when it was given."""
        from gr_notebook.history.analysis import guidance_df

        return guidance_df(self._events)

    def completion_df(self) -> pd.DataFrame:
        """One row per attempt to stop: complete, refused with feedback, or bypassed."""
        from gr_notebook.history.analysis import completion_df

        return completion_df(self._events)

    def interventions_df(self) -> pd.DataFrame:
        """One row per intervention check: fired (with its tier) or skipped (with the
        safeguard that held it off)."""
        from gr_notebook.history.analysis import interventions_df

        return interventions_df(self._events)

    def label(
        self,
        seq: int,
        label: bool | None = None,
        *,
        right: bool | None = None,
        kind: str = "",
        who: str | None = None,
        note: str | None = None,
        settles: bool = False,
    ) -> Label:
        """Keep in the run's store what the right verdict was at event ``seq``: ``label``
        True says a guardrail should have acted there (of ``kind`` only, when given), False
        that it should not; ``right=True`` or ``False`` marks a recorded decision (a shadow
        one, as the dashboard shows it) right or wrong instead. ``who`` defaults to the login
        name; ``settles=True`` settles a disagreement. Returns the label kept;
        ``gr.backtest`` reads it."""
        from gr_notebook.history.labels import (
            KINDS,
            Label,
            decision_points,
            default_who,
            label_decision,
            save_labels,
        )

        if self._store is None:
            raise RunError(
                f"run {self.run_id} keeps no store, so it keeps no labels: give its agent "
                "store= (or label it with a DataFrame passed to gr.backtest(labels=...))"
            )
        if (label is None) == (right is None):
            raise RunError("run.label takes label=True/False for a point, or right= for a decision")
        if kind and kind not in KINDS:
            raise RunError(f"kind is {kind!r}; a label's kind is one of {', '.join(KINDS)}")
        events = list(self._events)
        points = decision_points(events)
        if seq not in points:
            raise RunError(
                f"event {seq} of run {self.run_id} is not a point a guardrail decides at (a "
                "tool call, an attempt to stop) nor a decision on one: give the seq that "
                "run.events_df() or run.policy_df() shows for it"
            )
        if right is not None:
            event = next(e for e in events if e.seq == seq)
            kept = label_decision(
                as_typed(event), right=right, who=who, note=note, run_id=self.run_id
            )
        else:
            if not isinstance(label, bool):
                raise RunError(f"label is {label!r}, not True or False")
            kept = Label(
                self.run_id, seq, label, kind or points[seq][1], who or default_who(), note
            )
        if settles:
            kept = replace(kept, settles=True)
        save_labels(self._store, [kept])
        return kept

    def shadow_df(self) -> pd.DataFrame:
        """One row per shadow guardrail decision that differs from what happened live: a
        call a shadow policy would deny, feedback it would give, a stop it would refuse, an
        intervention it would make (``gr.Agent(shadow=[...])``)."""
        from gr_notebook.history.analysis import shadow_df

        return shadow_df(self._events)

    def summary(self) -> dict[str, Any]:
        """Headline figures, kept as running totals so a live widget can ask every event."""
        totals = self._totals
        return {
            "run_id": self.run_id,
            "status": self.status,
            "turns": totals.turns,
            "phases_completed": totals.phases_completed,
            "input_tokens": totals.input_tokens,
            "output_tokens": totals.output_tokens,
            "tokens_used": totals.tokens_used,
            "tokens_budget": totals.tokens_budget or self.limits.token_budget,
            "iterations_max": totals.iterations_max or self.limits.max_iterations,
            "budget_scope": totals.budget_scope,
            "budget_tokens_used": totals.budget_tokens_used,
            "budget_iterations_used": totals.budget_iterations_used,
            "cost_usd": totals.cost_usd,
            "context_tokens": totals.context_tokens,
            "workspace": str(self.workspace.root),
        }

    # -- display --------------------------------------------------------------------------------

    def __repr__(self) -> str:
        s = self.summary()
        head = f"<Run {self.run_id} {self.status}"
        if self.reason and self.status != "completed":
            head += f" ({self.reason})"
        job = self.job
        if not self.harness.phased:  # no phases, no todo list: a session of another harness
            turns = s["turns"]
            done = ", job complete" if job is not None else ""
            return f"{head}: {plural(turns, 'turn')} in {self.harness.label}{done}>"
        if job is not None:
            where = "job complete" + (
                f", confidence {job.confidence:.2f}" if job.confidence is not None else ""
            )
        else:
            todos = self.todos
            where = f"{todos.phase_label()!r} {todos.done_count}/{len(todos.items)} tasks"
        turns, phases = s["turns"], s["phases_completed"]
        return f"{head}: {plural(turns, 'turn')}, {plural(phases, 'phase')} complete, {where}>"

    def _repr_html_(self) -> str | None:
        return to_html(self)

    def _ipython_display_(self) -> None:
        """In a notebook: the run's card, which follows a live run and is static once it has
        ended (what a saved notebook keeps)."""
        notebook_display(self)

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write this run as one HTML file that opens anywhere, with no server or install:
        its settings, timeline, and every turn with each guardrail's decision (live and
        shadow). Returns the path. ``gr_notebook.share.export_html`` takes several runs."""
        return self._share().export_html(self, path)

    def view(self, *, height: int = 760) -> object:
        """The page :meth:`to_html` writes, shown in a cell's output (a notebook's nbconvert
        HTML keeps it)."""
        return self._share().view(self, height=height)

    @staticmethod
    def _share() -> Sharer:
        if _sharer is None:
            raise RunError("import gr_notebook to share a run")
        return _sharer

    @property
    def store(self) -> Store | None:
        """The store that keeps this run's record and checkpoints (a fork's starting point),
        or ``None``."""
        return self._store

    # -- wiring (used by the runner, gr_notebook.runner) ---------------------------------

    def attach(
        self,
        task: asyncio.Task[Run] | None,
        *,
        agent: object = None,
        store: Store | None = None,
    ) -> None:
        """The task that runs it, the agent that defined it, and the store that keeps its
        record: the runner calls this once, as the run starts."""
        global _latest
        self._task = task
        self._agent, self._store = agent, store
        _latest = self

    def settle(self, outcome: LoopOutcome) -> None:
        """How the run ended (its status, reason and error): the runner calls this once, as
        the run finishes."""
        self.outcome, self.reason, self.error = outcome, outcome.reason, outcome.error


class _Totals:
    __slots__ = (
        "budget_iterations_used",
        "budget_scope",
        "budget_tokens_used",
        "context_tokens",
        "cost_usd",
        "input_tokens",
        "iterations_max",
        "output_tokens",
        "phases_completed",
        "tokens_budget",
        "tokens_used",
        "turns",
    )

    def __init__(self) -> None:
        self.turns = self.input_tokens = self.output_tokens = self.phases_completed = 0
        self.context_tokens = self.tokens_used = 0
        self.tokens_budget: int | None = None
        self.iterations_max: int | None = None
        """What the latest turn measured against: the assessed budget once there is one."""
        self.budget_scope = "the run"
        self.budget_tokens_used = self.budget_iterations_used = 0
        """Used of that budget: an allotment counts from its assessment."""
        self.cost_usd: float | None = None
        """Only when every call had a price: a partial sum would understate the cost."""

    def add(self, event: Event) -> None:
        event = as_typed(event)
        if isinstance(event, ModelCallEvent):
            self.turns += 1
            self.input_tokens += event.input_tokens
            self.output_tokens += event.output_tokens
            self.context_tokens = event.context_tokens
            self.tokens_used = event.tokens_used
            self.tokens_budget = event.tokens_budget
            self.iterations_max = event.iterations_max
            self.budget_scope = event.budget_scope
            self.budget_tokens_used = event.budget_tokens_used
            self.budget_iterations_used = event.budget_iterations_used
            cost = event.cost_usd
            if self.turns == 1:
                self.cost_usd = cost
            elif self.cost_usd is not None:
                self.cost_usd = None if cost is None else self.cost_usd + cost
        elif isinstance(event, TaskAssessedEvent) and event.approved is True:
            # the new allotment counts from here, before the next call
            self.tokens_budget = event.token_budget
            self.iterations_max = event.max_iterations
            self.budget_scope = event.scope
            self.budget_tokens_used = self.budget_iterations_used = 0
        elif isinstance(event, PhaseTransitionEvent):
            self.phases_completed += event.todo_kind == "phase" and event.outcome == "complete"
