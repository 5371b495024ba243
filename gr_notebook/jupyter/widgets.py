"""Live widgets on stock ipywidgets: the run dashboard, the todo panel and the run card.

They subscribe to the run's events and redraw through a :class:`Throttle`, so the agent
loop never waits on rendering. The dashboard also follows the model's turn as it streams
(:mod:`~gr_notebook.display.live`), through a throttle of its own that redraws only that
panel. Every control has a method (``stop``, ``toggle_pause``,
``rewind``, ``fork``) that a click calls, so tests and scripts drive them without a browser.

Shown in a notebook, each is a widget while its run is live; when the run ends, its output
is replaced by the run as it ended, static HTML and text with no widget view, and a view of
a run that has already ended is static from the start (:mod:`~gr_notebook.jupyter.outputs`):
that is what a saved notebook, GitHub and nbviewer show. A finished run is forked from a
cell (``run.fork``, ``%agent fork``, whose picker is :class:`ForkPicker`). A fork made with a
click (the dashboard's Fork…, or the picker's) shows its own dashboard in the cell that was
clicked, live while it runs and static once it ends.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

import ipywidgets as w

from gr_notebook import runner
from gr_notebook.agent import Agent
from gr_notebook.blocking import loop_is_running
from gr_notebook.display.live import LiveTurn, render_live
from gr_notebook.display.render import (
    render_calls,
    render_dashboard,
    render_feedback,
    render_header,
    render_meters,
    render_plan,
    render_shadow,
    render_thinking,
    render_timeline,
    render_todos,
    text_dashboard,
)
from gr_notebook.display.reprs import run_card
from gr_notebook.display.state import DashboardState, RunTracker
from gr_notebook.display.throttle import DEFAULT_INTERVAL, Scheduler, Throttle, loop_scheduler
from gr_notebook.errors import GrNotebookError
from gr_notebook.events import Event, is_shadow
from gr_notebook.jupyter.approval import ApprovalView
from gr_notebook.jupyter.clicks import on_this_loop
from gr_notebook.jupyter.outputs import Cell, cell_now, display, show_run_view, show_static
from gr_notebook.models.call_context import ModelDelta
from gr_notebook.review.recorded import recorded_run
from gr_notebook.run import Run

if TYPE_CHECKING:
    from gr_notebook.history.store import StoreLike

__all__ = ["Dashboard", "ForkPicker", "RunCard", "TodoPanel", "show_run"]

LOG_LINES = 8
TODO_KINDS = frozenset(
    {"todos_written", "todo_completed", "phase_started", "rewind", "run_finished"}
)


class _Live:
    """A subscription to a run that redraws through a throttle and ends with the run; with
    ``on_delta``, a subscription to the model's stream too, ended with it."""

    def __init__(
        self,
        run: Run,
        render: Callable[[], None],
        *,
        wants: Callable[[Event], bool],
        interval: float,
        scheduler: Scheduler,
        on_error: Callable[[Exception], None] | None = None,
        on_delta: Callable[[ModelDelta], None] | None = None,
    ) -> None:
        self.throttle = Throttle(render, interval=interval, scheduler=scheduler, on_error=on_error)
        self._wants = wants
        self._unsubscribe: Callable[[], None] | None = None
        self._unstream: Callable[[], None] | None = None
        if not run.done:
            self._unsubscribe = run.subscribe(self._on_event)
            if on_delta is not None:
                self._unstream = run.subscribe_stream(on_delta)

    def _on_event(self, event: Event) -> None:
        wanted = self._wants(event)
        if event.kind == "run_finished":
            self.throttle.poke()
            self.throttle.flush()  # the final state shows before the cell (or task) ends
            self.close()
        elif wanted:
            self.throttle.poke()

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._unstream is not None:
            self._unstream()
            self._unstream = None


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


