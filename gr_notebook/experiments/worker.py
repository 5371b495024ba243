"""What runs one cell of the grid, in this process or in a worker.

A run gets its own workspace (``<root>/runs/<cell>/attempt-<n>``, the job's files written
fresh), its own model seed, and the store it is told to write. A stop asked of the
experiment reaches every run at its next safe point: on the event loop through a flag, in a
worker through a marker file under the root, which any worker that shares the root sees.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gr_notebook.agent import Agent
from gr_notebook.examples import ExampleJob
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.limiter import RateLimiter, gated
from gr_notebook.experiments.record import RunRecord, failed_record, record_of
from gr_notebook.experiments.stores import worker_store
from gr_notebook.history.store import Store
from gr_notebook.models.base import Model
from gr_notebook.models.simulated.model import PROFILES, SimulatedModel
from gr_notebook.tools.toolset import Toolset

__all__ = [
    "CANCEL_FILE",
    "RUNS_DIR",
    "RunTask",
    "execute",
    "ignore_sigint",
    "reseeded",
    "run_task",
    "worker_name",
]

RUNS_DIR = "runs"
CANCEL_FILE = ".cancel"
POLL_S = 0.05
"""How often a run looks for a stop asked of the whole experiment."""

StopSignal = Callable[[], str | None]
"""Returns ``"cancelled"`` or ``"interrupted"`` once the experiment is asked to stop."""


@dataclass(frozen=True, slots=True)
class RunTask:
    """One run, as sent to a worker: ``payload`` is ``(agent, job)`` through cloudpickle, so
    a policy class or a tool written in a notebook cell travels with it."""

    spec: RunSpec
    payload: bytes
    root: str
    attempt: int = 1


def run_task(task: RunTask) -> RunRecord | None:
    """A worker's entry point: run the task on a fresh event loop, into this process's
    store under the root. Anything the run raises comes back as a failed row; a task that
    starts after the experiment was stopped runs nothing and returns None."""
    root = Path(task.root)
    started = time.perf_counter()
    try:
        import cloudpickle

        agent, job = cloudpickle.loads(task.payload)
        store = worker_store(root)
        return asyncio.run(
            execute(
                task.spec,
                agent,
                job,
                root=root,
                attempt=task.attempt,
                store=store,
                should_stop=lambda: _marker(root),
            )
        )
    except Exception as exc:
        return failed_record(
            task.spec,
            exc,
            attempts=task.attempt,
            worker=worker_name(),
            wall_s=time.perf_counter() - started,
        )


async def execute(
    spec: RunSpec,
    agent: Agent,
    job: ExampleJob,
    *,
    root: Path,
    attempt: int,
    store: Store,
    should_stop: StopSignal,
    limiter: RateLimiter | None = None,
) -> RunRecord | None:
    """Run one cell to its end and return its row; a stop asked of the experiment cancels
    the run (or interrupts it, for Ctrl-C) at its next safe point, and one asked before it
    started leaves it unrun (None)."""
    if should_stop() is not None:
        return None
    started = time.perf_counter()
    folder = root / RUNS_DIR / spec.folder / f"attempt-{attempt}"
    if folder.exists():  # left by an experiment that was killed before it recorded the row
        shutil.rmtree(folder)
    model = reseeded(agent.model, spec.seed)
    if limiter is not None:
        model = gated(model, limiter)
    run_agent = agent.replace(
        model=model,
        workspace=job.prepare(folder),
        store=store,
        tools=(*agent.user_tools, *_missing(agent, job)),
        name=spec.agent,
    )
    run = run_agent.start(job.instructions)
    watcher = asyncio.get_running_loop().create_task(_watch(run.cancel, should_stop))
    try:
        await run.wait()
    finally:
        watcher.cancel()
    return record_of(
        spec,
        run,
        wall_s=time.perf_counter() - started,
        attempts=attempt,
        worker=worker_name(),
        store=str(store.path),
    )


def _missing(agent: Agent, job: ExampleJob) -> tuple[Toolset, ...]:
    """The job's toolsets, less any the agent was already given (``tools=job.toolsets``)."""
    have = {tool.name for tool in agent.registry}
    return tuple(t for t in job.toolsets if not {tool.name for tool in t.tools} <= have)


def reseeded(model: Model, seed: int) -> Model:
    """The simulated agent (a subclass too) with the run's seed and a fresh profile; any
    other model as it is."""
    if not isinstance(model, SimulatedModel):
        return model
    fresh = copy.copy(model)
    fresh.profile = PROFILES[model.profile.name](seed)
    fresh.seed = seed
    return fresh


async def _watch(cancel: Callable[..., None], should_stop: StopSignal) -> None:
    while True:
        await asyncio.sleep(POLL_S)
        how = should_stop()
        if how is not None:
            interrupted = how == "interrupted"
            cancel(f"the experiment was {how}", interrupted=interrupted)
            return


def _marker(root: Path) -> str | None:
    try:
        how = (root / CANCEL_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return "interrupted" if how == "interrupted" else "cancelled"


def worker_name() -> str:
    name = f"{socket.gethostname()}:{os.getpid()}"
    thread = threading.current_thread()
    return name if thread is threading.main_thread() else f"{name}:{thread.name}"


def ignore_sigint() -> None:
    """A worker process leaves Ctrl-C to the experiment, which stops every run cleanly
    (a terminal sends SIGINT to the whole process group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
