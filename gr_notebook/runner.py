"""The life of one run: how it starts, executes, finishes and is recorded.

:class:`~gr_notebook.agent.Agent` says *what* runs (model, tools, limits, guardrails); this
module runs it. The same steps serve a fresh run (``agent.start``), a run that starts from a
checkpoint (:mod:`gr_notebook.review.timetravel`) and a Claude Agent SDK session, which
finishes like any other run (:mod:`gr_notebook.integrations.claude_agent_sdk.session`):

1. :func:`launch` builds the run's state, loop and :class:`~gr_notebook.run.Run` handle,
   locks the workspace, opens the run's record in the store, writes the run's first events,
   and starts its task on the event loop;
2. :func:`execute` is that task: it runs the loop to its end, whatever the end;
3. :func:`finish` settles the run's status and records its end (``run_finished``, the
   store's rows), then the task lets go of the checkpoints and the workspace lock.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
import weakref
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from typing import Any, Protocol

from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.engine.controls import Controls
from gr_notebook.engine.definition import AgentDefinition
from gr_notebook.engine.loop import Loop
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.side_effects import CutTurn
from gr_notebook.engine.state import RunState
from gr_notebook.errors import RunError, WorkspaceError
from gr_notebook.events import ErrorEvent, RunFinishedEvent, RunStartedEvent
from gr_notebook.guardrails.regulation import ConfirmerLike
from gr_notebook.history.checkpoint_store import RESUMABLE, keep_blob
from gr_notebook.history.store import Store
from gr_notebook.models.base import context_window_of
from gr_notebook.run import Limits, Run
from gr_notebook.tools import Tool, ToolRegistry
from gr_notebook.tools.mcp_client import connect
from gr_notebook.workflow.prompts import kickoff_prompt
from gr_notebook.workflow.workspace import TOOL_DOCS_DIR, Workspace
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock

__all__ = [
    "INSTRUCTIONS_FILE",
    "RunOrigin",
    "Runnable",
    "announce",
    "execute",
    "finish",
    "launch",
    "new_run_id",
    "running_loop",
    "started_by",
]

INSTRUCTIONS_FILE = "instructions.md"


class Runnable(Protocol):
    """What the runner reads of an agent (:class:`~gr_notebook.agent.Agent` is one)."""

    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def checkpoints(self) -> bool: ...
    @property
    def release_after_s(self) -> float | None: ...
    @property
    def run_watchers(self) -> tuple[Callable[[Run], object], ...]: ...
    def definition(self, *, confirm: ConfirmerLike | None = None) -> AgentDefinition: ...
    def config(self) -> dict[str, Any]: ...
    def open_store(self) -> Store | None: ...


class RunOrigin(Protocol):
    """Where a run that does not start from the bootstrap comes from: a checkpoint."""

    def restore(self, state: RunState) -> None:
        """Bring the workspace and ``state`` (fresh, no events) back to the checkpoint."""

    def record(self, store: Store, run_id: str) -> None:
        """Give the new run's record what it stands on (events, lineage)."""

    def begin(self, state: RunState, registry: ToolRegistry) -> None:
        """The first events of the new run (``run_resumed``), before its task starts."""

    @property
    def cut(self) -> CutTurn | None:
        """The turn a kill cut, to rebuild from its record before the model is asked again."""


started_by: weakref.WeakValueDictionary[str, Runnable] = weakref.WeakValueDictionary()
"""The agent of each run this process started: ``gr.resume(run_id)`` needs no other."""


def new_run_id() -> str:
    """A run id that sorts by start time and is unique: ``20250101-120000-a1b2c3``. The
    time is the wall clock's, even for an agent with a fake clock (its runs' ids would all
    start with the fake clock's epoch): an id names when a run really started."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    return f"{stamp}-{secrets.token_hex(3)}"


def running_loop(what: str, instead: str) -> asyncio.AbstractEventLoop:
    """The running event loop, or a RunError that says ``what`` to call ``instead``."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RunError(
            f"{what} needs a running event loop (a Jupyter cell or async code); "
            f"in a script use {instead}"
        ) from None


# -- 1. start ---------------------------------------------------------------------------------