class _OnePerRun:
    """``for_run``: the one view of a kind that the magics show for a run, reused."""

    _by_run: ClassVar[weakref.WeakKeyDictionary[Run, Any]]
    _live: _Live
    run: Run

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._by_run = weakref.WeakKeyDictionary()

    @classmethod
    def for_run(cls, run: Run) -> Self:
        if not isinstance(run, Run):
            raise TypeError(
                f"{cls.__name__}.for_run takes a gr.Run, not {type(run).__name__}; open a "
                "recorded run with gr.Dashboard(run_id, store=...)"
            )
        view = cls._by_run.get(run)
        if view is None:
            view = cls._by_run[run] = cls(run)  # type: ignore[call-arg]
        return cast(Self, view)

    @property
    def renders(self) -> int:
        """Redraws so far: the throttle's count."""
        return self._live.throttle.renders

    def close(self) -> None:
        """Stop following the run and close the widget (and, for a box, its children)."""
        live, run = getattr(self, "_live", None), getattr(self, "run", None)
        if live is not None:  # absent when __init__ failed and ipywidgets' __del__ closes
            live.close()
        if run is not None and type(self)._by_run.get(run) is self:
            del type(self)._by_run[run]
        for child in getattr(self, "children", ()):
            _close_tree(child)
        super().close()  # type: ignore[misc]


