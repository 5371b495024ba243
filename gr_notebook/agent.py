"""``Agent``: the definition of a job runner (model, tools, limits), reusable across runs.

An agent holds no run state. Each :meth:`Agent.start` makes the run's
:class:`~gr_notebook.engine.definition.AgentDefinition` (one frozen value), a fresh
:class:`~gr_notebook.engine.state.RunState` (event log, workflow, guardrails, conversation),
the :class:`~gr_notebook.engine.loop.Loop` over the two, and the :class:`Run` handle, so one
definition can run many jobs, in a script, a service or a notebook, and behave the same in
each.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import secrets
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from gr_notebook.blocking import run_blocking
from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.engine.definition import AgentDefinition
from gr_notebook.engine.loop import Loop, StuckDetector
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError, RunError, WorkspaceError
from gr_notebook.events import ErrorEvent, RunFinishedEvent, RunStartedEvent
from gr_notebook.guardrails.budget import Budget
from gr_notebook.guardrails.budget_table import BudgetTable
from gr_notebook.guardrails.completion import CheckerLike
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import InterventionConfig
from gr_notebook.guardrails.policy import ToolPolicy
from gr_notebook.guardrails.regulation import ConfirmerLike, RegulationSettings
from gr_notebook.guardrails.spec import DEFAULT_MAX_REFUSALS, GuardrailSpec
from gr_notebook.history.checkpoint_store import RESUMABLE
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store
from gr_notebook.models import resolve_model
from gr_notebook.models.base import Model, context_window_of
from gr_notebook.run import Limits, Run
from gr_notebook.tools import CORE_TOOLS, Tool, ToolRegistry, Toolset, flatten_tools
from gr_notebook.tools.regulation_tools import REGULATION_PROMPT, regulation_tools
from gr_notebook.validation import seconds, whole_number
from gr_notebook.workflow.prompts import kickoff_prompt, system_prompt
from gr_notebook.workflow.workspace import TOOL_DOCS_DIR, Workspace, relative_path
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock

__all__ = ["DEFAULT_RUNS_DIR", "Agent", "RunOrigin"]

DEFAULT_RUNS_DIR = Path("gr_runs")
started_by: weakref.WeakValueDictionary[str, Agent] = weakref.WeakValueDictionary()
"""The agent of each run this process started: ``gr.resume(run_id)`` needs no other."""
INSTRUCTIONS_FILE = "instructions.md"


class Agent:
    """What runs a job: a model, tools, limits and guardrails. Build once, run many times.

    The guardrails belong to the definition, not to a model adapter, so the same agent
    enforces the same policies, feedback and completion criteria on every model.
    """

    def __init__(
        self,
        model: Model | str | Callable[..., Any] | None = None,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        tools: Iterable[Tool | Toolset] = (),
        plan_file: str = "main_plan.md",
        budget: Budget | None = None,
        max_iterations: int | None = None,
        policies: Iterable[ToolPolicy] = (),
        feedback_providers: Iterable[FeedbackProviderConfig] = (),
        task_completion_checker: CheckerLike | None = None,
        max_refusals: int = DEFAULT_MAX_REFUSALS,
        interventions: InterventionConfig | None = InterventionConfig(),  # noqa: B008 (frozen)
        self_regulation: bool = True,
        budget_table: BudgetTable | None = None,
        confirm: ConfirmerLike | None = None,
        confirm_above_tokens: int | None = None,
        release_after_s: float | None = 3600.0,
        compaction: bool = True,
        store: Store | str | os.PathLike[str] | bool | None = None,
        system_prompt: str = "",
        stuck_turns: int | None = 10,
        stuck_detector: StuckDetector | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "agent",
        checkpoints: bool = True,
    ) -> None:
        options = {k: v for k, v in locals().items() if k != "self"}
        for key in ("tools", "policies", "feedback_providers"):  # a generator reads once
            if isinstance(options[key], Iterator):
                options[key] = tuple(options[key])
        tools, policies, feedback_providers = (
            options["tools"],
            options["policies"],
            options["feedback_providers"],
        )
        self._options: dict[str, Any] = options
        self.budget = _budget_of(budget, max_iterations)
        try:  # exactly as a tool's path is checked, so every write of the plan succeeds
            plan_file = relative_path(plan_file)
        except WorkspaceError as exc:
            raise WorkspaceError(
                f"plan_file {plan_file!r} must be a path inside the workspace, e.g. "
                f"'main_plan.md': {exc}"
            ) from None
        self.model = resolve_model(model)
        self.workspace = workspace
        self.user_tools = tuple(tools)
        self.regulation = _regulation_of(
            self_regulation, budget_table, confirm, confirm_above_tokens
        )
        own = regulation_tools(self.regulation.table) if self.regulation else ()
        self.registry = ToolRegistry([*CORE_TOOLS, *own, *flatten_tools(self.user_tools)])
        if release_after_s is not None:
            seconds(release_after_s, "release_after_s", minimum=0, above=True)
        self.release_after_s = release_after_s
        self.guardrails = GuardrailSpec.build(
            tools=list(self.registry),
            toolsets=self.user_tools,
            policies=policies,
            feedback_providers=feedback_providers,
            checker=task_completion_checker,
            max_refusals=max_refusals,
        )
        if interventions is not None and not isinstance(interventions, InterventionConfig):
            raise ConfigError(
                "interventions takes gr.InterventionConfig(...) (or a preset such as "
                "gr.InterventionConfig.more_protective()), or None to turn them off; got "
                f"{type(interventions).__name__}"
            )
        self.interventions = interventions
        self.plan_file = plan_file
        self.compaction = compaction
        self.system_prompt = system_prompt
        self.stuck_turns = stuck_turns
        self.stuck_detector = stuck_detector
        self.clock = clock
        self.name = name
        self._store_spec = store
        self._store: Store | None = None
        if not isinstance(checkpoints, bool):
            raise ConfigError(f"checkpoints takes True or False, got {checkpoints!r}")
        self.checkpoints = checkpoints
        """A checkpoint at every turn, in the store (none without one): resume and fork."""

    # -- running ----------------------------------------------------------------------------

    async def run(self, instructions: str) -> Run:
        """Run a job to its end and return the finished run."""
        return await self.start(instructions).wait()

    def run_sync(self, instructions: str) -> Run:
        """Like :meth:`run`, without ``await``; also inside a running loop (a Jupyter cell)."""
        return run_blocking(self.run(instructions))

    def start(
        self,
        instructions: str,
        *,
        context: contextvars.Context | None = None,
        confirm: ConfirmerLike | None = None,
    ) -> Run:
        """Start a job as a task on the running event loop and return its live handle.

        ``context`` is the :mod:`contextvars` context the run's task runs in; the default is
        a copy of the caller's. A notebook passes a fresh one so that output from the task
        is not attributed to the cell that launched it. ``confirm`` answers this run's large
        assessments when the agent has no confirmer of its own.
        """
        if not instructions.strip():
            raise RunError("instructions are empty; say what the job is")
        loop = _running_loop("agent.start()", "agent.run_sync(instructions)")
        run_id = _new_run_id(self.clock)
        return self._launch(
            run_id, self._workspace_for(run_id), instructions, loop, context, confirm, None
        )

    def _launch(
        self,
        run_id: str,
        workspace: Workspace,
        instructions: str,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context | None,
        confirm: ConfirmerLike | None,
        origin: RunOrigin | None,
        store: Store | None = None,
    ) -> Run:
        """Build the run and start its task: from the bootstrap, or from ``origin``, a
        checkpoint (a resume or a fork; see :mod:`gr_notebook.history.timetravel`)."""
        try:
            workspace.resolve(self.plan_file)
        except WorkspaceError as exc:
            raise WorkspaceError(f"plan_file {self.plan_file!r} cannot be used: {exc}") from None
        definition = self.definition(confirm=confirm)
        state = RunState(definition, workspace=workspace, clock=self.clock, run_id=run_id)
        lock = WorkspaceLock.acquire(workspace.root, LockOwner.this_process(run_id, self.clock()))
        try:
            if origin is not None:
                origin.restore(state)  # the files, then the state: refused whole, or done
            engine = Loop(definition, state)
            run = Run(
                run_id,
                workspace=workspace,
                events=state.events,
                phases=state.phases,
                instructions=instructions,
                limits=Limits(
                    max_iterations=self.budget.max_iterations,
                    context_window=context_window_of(self.model),
                    token_budget=self.budget.max_tokens,
                ),
            )
            store = store or self._open_store()
            if store is not None:
                store.record_run_started(
                    run_id,
                    started_at=self.clock(),
                    model=self.model.name,
                    workspace=str(workspace.root),
                    instructions=instructions,
                    config=self.config(),
                )
                if origin is not None:
                    origin.record(store, run_id)
                state.events.subscribe(lambda event: store.record_event(run_id, event))
                if self.checkpoints:
                    engine.checkpoint = Checkpointer(store, state)
            run._bind(self, store)
            started_by[run_id] = self
            # The run's initial state exists before start() returns, so a person's first
            # edit (%todo add, right after a background start) is made to it, not replaced.
            if origin is None:
                failure = self._prepare(run, engine)
            else:
                failure = self._guarded(engine, lambda: origin.begin(state, self.registry))
            task = loop.create_task(
                self._execute(run, engine, store, lock, failure, resumed=origin is not None),
                name=f"gr-run-{run_id}",
                context=context,
            )
        except BaseException:
            lock.release()
            raise
        run._attach(engine, task)
        return run

    def definition(self, *, confirm: ConfirmerLike | None = None) -> AgentDefinition:
        """What a run of this agent works under; ``confirm`` answers large assessments when
        the agent has no confirmer of its own."""
        regulation = self.regulation
        if confirm is not None and regulation is not None and regulation.confirm is None:
            regulation = replace(regulation, confirm=confirm)
        return AgentDefinition(
            model=self.model,
            registry=self.registry,
            system_prompt=system_prompt(
                self.plan_file,
                "\n\n".join(
                    p for p in (REGULATION_PROMPT if regulation else "", self.system_prompt) if p
                ),
                regulated=regulation is not None,
            ),
            plan_file=self.plan_file,
            budget=self.budget,
            compaction=self.compaction,
            guardrails=self.guardrails,
            interventions=self.interventions,
            regulation=regulation,
            stuck_detector=self.stuck_detector,
            stuck_turns=self.stuck_turns,
            name=self.name,
        )

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model.name,
            "plan_file": self.plan_file,
            "max_iterations": self.budget.max_iterations,
            "max_tokens": self.budget.max_tokens,
            "deadline_s": self.budget.deadline_s,
            "compaction": self.compaction,
            "tools": [t.name for t in self.registry],
            **self.guardrails.describe(),
            "interventions": self.interventions.describe() if self.interventions else None,
            "self_regulation": self.regulation is not None,
        }

    @property
    def max_iterations(self) -> int:
        return self.budget.max_iterations

    def replace(self, **changes: Any) -> Agent:
        """A new agent built from this one's arguments with ``changes`` applied, as
        :func:`dataclasses.replace` does: an experiment gives each run its own model seed,
        workspace and store this way."""
        unknown = sorted(set(changes) - set(self._options))
        if unknown:
            raise ConfigError(
                f"Agent.replace() got {', '.join(unknown)}; it takes gr.Agent's own arguments: "
                f"{', '.join(self._options)}"
            )
        return Agent(**{**self._options, **changes})

    # -- internals --------------------------------------------------------------------------

    async def _execute(
        self,
        run: Run,
        engine: Loop,
        store: Store | None,
        lock: WorkspaceLock,
        failure: LoopOutcome | None,
        *,
        resumed: bool = False,
    ) -> Run:
        try:
            return await self._execute_run(run, engine, store, failure, resumed=resumed)
        finally:
            if isinstance(engine.checkpoint, Checkpointer):
                engine.checkpoint.close(keep_journal=run.status in RESUMABLE)
            lock.release()

    def _prepare(self, run: Run, engine: Loop) -> LoopOutcome | None:
        """Write the instructions and tool docs, and start the bootstrap phase; an I/O
        failure is recorded and ends the run as ``failed``, never lost."""
        workspace = run.workspace
        try:
            workspace.write_text(INSTRUCTIONS_FILE, run.instructions.rstrip() + "\n")
            for tool in self.registry:
                workspace.write_text(f"{TOOL_DOCS_DIR}/{tool.name}.md", tool.docs_markdown())
            engine.state.emit(
                RunStartedEvent(
                    run_id=run.run_id,
                    model=self.model.name,
                    workspace=str(workspace.root),
                    instructions=run.instructions[:400],
                    config=self.config(),
                )
            )
            engine.state.phases.start()
        except Exception as exc:
            return self._failed(engine, exc)
        return None

    def _guarded(self, engine: Loop, step: Callable[[], object]) -> LoopOutcome | None:
        try:
            step()
        except Exception as exc:
            return self._failed(engine, exc)
        return None

    def _failed(self, engine: Loop, exc: Exception) -> LoopOutcome:
        """A bug or an I/O failure: recorded, never lost."""
        engine.state.emit(ErrorEvent(source="run", error_type=type(exc).__name__, message=str(exc)))
        return LoopOutcome("failed", f"{type(exc).__name__}: {exc}", exc)

    async def _execute_run(
        self,
        run: Run,
        engine: Loop,
        store: Store | None,
        failure: LoopOutcome | None,
        *,
        resumed: bool = False,
    ) -> Run:
        try:
            go = engine.go_on() if resumed else engine.run(kickoff_prompt())
            outcome = failure or await go
        except asyncio.CancelledError:
            outcome = LoopOutcome(engine.stop_status, engine.stop_reason or "cancelled")
        except (KeyboardInterrupt, SystemExit) as exc:  # recorded, then on its way up
            outcome = LoopOutcome("interrupted", _interrupt_reason(exc), exc)
        except Exception as exc:
            outcome = self._failed(engine, exc)
        self._finish(run, engine, store, outcome)
        if isinstance(outcome.error, KeyboardInterrupt | SystemExit):
            raise outcome.error
        return run

    def _finish(self, run: Run, engine: Loop, store: Store | None, outcome: LoopOutcome) -> None:
        """Settle the run's status, record ``run_finished`` and the store's row."""
        run._end(outcome)
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
            self._record_end(run, store)
        if self.release_after_s is not None:
            run._release_when_idle(self.release_after_s)

    def _record_end(self, run: Run, store: Store) -> None:
        job = run.job
        finished = self.clock()
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

    def _workspace_for(self, run_id: str) -> Workspace:
        if isinstance(self.workspace, Workspace):
            return self.workspace
        if self.workspace is None:
            return Workspace(DEFAULT_RUNS_DIR / run_id)
        return Workspace(self.workspace)

    def _open_store(self) -> Store | None:
        spec = self._store_spec
        if spec is False:
            return None
        if self._store is None:
            if isinstance(spec, Store):
                self._store = spec
            else:
                path = DEFAULT_STORE_PATH if spec in (None, True) else spec
                self._store = Store(path)  # type: ignore[arg-type]
        return self._store

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model.name!r}, tools={len(self.registry)}, "
            f"max_iterations={self.max_iterations}, compaction={self.compaction})"
        )


def _budget_of(budget: Budget | None, max_iterations: int | None) -> Budget:
    """``max_iterations=N`` is shorthand for ``budget=gr.Budget(max_iterations=N)``."""
    if budget is not None and not isinstance(budget, Budget):
        raise ConfigError(
            f"budget takes gr.Budget(max_tokens=..., max_iterations=..., deadline_s=...), "
            f"not {type(budget).__name__}"
        )
    if max_iterations is None:
        return budget or Budget()
    whole_number(max_iterations, "max_iterations")
    if budget is not None and budget.max_iterations != max_iterations:
        raise ConfigError(
            f"max_iterations={max_iterations} disagrees with budget.max_iterations="
            f"{budget.max_iterations}; give the limit once, inside gr.Budget(...)"
        )
    return budget or Budget(max_iterations=max_iterations)


def _regulation_of(
    on: bool, table: BudgetTable | None, confirm: ConfirmerLike | None, above: int | None
) -> RegulationSettings | None:
    if not isinstance(on, bool):
        raise ConfigError(f"self_regulation takes True or False, got {on!r}")
    if table is not None and not isinstance(table, BudgetTable):
        raise ConfigError(
            "budget_table takes gr.BudgetTable({...}), e.g. gr.BudgetTable().with_type("
            f"'data_cleaning', tokens=50_000, iterations=12); got {type(table).__name__}"
        )
    if confirm is not None and not callable(confirm):
        raise ConfigError(
            "confirm takes a function request -> bool (it may be async), got "
            f"{type(confirm).__name__}"
        )
    if above is not None:
        whole_number(above, "confirm_above_tokens")
    if not on:
        if table is not None or confirm is not None:
            raise ConfigError(
                "budget_table and confirm belong to self-regulation; drop them, or set "
                "self_regulation=True"
            )
        return None
    return RegulationSettings(table or BudgetTable(), confirm, above)


class RunOrigin(Protocol):
    """Where a run that does not start from the bootstrap comes from: a checkpoint."""

    def restore(self, state: RunState) -> None:
        """Bring the workspace and ``state`` (fresh, no events) back to the checkpoint."""

    def record(self, store: Store, run_id: str) -> None:
        """Give the new run's record what it stands on (events, lineage)."""

    def begin(self, state: RunState, registry: ToolRegistry) -> None:
        """The first events of the new run (``run_resumed``), before its task starts."""


def _running_loop(what: str, instead: str) -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RunError(
            f"{what} needs a running event loop (a Jupyter cell or async code); "
            f"in a script use {instead}"
        ) from None


def _interrupt_reason(exc: KeyboardInterrupt | SystemExit) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt: interrupted (Ctrl-C or a kernel interrupt)"
    return f"SystemExit({exc.code!r}) raised inside the run"


def _new_run_id(clock: Callable[[], float]) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    return f"{stamp}-{secrets.token_hex(3)}"