def launch(
    agent: Runnable,
    run_id: str,
    workspace: Workspace,
    instructions: str,
    loop: asyncio.AbstractEventLoop,
    *,
    context: contextvars.Context | None = None,
    confirm: ConfirmerLike | None = None,
    origin: RunOrigin | None = None,
    store: Store | None = None,
) -> Run:
    """Build the run and start its task: from the bootstrap, or from ``origin``, a
    checkpoint. ``store`` records the run instead of the agent's own (a resume or a fork
    records into its parent's). The run's initial state exists before this returns, so a
    person's first edit (``%todo add`` right after a background start) is made to it."""
    definition = agent.definition(confirm=confirm)
    try:
        workspace.resolve(definition.plan_file)
    except WorkspaceError as exc:
        raise WorkspaceError(f"plan_file {definition.plan_file!r} cannot be used: {exc}") from None
    state = RunState(definition, workspace=workspace, clock=agent.clock, run_id=run_id)
    lock = WorkspaceLock.acquire(workspace.root, LockOwner.this_process(run_id, agent.clock()))
    try:
        if origin is not None:
            origin.restore(state)  # the files, then the state: refused whole, or done
        engine = Loop(definition, state)
        run = Run(
            run_id,
            controls=engine,
            workspace=workspace,
            instructions=instructions,
            limits=Limits(
                max_iterations=definition.budget.max_iterations,
                context_window=context_window_of(definition.model),
                token_budget=definition.budget.max_tokens,
                cost_limit_usd=definition.budget.max_cost_usd,
            ),
        )
        announce(agent, run)
        store = store or agent.open_store()
        if store is not None:
            _open_record(agent, run, engine, store, origin)
        started_by[run_id] = agent
        if origin is None:
            failure = _guarded(engine, lambda: _bootstrap(agent, run, engine))
        else:
            failure = _guarded(engine, lambda: origin.begin(state, definition.registry))
        task = loop.create_task(
            execute(agent, run, engine, store, lock, failure, origin=origin),
            name=f"gr-run-{run_id}",
            context=context,
        )
    except BaseException:
        lock.release()
        raise
    run.attach(task, agent=agent, store=store)
    return run


def announce(agent: Runnable, run: Run) -> None:
    """Hand a new run to the agent's watchers (``agent.on_run``), before its first event."""
    for watch in agent.run_watchers:
        watch(run)


def _open_record(
    agent: Runnable, run: Run, engine: Loop, store: Store, origin: RunOrigin | None
) -> None:
    """The run's row in the store, every event after it, and a checkpoint at every turn."""
    run_id = run.run_id
    store.record_run_started(
        run_id,
        started_at=agent.clock(),
        model=engine.definition.model.name,
        workspace=str(run.workspace.root),
        instructions=run.instructions,
        config=agent.config(),
    )
    if origin is not None:
        origin.record(store, run_id)
    engine.state.events.subscribe(lambda event: store.record_event(run_id, event))
    engine.state.keep = lambda data: keep_blob(store, data)
    if agent.checkpoints:
        engine.checkpoint = Checkpointer(store, engine.state)


def _bootstrap(agent: Runnable, run: Run, engine: Loop) -> None:
    """Write the instructions and tool docs, record ``run_started``, begin the first phase."""
    workspace, definition = run.workspace, engine.definition
    workspace.write_text(INSTRUCTIONS_FILE, run.instructions.rstrip() + "\n")
    for tool in definition.registry:
        workspace.write_text(f"{TOOL_DOCS_DIR}/{tool.name}.md", tool.docs_markdown())
    engine.state.emit(
        RunStartedEvent(
            run_id=run.run_id,
            model=definition.model.name,
            workspace=str(workspace.root),
            instructions=run.instructions[:400],
            config=agent.config(),
        )
    )
    engine.state.phases.start()


def _guarded(engine: Loop, step: Callable[[], object]) -> LoopOutcome | None:
    """Run ``step``; an I/O failure is recorded and ends the run as ``failed``, never lost."""
    try:
        step()
    except Exception as exc:
        return _failed(engine, exc)
    return None