class _RunHTML(_OnePerRun, w.HTML):  # type: ignore[misc]
    """One HTML view of a run, redrawn on the events it wants: live while the run is, its
    ``text/plain`` the view's text when it was shown, and static once the run has ended."""

    css_class: ClassVar[str]

    def __init__(
        self,
        run: Run,
        *,
        interval: float = DEFAULT_INTERVAL,
        scheduler: Scheduler = loop_scheduler,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.add_class(self.css_class)
        self._live = _Live(
            run, self.refresh, wants=self.wants, interval=interval, scheduler=scheduler
        )
        self.refresh()

    def wants(self, event: Event) -> bool:
        return True

    def _repr_html_(self) -> str:
        raise NotImplementedError

    def refresh(self) -> None:
        self.value = self._repr_html_()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.refresh()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        data.update(self.static_bundle())  # the view now (%todo answers "what is the list now")
        return data

    def static_bundle(self) -> dict[str, str]:
        """The view as it stands, with no widget: what it is once its run has ended."""
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        show_run_view(self.run, self._repr_mimebundle_, self.static_bundle)


class TodoPanel(_RunHTML):
    """Layer 2 of a run, live. ``%todo`` shows the one panel of its run, not a new one."""

    css_class = "gr-todo-panel"

    def wants(self, event: Event) -> bool:
        return event.kind in TODO_KINDS

    def __repr__(self) -> str:
        return self.run.todos.render()

    def _repr_html_(self) -> str:
        return render_todos(self.run.todos)


class RunCard(_RunHTML):
    """A run in one line, live: how a live ``gr.Run`` shows as a cell's result (its status,
    turns, phases and tokens follow the run, and its output is static once the run ends)."""

    css_class = "gr-run-card"

    def __repr__(self) -> str:
        return repr(self.run)

    def _repr_html_(self) -> str:
        return run_card(self.run)


class Dashboard(_OnePerRun, w.VBox):  # type: ignore[misc]
    """Everything about one run, live: todo layer, plan, meters, feedback, timeline, controls.

    A session of another harness (``run.harness`` not phased, e.g. the Claude Agent SDK's)
    has no todo list, plan or loop to pause, rewind or fork: its dashboard shows its tool
    calls, meters, feedback and timeline, and the Stop button, which its hooks honour.

    ``Dashboard(run_id, store=...)`` opens a run recorded in a store (default
    ``gr_runs/store.sqlite``), in this kernel or a new one: read-only, as it ended, and
    ``fork(turn, agent)`` plays it again from a turn (``dashboard.run`` is the recorded run)."""

    def __init__(
        self,
        run: Run | str,
        *,
        store: StoreLike | None = None,
        interval: float = DEFAULT_INTERVAL,
        scheduler: Scheduler = loop_scheduler,
        **kwargs: Any,
    ) -> None:
        if isinstance(run, str):  # a recorded run, read back from its store
            run = recorded_run(run, store)
        elif not isinstance(run, Run):
            raise TypeError(
                f"Dashboard(run) takes a gr.Run or a run id (with store=), not {type(run).__name__}"
            )
        elif store is not None:
            raise TypeError("store= is where a run id is looked up; a gr.Run brings its own")
        self.run = run
        self.tracker = RunTracker()
        for event in run.events:
            self.tracker.add(event)
        self.phased = run.harness.phased
        self.header = w.HTML()
        self.todos: TodoPanel | None = None
        self.calls: w.HTML | None = None
        """The session's latest tool calls, where a run of gr's loop shows its todo layer."""
        main: w.DOMWidget
        if self.phased:
            self.todos = main = TodoPanel.for_run(run)
        else:
            self.calls = main = w.HTML()
        main.layout = w.Layout(flex="1 1 480px", min_width="0")  # narrow: it wraps, not overflows
        self.plan = w.HTML()
        self.meters = w.HTML()
        self.feedback = w.HTML()
        self._shadow_panel: w.HTML | None = None
        self._thinking: w.HTML | None = None
        self._live_panel: w.HTML | None = None
        self.timeline = w.HTML()
        self.live_turn = LiveTurn()
        self.log_panel = w.HTML()
        self.prompts = w.VBox()
        """Questions for the person, e.g. a :class:`WidgetConfirmer`'s, next to the controls."""
        self.approvals = _approval_view(run, self.show_prompt)
        """The tool calls waiting for the person's Approve, Deny or Edit."""
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="danger")
        self.pause_button = w.Button(description="Pause", icon="pause")
        self.issue = w.Text(placeholder="What is wrong? Type it, then press Rewind")
        self.issue.layout = w.Layout(flex="1 1 auto")
        self.rewind_button = w.Button(description="Rewind", icon="undo", button_style="warning")
        self.fork_open = w.Button(description="Fork…", icon="code-branch")
        """Shows the fork controls: built on first use, as most dashboards never fork."""
        self.fork_open.on_click(on_this_loop(self._fork_controls))
        self._fork: _ForkControls | None = None
        self.on_fork: Callable[[Run], object] | None = None
        """Called with the new run after a fork (the default binds it to ``fork``)."""
        self.shown_in: Cell | None = None
        """The cell the dashboard was last shown in: where a fork clicked here shows its own."""
        self.stop_button.on_click(on_this_loop(self.stop))
        self.pause_button.on_click(on_this_loop(self.toggle_pause))
        self.rewind_button.on_click(on_this_loop(self.rewind))
        self._log: deque[str] = deque(maxlen=LOG_LINES)
        side = w.VBox(
            [self.plan, self.meters] if self.phased else [self.meters],
            layout=w.Layout(flex="1 1 260px"),
        )
        controls = self._controls = w.HBox(
            [self.stop_button, self.pause_button, self.issue, self.rewind_button, self.fork_open]
            if self.phased
            else [self.stop_button]
        )
        controls.layout.flex_flow = "row wrap"  # room for the fork row when it opens
        controls.add_class("gr-controls")
        super().__init__(
            [
                self.header,
                w.HBox([main, side], layout=w.Layout(flex_flow="row wrap")),
                self.feedback,  # then the thinking, live and shadow panels, when there is any
                self.timeline,
                self.prompts,
                controls,
                self.log_panel,
            ],
            **kwargs,
        )
        self.add_class("gr-dashboard")
        on_error = self._redraw_failed
        self._stream_throttle = Throttle(
            self._draw_live, interval=interval, scheduler=scheduler, on_error=on_error
        )
        self._live = _Live(
            run,
            self.refresh,
            wants=self._take,
            interval=interval,
            scheduler=scheduler,
            on_error=on_error,
            on_delta=self._on_delta,
        )
        self.refresh()

    # -- state and drawing ------------------------------------------------------------------

    def state(self) -> DashboardState:
        return self.tracker.snapshot(self.run)

    def _take(self, event: Event) -> bool:
        if event.kind in ("model_call", "run_finished"):
            self.live_turn.clear()  # the finished turn shows as every other does
        if event.kind == "run_finished" and self.approvals is not None:
            self.approvals.close()
        shown = self.tracker.add(event) and not is_shadow(event)  # shadows have their panel
        if shown and event.kind in ("error", "run_finished"):
            self.add_log(f"turn {event.turn}: {self.tracker.timeline[-1].text}")
        return True  # every event moves a meter or a list

    def _on_delta(self, delta: ModelDelta) -> None:
        if self.live_turn.add(delta):
            self._stream_throttle.poke()

    def _draw_live(self) -> None:
        view = self.live_turn.view()
        if view or self._live_panel is not None:
            self.live.value = render_live(view)

    @property
    def thinking(self) -> w.HTML:
        """The model's latest finished thinking, collapsed: built when the model first
        thinks (each panel costs a widget, and most runs on a dashboard never think)."""
        if self._thinking is None:
            self._thinking = w.HTML(render_thinking(self.state().thinking))
            self._insert_after(self.feedback, self._thinking)
        return self._thinking

    @property
    def live(self) -> w.HTML:
        """The model's turn as it streams, empty between turns: built at the first delta."""
        if self._live_panel is None:
            self._live_panel = w.HTML(render_live(self.live_turn.view()))
            self._insert_after(self._thinking or self.feedback, self._live_panel)
        return self._live_panel

    @property
    def shadow(self) -> w.HTML:
        """What the shadow guardrails would have done, in grey, just above the timeline:
        built at their first decision worth a line (most runs have no shadows)."""
        if self._shadow_panel is None:
            self._shadow_panel = w.HTML(render_shadow(self.state().shadow))
            children = list(getattr(self, "children"))  # noqa: B009 (the trait is untyped)
            children.insert(children.index(self.timeline), self._shadow_panel)
            self.children = tuple(children)
            self._insert_after(self._shadow_panel, self._shadow_marks())
        return self._shadow_panel

    def _shadow_marks(self) -> w.HBox:
        """One click says whether a shadow decision was right: a label in the run's store
        that ``gr.backtest`` reads (``run.label(seq, right=...)``, which a cell may call)."""
        self.shadow_choice = w.Dropdown(description="Decision", layout=w.Layout(width="60%"))
        right = w.Button(description="Right", icon="check", tooltip="it should have acted")
        wrong = w.Button(description="Wrong", icon="times", tooltip="it should not have")
        right.on_click(on_this_loop(lambda: self._mark_chosen(True)))
        wrong.on_click(on_this_loop(lambda: self._mark_chosen(False)))
        return w.HBox([self.shadow_choice, right, wrong])

    def _mark_chosen(self, right: bool) -> None:
        if self.shadow_choice.value is not None:
            self.mark_shadow(int(self.shadow_choice.value), right=right)

    def mark_shadow(self, seq: int, *, right: bool) -> None:
        """Label the shadow decision at event ``seq`` right or wrong; what went wrong (a run
        that keeps no store, an event that is no decision) is a line in the log."""
        try:
            self.run.label(seq, right=right)
        except GrNotebookError as exc:
            self.add_log(f"Not labelled: {exc}")
            return
        self.add_log(f"event {seq}: the shadow decision marked {'right' if right else 'wrong'}")

    def _insert_after(self, panel: w.Widget, new: w.Widget) -> None:
        children = list(getattr(self, "children"))  # noqa: B009 (the trait is untyped)
        children.insert(children.index(panel) + 1, new)
        self.children = tuple(children)

    @property
    def live_renders(self) -> int:
        """Redraws of the live panel alone: its throttle's count."""
        return self._stream_throttle.renders

    def _redraw_failed(self, exc: Exception) -> None:
        self.add_log(f"Redraw failed: {type(exc).__name__}: {exc}")

    def refresh(self) -> None:
        state = self.state()
        self.header.value = render_header(state)
        if self.calls is not None:
            self.calls.value = render_calls(state.calls, state.calls_total)
        else:
            self.plan.value = render_plan(state.plan)
        self.meters.value = render_meters(state.meters)
        self.feedback.value = render_feedback(state.feedback, state.feedback_total)
        if state.shadow or self._shadow_panel is not None:
            self.shadow.value = render_shadow(state.shadow, state.shadow_total)
            self.shadow_choice.options = [
                (f"turn {e.turn}: {e.text}"[:120], e.seq) for e in state.shadow
            ]
        if state.thinking or self._thinking is not None:
            self.thinking.value = render_thinking(state.thinking)
        self.timeline.value = render_timeline(
            state.timeline, state.timeline_total, state.timeline_earlier
        )
        self._draw_live()
        live = not self.run.done  # the todo panel redraws itself, through its own throttle
        for control in (self.stop_button, self.pause_button, self.issue, self.rewind_button):
            control.disabled = not live
        self.pause_button.disabled = state.status not in ("running", "pausing", "paused")
        paused = state.status in ("paused", "pausing")
        self.pause_button.description = "Unpause" if paused else "Pause"
        self.pause_button.icon = "play" if paused else "pause"
        self._refresh_fork(state)

    def _refresh_fork(self, state: DashboardState) -> None:
        """The turns on the timeline worth forking at (newest first, the newest picked) and
        the agents it may run under."""
        turns = _fork_turns(state)
        self.fork_open.disabled = not turns
        if self._fork is None:
            return
        _set_options(self._fork.turn, turns, turns[0][1] if turns else None)
        agents = _agent_options(self.run)
        _set_options(self._fork.agent, agents, agents[0][1] if agents else None)
        self._fork.button.disabled = not turns or not agents

    def _fork_controls(self) -> _ForkControls:
        if self._fork is None:
            self._fork = _ForkControls(self._fork_clicked)
            # The row takes the button's place at the end of the controls.
            self._controls.children = (*self._controls.children[:-1], *self._fork.row)
            self._refresh_fork(self.state())
        elif self.run.done:  # no event redraws it now, and the notebook's agents change
            self._refresh_fork(self.state())
        return self._fork

    @property
    def fork_turn(self) -> w.Dropdown:
        """Pick a turn from the timeline; the fork plays it again."""
        return self._fork_controls().turn

    @property
    def fork_agent(self) -> w.Dropdown:
        """Which agent the fork runs under: the run's own, or a gr.Agent of the notebook."""
        return self._fork_controls().agent

    @property
    def fork_button(self) -> w.Button:
        return self._fork_controls().button

    def close(self) -> None:
        view: ApprovalView | None = getattr(self, "approvals", None)
        if view is not None:
            view.close()  # a closed dashboard no longer attends the desk
        super().close()

    def add_log(self, message: str) -> None:
        """A line in the dashboard's log: where a background run's messages go, not stdout."""
        self._log.append(message)
        lines = "".join(f"<div>{escape(line)}</div>" for line in self._log)
        self.log_panel.value = (
            f"<div class='gr-log' style='font-size:11px;color:#616161'>{lines}</div>"
        )

    def show_prompt(self, prompt: w.Widget) -> None:
        """Put a question in the dashboard: it shows in the run's own cell, also for a
        background run whose output would otherwise land in whichever cell runs next."""
        self.prompts.children = (*self.prompts.children, prompt)

    # -- controls -----------------------------------------------------------------------------

    def stop(self) -> None:
        if self.run.done:
            self.add_log(f"Run {self.run.run_id} has already finished ({self.run.status}).")
            return
        self.run.cancel("stopped by the person")
        self.add_log("Stop requested.")
        self.refresh()

    def toggle_pause(self) -> None:
        if not self._loop_controls("pause"):
            return
        try:
            if self.run.status in ("paused", "pausing"):
                self.run.unpause()
                self.add_log("Unpaused.")
            else:
                self.run.pause()
                self.add_log("Pause requested: the run holds at the next safe point between turns.")
        except GrNotebookError as exc:
            self.add_log(str(exc))
        self.refresh()

    def rewind(self, issue: str | None = None) -> None:
        if not self._loop_controls("rewind"):
            return
        text = (self.issue.value if issue is None else issue).strip()
        if not text:
            self.add_log("Type what is wrong in the box first, then press Rewind.")
            return
        try:
            self.run.rewind(text)
        except GrNotebookError as exc:
            self.add_log(str(exc))
            return
        self.issue.value = ""
        self.add_log(f"Rewind requested: {text}")

    def fork(self, turn: int | None = None, agent: Agent | None = None) -> Run | None:
        """Fork the run at ``turn`` (the picked one) under ``agent`` (the picked one; the
        run's own by default): the new run goes on in the background, and its dashboard
        shows in the cell running now (the Fork button shows it under this dashboard)."""
        return self._fork_run(turn, agent, cell=None)

    def _fork_clicked(self) -> None:
        self._fork_run(None, None, cell=self.shown_in)

    def _fork_run(self, turn: int | None, agent: Agent | None, *, cell: Cell | None) -> Run | None:
        if not self._loop_controls("fork"):
            return None
        turn = self.fork_turn.value if turn is None else turn
        if turn is None:
            self.add_log("Pick a turn on the timeline first, then press Fork.")
            return None
        if agent is None and self.fork_agent.value:
            agent = _notebook_agents().get(self.fork_agent.value)
        if agent is None and runner.started_by.get(self.run.run_id) is None:
            self.add_log(
                f"Run {self.run.run_id} was started by an agent this kernel does not have: "
                "build one in a cell (gr.Agent(...)) and pick it under 'under'."
            )
            return None
        try:
            forked = self.run.fork(turn, agent, wait=not loop_is_running())
        except GrNotebookError as exc:
            self.add_log(str(exc))
            return None
        (self.on_fork or _bind_fork)(forked)
        self.add_log(f"Forked at turn {turn} as run {forked.run_id}: `fork` in the notebook.")
        _show_fork(forked, cell)
        return forked

    def _loop_controls(self, action: str) -> bool:
        """Pause, rewind and fork act on gr's loop; another harness's session has none, and
        the run refuses them in the words ``run.pause()`` and ``%agent pause`` use."""
        refusal = self.run.loop_control_refusal(action)
        if refusal is None:
            return True
        self.add_log(str(refusal))
        return False

    # -- display ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return text_dashboard(self.state())

    def _repr_html_(self) -> str:
        return render_dashboard(self.state())

    def static_bundle(self) -> dict[str, str]:
        """The dashboard as it stands, with no widget: what a finished run's dashboard is."""
        state = self.state()
        return {"text/html": render_dashboard(state), "text/plain": text_dashboard(state)}

    def _ipython_display_(self) -> None:
        self.show_in(None)

    def show_in(self, cell: Cell | None) -> None:
        """Show the dashboard in ``cell`` (None: the cell running now), live while its run
        is; a fork clicked here shows its dashboard there too."""
        self.shown_in = cell or cell_now()
        show_run_view(self.run, self._repr_mimebundle_, self.static_bundle, cell=cell)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.refresh()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        state = self.state()
        if state.settled:
            data["text/plain"] = text_dashboard(state)
            data["text/html"] = render_dashboard(state)
        else:  # a snapshot now would be stale forever in the saved notebook
            data["text/plain"] = f"Dashboard of run {self.run.run_id} (a live widget)"
            data["text/html"] = f"<div class='gr-dashboard'>{escape(data['text/plain'])}</div>"
        return data


