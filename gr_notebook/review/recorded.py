"""A run recorded in a store, read back as a read-only ``gr.Run``: what a new kernel opens to
see a run's dashboard (``gr.Dashboard(run_id, store=...)``), read its DataFrames or fork it.

Its events, job and ending come from the store. Its todo list is the last one its events
wrote, with the tasks they ticked since; its plan is the plan file in its workspace, read
as a live run reads it. Nothing of it runs here: pause, rewind and todo edits are refused,
and a fork (``run.fork(turn, agent)``) starts from its checkpoints as any fork does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast, get_args

from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.errors import RunError, WorkspaceError
from gr_notebook.events import (
    Event,
    EventLog,
    JobCompleteEvent,
    PhaseStartedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    as_typed,
)
from gr_notebook.guardrails.completion import PLAN_FILE
from gr_notebook.harness import CLAUDE_AGENT_SDK, GR_LOOP, LANGCHAIN
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, StoreLike
from gr_notebook.models.base import DEFAULT_CONTEXT_WINDOW
from gr_notebook.run import Limits, Run, RunStatus
from gr_notebook.workflow.phases import JobResult
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoItem, TodoKind, TodoList
from gr_notebook.workflow.workspace import Workspace
from gr_notebook.workflow.workspace_lock import live_owner

__all__ = ["recorded_run", "todos_after", "todos_from_events"]

_HARNESSES = {h.name: h for h in (GR_LOOP, CLAUDE_AGENT_SDK, LANGCHAIN)}


def recorded_run(run_id: str, store: StoreLike | None = None) -> Run:
    """The run ``run_id`` of ``store`` (a Store or its path; default gr_runs/store.sqlite)
    as it ended, read-only. A store opened here from a path stays open: a fork of the run
    records into it."""
    opened = store if isinstance(store, Store) else _open(store)
    row = next((r for r in opened.runs() if r["run_id"] == run_id), None)
    if row is None:
        known = ", ".join(opened.run_ids()[:5]) or "none"
        raise RunError(
            f"no run {run_id!r} in run store {opened.path}; its runs include: {known} "
            "(gr.runs_df(store) lists them)"
        )
    events = [as_typed(e) for e in opened.events(run_id)]
    root = Path(row["workspace"] or "")
    if not row["workspace"] or not root.is_dir():
        raise RunError(
            f"run {run_id}'s workspace {str(root)!r} is gone; its events are in the store: "
            "store.events(run_id), gr.runs_df(store)"
        )
    started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
    config: Mapping[str, Any] = started.config if started is not None else row["config"]
    log = EventLog(lambda: 0.0)
    log.load(events)
    workspace = Workspace(root)
    plan_file = str(config.get("plan_file") or PLAN_FILE)
    run = Run(
        run_id,
        workspace=workspace,
        events=log,
        phases=_Ended(todos_from_events(events), _job(events), workspace, plan_file),
        instructions=row["instructions"] or "",
        limits=_limits(config),
        harness=_HARNESSES.get(str(config.get("harness")), GR_LOOP),
    )
    run.read_back(_outcome(row, events), opened)
    return run


def todos_from_events(events: Sequence[Event]) -> TodoList:
    """The todo list the events leave: each list a ``todos_written`` wrote (a task a person
    added keeps what was ticked before it), with the tasks ``todo_completed`` ticked."""
    todos = TodoList()
    for event in events:
        todos = todos_after(todos, event)
    return todos


def todos_after(todos: TodoList, event: Event) -> TodoList:
    """The todo list after one event: what :func:`todos_from_events` folds, one step at a
    time for a reader that wants the list at every turn."""
    event = as_typed(event)
    if isinstance(event, TodosWrittenEvent):
        old = [item.title for item in todos.items]
        kept = todos.items if list(event.titles[: len(old)]) == old and old else ()
        items = (*kept, *(TodoItem(t) for t in event.titles[len(kept) :]))
        return TodoList(
            items=items,
            phase_number=event.phase_number,
            phase_total=todos.phase_total if kept else 0,
            phase_name=event.name,
            kind=cast(TodoKind, event.todo_kind if event.todo_kind in _KINDS else "phase"),
        )
    if isinstance(event, PhaseStartedEvent):
        return replace(todos, phase_total=event.total)
    if isinstance(event, TodoCompletedEvent) and 1 <= event.index <= len(todos.items):
        ticked = list(todos.items)
        ticked[event.index - 1] = TodoItem(ticked[event.index - 1].title, done=True)
        return replace(todos, items=tuple(ticked))
    return todos


_KINDS = ("bootstrap", "phase", "job_completion")


@dataclass(frozen=True)
class _Ended:
    """A recorded run's phases as it ended (``run.PhaseState``): nothing can change them."""

    todos: TodoList
    job: JobResult | None
    workspace: Workspace
    plan_file: str

    def plan(self) -> Plan | None:
        try:
            return Plan.parse(self.workspace.read_text(self.plan_file))
        except WorkspaceError:
            return None

    def add_todo(self, title: str, *, source: str = "person") -> str:
        raise RunError("a run read from its store keeps its todo list as it ended")

    def complete_todo(self, *, source: str = "model") -> str:
        raise RunError("a run read from its store keeps its todo list as it ended")


def _open(path: str | os.PathLike[str] | None) -> Store:
    where = Path(DEFAULT_STORE_PATH if path is None else path)
    if not where.exists():
        raise RunError(f"there is no run store at {where}; pass store= the one you used")
    return Store(where, create=False)


def _job(events: Sequence[Event]) -> JobResult | None:
    reported = [e for e in events if isinstance(e, JobCompleteEvent)]
    if not reported:
        return None
    last = reported[-1]
    return JobResult(
        last.summary, tuple(last.deliverables), last.confidence, last.notes, last.source
    )


def _limits(config: Mapping[str, Any]) -> Limits:
    cost = config.get("max_cost_usd")
    return Limits(
        max_iterations=int(config.get("max_iterations") or 0),
        context_window=DEFAULT_CONTEXT_WINDOW,  # a model's window is not recorded
        token_budget=config.get("max_tokens") or None,
        cost_limit_usd=float(cost) if cost is not None else None,
    )


def _outcome(row: Mapping[str, Any], events: Sequence[Event]) -> LoopOutcome:
    finished = next((e for e in reversed(events) if isinstance(e, RunFinishedEvent)), None)
    if finished is not None:
        return LoopOutcome(_status(finished.status), finished.reason, limit=finished.limit)
    if row["status"] == "running":  # never finished: live elsewhere, or its process died
        owner = live_owner(row["workspace"])
        if owner is not None and owner.run_id in ("", row["run_id"]):
            raise RunError(
                f"run {row['run_id']} is still running; its live gr.Run shows it "
                "(gr.Dashboard(run)) in the kernel that started it, or open it once it has ended"
            )
        return LoopOutcome("interrupted", "its process ended before the run did")
    return LoopOutcome(_status(row["status"]), row["error"])


def _status(text: str) -> RunStatus:
    """A stored ending in this version's words; a live word read back means its process died."""
    ended = [
        s for s in get_args(RunStatus) if s not in ("running", "pausing", "paused", "stopping")
    ]
    return cast(RunStatus, text) if text in ended else "interrupted"