def _failed(engine: Loop, exc: Exception) -> LoopOutcome:
    """A bug or an I/O failure: recorded, never lost."""
    engine.state.emit(ErrorEvent(source="run", error_type=type(exc).__name__, message=str(exc)))
    return LoopOutcome("failed", f"{type(exc).__name__}: {exc}", exc)


# -- 2. execute -------------------------------------------------------------------------------


async def execute(
    agent: Runnable,
    run: Run,
    engine: Loop,
    store: Store | None,
    lock: WorkspaceLock,
    failure: LoopOutcome | None,
    *,
    origin: RunOrigin | None = None,
) -> Run:
    """The run's task: the loop to its end (any end: done, a limit, a stop, a bug, Ctrl-C),
    then :func:`finish`; the checkpoints and the workspace lock are let go of whatever
    happens. Ctrl-C and ``SystemExit`` are recorded, then raised on."""
    servers = AsyncExitStack()
    try:
        try:
            if failure is None and engine.definition.mcp_servers:
                _add_tools(run, engine, await connect(engine.definition.mcp_servers, servers))
            go = engine.go_on(origin.cut) if origin else engine.run(kickoff_prompt())
            outcome = failure or await go
        except asyncio.CancelledError:
            outcome = LoopOutcome(engine.stop_status, engine.stop_reason or "cancelled")
        except (KeyboardInterrupt, SystemExit) as exc:
            outcome = LoopOutcome("interrupted", _interrupt_reason(exc), exc)
        except Exception as exc:
            outcome = _failed(engine, exc)
        await _close(servers)
        finish(agent, run, engine, store, outcome)
        if isinstance(outcome.error, KeyboardInterrupt | SystemExit):
            raise outcome.error
        return run
    finally:
        if isinstance(engine.checkpoint, Checkpointer):
            engine.checkpoint.close(keep_journal=run.status in RESUMABLE)
        lock.release()


def _add_tools(run: Run, engine: Loop, tools: list[Tool]) -> None:
    """The MCP servers' tools join the run's, with their docs in the workspace."""
    engine.add_tools(tools)
    for tool in tools:
        run.workspace.write_text(f"{TOOL_DOCS_DIR}/{tool.name}.md", tool.docs_markdown())


async def _close(servers: AsyncExitStack) -> None:
    """Close the run's MCP servers; a server that fails to close does not change the run's
    end (the SDK stops a stdio server's process whatever happens)."""
    with suppress(Exception, asyncio.CancelledError):
        await servers.aclose()


def _interrupt_reason(exc: KeyboardInterrupt | SystemExit) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt: interrupted (Ctrl-C or a kernel interrupt)"
    return f"SystemExit({exc.code!r}) raised inside the run"


# -- 3. finish and record ---------------------------------------------------------------------


def finish(
    agent: Runnable, run: Run, engine: Controls, store: Store | None, outcome: LoopOutcome
) -> None:
    """Settle the run's status, record ``run_finished`` and the store's rows, and free the
    finished run's conversation after ``agent.release_after_s`` (a kernel holds many)."""
    run.settle(outcome)
    totals = run.summary()
    engine.state.emit(
        RunFinishedEvent(
            status=outcome.status,
            reason=outcome.reason,
            turns=engine.state.turn,
            input_tokens=totals["input_tokens"],
            output_tokens=totals["output_tokens"],
            tokens_used=engine.state.tokens,
            limit=outcome.limit,
        )
    )
    if store is not None:
        _record_end(run, store, agent.clock())
    if agent.release_after_s is not None:
        asyncio.get_running_loop().call_later(agent.release_after_s, run.release_conversation)


def _record_end(run: Run, store: Store, finished: float) -> None:
    job = run.job
    store.record_run_finished(
        run.run_id,
        status=run.status,
        finished_at=finished,
        # A run the model ended is no error: its reason is in run_finished.
        error=None if run.status in ("completed", "ended") else run.reason,
    )
    store.record_job(  # a job reported unfinished under a spent limit keeps the run's status
        run.run_id,
        status=run.status,
        completed_at=finished if job else None,
        summary=job.summary if job else None,
        deliverables=job.deliverables if job else (),
        confidence=job.confidence if job else None,
        notes=job.notes if job else None,
    )