def show_run(run: object) -> None:
    """A ``gr.Run`` in a cell's output: its card, live while the run is."""
    if not isinstance(run, Run):
        raise TypeError(f"show_run takes a gr.Run, not {type(run).__name__}")
    if run.done:
        show_static({"text/html": run_card(run), "text/plain": repr(run)})
    else:
        display(RunCard.for_run(run))


class ForkPicker(w.VBox):  # type: ignore[misc]
    """Fork… for a run in a cell of its own (``%agent fork`` with no ``--turn``): a turn
    from its timeline, an agent of the notebook, and the button; the new run is bound to
    ``out`` and goes on in the background. The dashboard of a finished run is static, so
    this is where a person clicks to fork it."""

    def __init__(self, run: Run, *, out: str = "fork") -> None:
        refusal = run.loop_control_refusal("fork")
        if refusal is not None:
            raise refusal
        self.run, self.out = run, out
        self.shown_in: Cell | None = None
        """The cell the picker was shown in: where the fork's dashboard shows."""
        tracker = RunTracker()
        for event in run.events:
            tracker.add(event)
        self._controls = _ForkControls(self.fork)
        turns = _fork_turns(tracker.snapshot(run))
        agents = _agent_options(run)
        _set_options(self._controls.turn, turns, turns[0][1] if turns else None)
        _set_options(self._controls.agent, agents, agents[0][1] if agents else None)
        self._controls.button.disabled = not turns or not agents
        self.message = w.HTML()
        row = w.HBox(list(self._controls.row))
        row.layout.flex_flow = "row wrap"
        super().__init__([row, self.message])
        self.add_class("gr-fork-picker")
        if not turns:
            self._say(f"Run {run.run_id} has no turn on its timeline to fork at.")
        elif not agents:
            self._say(
                f"Run {run.run_id} was started by an agent this kernel does not have: build "
                "one in a cell (gr.Agent(...)), then run this cell again."
            )

    @property
    def turn(self) -> w.Dropdown:
        return self._controls.turn

    @property
    def agent(self) -> w.Dropdown:
        return self._controls.agent

    @property
    def button(self) -> w.Button:
        return self._controls.button

    def fork(self) -> Run | None:
        """Fork at the picked turn under the picked agent; the new run goes on in the
        background, bound to ``out``, and its dashboard shows under the picker."""
        turn, name = self.turn.value, self.agent.value
        if turn is None:
            self._say("Pick a turn first, then press Fork.")
            return None
        agent = _notebook_agents().get(name) if name else None
        try:
            forked = self.run.fork(turn, agent, wait=not loop_is_running())
        except GrNotebookError as exc:
            self._say(str(exc))
            return None
        _bind_fork(forked, self.out)
        self._say(f"Forked at turn {turn} as run {forked.run_id}: `{self.out}` in the notebook.")
        _show_fork(forked, self.shown_in)
        return forked

    def _say(self, text: str) -> None:
        self.message.value = f"<div style='font-size:12px;color:#616161'>{escape(text)}</div>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.shown_in = cell_now()  # displayed now, in this cell
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        return data

    def __repr__(self) -> str:
        return f"Fork… run {self.run.run_id} (a live widget)"


def _fork_turns(state: DashboardState) -> list[tuple[str, int]]:
    """The turns on the timeline worth forking at, newest first, each named by its latest
    line. A muted line (a check that held off) names no turn: nothing happened there."""
    turns: dict[int, str] = {}
    for entry in state.timeline:  # newest first: the latest line of each turn names it
        if entry.turn >= 1 and entry.tone != "muted":
            turns.setdefault(entry.turn, f"turn {entry.turn}: {entry.text}"[:80])
    return [(turns[turn], turn) for turn in sorted(turns, reverse=True)]


def _agent_options(run: Run) -> list[tuple[str, str]]:
    """The agents a fork of ``run`` may run under: its own, when this process has it (a
    recorded run's may be gone), and the gr.Agent variables of the notebook."""
    same = [("the same agent", "")] if runner.started_by.get(run.run_id) is not None else []
    return [*same, *((name, name) for name in _notebook_agents())]


def _approval_view(run: Run, show: Callable[[w.Widget], None]) -> ApprovalView | None:
    """The dashboard answers the run's approvals where its clicks reach the run: on the
    kernel's own thread. A blocking cell's dashboard lives on a worker thread whose clicks
    arrive only after the cell, so there the agent's ``confirm=`` (or nobody) answers."""
    if run.done or threading.current_thread() is not threading.main_thread():
        return None
    try:
        desk = run.approvals
    except GrNotebookError:
        return None
    return ApprovalView(desk, show)


class _ForkControls:
    """The fork row: a turn, an agent, and the button."""

    def __init__(self, fork: Callable[[], object]) -> None:
        # The labels are the dropdowns' descriptions, as wide as their words: a Label of its
        # own took a fixed width and cut "Fork at" short.
        wide = {"description_width": "initial"}
        self.turn = w.Dropdown(
            options=[], description="Fork at", style=wide, layout=w.Layout(flex="1 1 auto")
        )
        self.agent = w.Dropdown(
            options=[("the same agent", "")],
            description="under",
            style=wide,
            layout=w.Layout(width="auto"),
        )
        self.button = w.Button(description="Fork", icon="code-branch")
        self.button.on_click(on_this_loop(fork))
        self.row = (self.turn, self.agent, self.button)


def _set_options(dropdown: w.Dropdown, options: list[tuple[str, Any]], fallback: Any) -> None:
    """New ``(label, value)`` options, keeping the choice while it is still one of them."""
    if options != list(dropdown.options):
        chosen = dropdown.value
        dropdown.options = options
        dropdown.value = chosen if chosen in dict(options).values() else fallback


def _notebook_agents() -> dict[str, Agent]:
    """The gr.Agent variables of the notebook, by name (none outside IPython)."""
    from IPython import get_ipython

    shell = get_ipython()
    names = getattr(shell, "user_ns", {}) if shell is not None else {}
    return {
        name: value
        for name, value in names.items()
        if isinstance(value, Agent) and not name.startswith("_")
    }


def _show_fork(run: Run, cell: Cell | None) -> None:
    """A new fork's dashboard, in ``cell`` (None: the cell running now); nothing outside
    IPython, where there is no cell to show it in."""
    from IPython import get_ipython

    if get_ipython() is not None:
        Dashboard.for_run(run).show_in(cell)


def _bind_fork(run: Run, name: str = "fork") -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.user_ns[name] = run
