"""``gr.Experiment``: many runs of many agent variants, at once, on one machine or a cluster.

An experiment is a grid (agents × jobs × repeats, :mod:`.grid`) kept in a folder, its
root: each run's workspace, each worker's store, the ledger of finished rows
(:mod:`.ledger`) and the grid's fingerprint. :meth:`Experiment.run` runs every cell not
yet done and returns :class:`~.results.Results`; a stopped experiment keeps its rows, and
running it again (in this process or another, with the same root) runs only the rest.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import hashlib
import json
import signal
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from gr_notebook.agent import DEFAULT_RUNS_DIR, Agent
from gr_notebook.blocking import run_blocking
from gr_notebook.errors import ConfigError
from gr_notebook.examples import ExampleJob
from gr_notebook.experiments.executors import (
    Placement,
    cpu_bound,
    dead_worker,
    payload,
    place,
    pool_broke,
    process_pool,
)
from gr_notebook.experiments.grid import RunSpec, build_grid, check_agents, check_jobs
from gr_notebook.experiments.ledger import RERUN, Ledger
from gr_notebook.experiments.limiter import RateLimiter
from gr_notebook.experiments.lock import ExperimentLock
from gr_notebook.experiments.progress import Progress, ProgressLike, choose_progress
from gr_notebook.experiments.record import RunRecord, failed_record
from gr_notebook.experiments.results import Results
from gr_notebook.experiments.stores import STORES_DIR, Merger, merge_runs
from gr_notebook.experiments.worker import CANCEL_FILE, RunTask, execute, run_task
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, writable_path

__all__ = ["Experiment"]

EXPERIMENTS_DIR = DEFAULT_RUNS_DIR / "experiments"
FINGERPRINT_FILE = "experiment.json"


class Experiment:
    """Every agent variant on every job, ``repeats`` times; run ``i`` of a job has seed
    ``seed + i`` for every variant, so the same grid gives the same runs.

    ``root`` (default ``gr_runs/experiments/<name>``) keeps the runs' workspaces and the
    ledger that lets a stopped experiment resume; ``store`` (default
    ``gr_runs/store.sqlite``, the one :func:`gr.runs_df` reads) receives every run. A grid
    holds at most :data:`~gr_notebook.experiments.grid.MAX_RUNS` (100,000) runs. One
    experiment runs in a root at a time: while one runs, another (in any process, or the
    same one again) is refused with the name of the one running.
    """

    def __init__(
        self,
        agents: Mapping[str, Agent] | Iterable[Agent] | Iterable[tuple[str, Agent]],
        jobs: Mapping[str, str | ExampleJob],
        repeats: int = 1,
        *,
        seed: int = 0,
        name: str = "experiment",
        root: str | Path | None = None,
        store: str | Path | None = None,
    ) -> None:
        self.agents = check_agents(agents)
        self.jobs = check_jobs(jobs)
        self.grid = build_grid(self.agents, self.jobs, repeats, seed)
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"name must be a non-empty str, e.g. name='policies'; got {name!r}")
        self.name = name.strip()
        self.root = Path(root if root is not None else EXPERIMENTS_DIR / self.name).absolute()
        _check_root(self.root)
        self.store = writable_path(store if store is not None else DEFAULT_STORE_PATH, make=False)
        self.limiter: RateLimiter | None = None
        """The loop's shared rate limiter, during and after a run (how many 429s it met)."""
        self._stop: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rows: dict[str, RunRecord] = {}
        self._progress: Progress | None = None
        self._merger: Merger | None = None
        self._lock: ExperimentLock | None = None

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        executor: object = None,
        *,
        max_concurrency: int | None = None,
        progress: ProgressLike = True,
        retry_failed: bool = False,
    ) -> Results:
        """Run every cell not done yet and return the results of the whole grid.

        ``executor``: None puts the simulated agent's runs on a process pool (one per core)
        and model-bound runs on this event loop; ``'loop'`` or ``'processes'`` puts them
        all in one place; or pass any ``concurrent.futures.Executor`` or a
        ``dask.distributed.Client``. ``max_concurrency`` caps the runs in flight (on the loop,
        default 8; on an executor, its worker count). Ctrl-C stops every run at its next
        safe point, keeps what finished, then raises ``KeyboardInterrupt``. While it runs it
        holds the root's lock (``<root>/.lock``): another experiment on the same root is
        refused with a ``RunError`` naming this one's process, host and start.
        """
        with _CtrlC(self):
            return run_blocking(
                self.arun(
                    executor,
                    max_concurrency=max_concurrency,
                    progress=progress,
                    retry_failed=retry_failed,
                ),
                wind_down=False,  # the first Ctrl-C asked the runs to stop; a second leaves
            )

    async def arun(
        self,
        executor: object = None,
        *,
        max_concurrency: int | None = None,
        progress: ProgressLike = True,
        retry_failed: bool = False,
    ) -> Results:
        """:meth:`run`, awaited (a notebook's top-level ``await``)."""
        placement, payloads = self._prepare(executor, max_concurrency)
        reporter = choose_progress(progress)
        self._make_root()
        lock = ExperimentLock.acquire(self.root, self.name)  # or refused: another runs here
        try:
            self._lock = lock
            self._loop = asyncio.get_running_loop()
            self._stop = None
            (self.root / CANCEL_FILE).unlink(missing_ok=True)
            return await self._run_held(placement, payloads, reporter, retry_failed)
        finally:
            self._lock = None
            lock.release()

    async def _run_held(
        self,
        placement: Placement,
        payloads: Mapping[tuple[str, str], bytes],
        reporter: Progress,
        retry_failed: bool,
    ) -> Results:
        """The run itself, while this experiment holds its folder."""
        self._check_fingerprint()
        ledger = Ledger(self.root)
        self._rows = ledger.load()
        todo = [s for s in self.grid if self._needs_run(s, retry_failed)]
        known = {s.key for s in self.grid}
        reporter.start(
            len(self.grid),
            list(self.agents),
            [r for k, r in self._rows.items() if k in known and r.spec not in todo],
        )
        self._progress = reporter
        store = Store(self.store)
        self._merger = Merger(self.store)
        try:
            drivers = [
                asyncio.ensure_future(
                    self._on_loop(
                        [s for s in todo if s.agent in placement.on_loop], placement, store, ledger
                    )
                ),
                asyncio.ensure_future(
                    self._on_executor(
                        [s for s in todo if s.agent not in placement.on_loop],
                        placement,
                        payloads,
                        ledger,
                    )
                ),
            ]
            everything = asyncio.gather(*drivers, return_exceptions=True)
            try:
                outcomes = await asyncio.shield(everything)
            except asyncio.CancelledError:  # a kernel's interrupt of an awaiting cell
                self.cancel(interrupted=True)
                await everything
                raise
            for outcome in outcomes:  # both drivers have ended, whatever either raised
                if isinstance(outcome, BaseException):
                    raise outcome
        finally:
            self._sweep()
            self._merger.close()
            self._merger = None
            store.close()
            reporter.close()
            self._progress = None
            self._loop = None
        return self.results()

    def cancel(self, *, interrupted: bool = False) -> None:
        """Stop the experiment: no run starts, every running one ends ``cancelled`` (or
        ``interrupted``) at its next safe point, and what finished is kept; :meth:`run`
        then returns. Safe from any thread."""
        if self._lock is None:  # only the experiment running there speaks for the folder
            warnings.warn(
                f"experiment {self.name!r} is not running, so there is nothing to stop; to stop "
                f"the one running in {self.root}, call .cancel() on that experiment object, or "
                "press Ctrl-C in its cell",
                stacklevel=2,
            )
            return
        how = "interrupted" if interrupted else "cancelled"
        self._stop = self._stop or how
        (self.root / CANCEL_FILE).write_text(how, encoding="utf-8")

    @property
    def stopped(self) -> str | None:
        """``cancelled`` or ``interrupted`` once a stop was asked of the current run."""
        return self._stop

    def results(self) -> Results:
        """The rows finished so far (from the ledger, so also after a restart)."""
        if not self._rows:
            self._rows = Ledger(self.root).load()
        return Results(list(self._rows.values()), grid=self.grid, store=self.store)

    # -- the two ways runs go ---------------------------------------------------------------

    async def _on_loop(
        self, specs: list[RunSpec], placement: Placement, store: Store, ledger: Ledger
    ) -> None:
        if not specs:
            return
        self.limiter = RateLimiter(placement.loop_concurrency)
        slots = asyncio.Semaphore(placement.loop_concurrency)

        async def one(spec: RunSpec) -> None:
            async with slots:
                if self._stop is not None:
                    return
                attempt = self._attempt(spec)
                try:
                    record = await execute(
                        spec,
                        self.agents[spec.agent],
                        self.jobs[spec.job],
                        root=self.root,
                        attempt=attempt,
                        store=store,
                        should_stop=lambda: self._stop,
                        limiter=self.limiter,
                    )
                except Exception as exc:
                    record = failed_record(spec, exc, attempts=attempt)
                if record is not None:
                    self._accept(record, ledger)

        await asyncio.gather(*(one(s) for s in specs))

    async def _on_executor(
        self,
        specs: list[RunSpec],
        placement: Placement,
        payloads: Mapping[tuple[str, str], bytes],
        ledger: Ledger,
    ) -> None:
        if not specs:
            return
        executor = placement.executor or process_pool(placement.workers)
        owned = [executor] if placement.executor is None else []
        queue = [
            RunTask(s, payloads[s.agent, s.job], str(self.root), self._attempt(s))
            for s in reversed(specs)
        ]
        in_flight: dict[asyncio.Future[RunRecord | None], tuple[RunTask, Any]] = {}
        deaths: dict[str, int] = {}  # deaths charged to a cell: those it had alone
        alone: set[str] = set()  # cells that run by themselves: suspects, and known killers
        broke: dict[object, int] = {}  # a broken executor -> how many runs it held then

        def refill() -> None:
            while queue and len(in_flight) < placement.in_flight and self._stop is None:
                if any(t.spec.key in alone for t, _ in in_flight.values()):
                    return  # a suspect has the executor to itself
                if queue[-1].spec.key in alone and in_flight:
                    return  # it waits until the others are done
                task = queue.pop()
                future = asyncio.wrap_future(submit(task))  # may replace a broken executor
                in_flight[future] = (task, executor)

        def submit(task: RunTask) -> cf.Future[RunRecord | None]:
            nonlocal executor
            try:
                return executor.submit(run_task, task)
            except cf.BrokenExecutor:  # it broke since the last row came back
                if not _broken(executor):
                    raise
                executor = process_pool(placement.workers)
                owned.append(executor)
                return executor.submit(run_task, task)

        try:
            refill()
            while in_flight:
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                rows: list[RunRecord] = []
                for future in done:
                    task, used = in_flight.pop(future)
                    error = future.exception()
                    if error is None:
                        row = future.result()
                        if row is not None:  # None: it was due to start after a stop
                            rows.append(row)
                        continue
                    if not dead_worker(error):
                        rows.append(failed_record(task.spec, error, attempts=task.attempt))
                        continue
                    if used is executor and _broken(executor):
                        executor = process_pool(placement.workers)  # the old one is unusable
                        owned.append(executor)
                    key = task.spec.key
                    if pool_broke(error):  # every run it held fails: who killed it?
                        held = broke.setdefault(
                            used,
                            1 + sum(u is used and _lost(f) for f, (_, u) in in_flight.items()),
                        )
                        alone.add(key)
                        if held > 1:  # not known: each runs again alone, uncharged
                            queue.append(replace(task, attempt=task.attempt + 1))
                            continue
                    deaths[key] = deaths.get(key, 0) + 1  # it killed its worker by itself
                    if deaths[key] < 2:
                        alone.add(key)  # retried once, by itself
                        queue.append(replace(task, attempt=task.attempt + 1))
                        continue
                    why = (
                        f"its worker died twice ({type(error).__name__}: {error}), each time "
                        "with no other run to blame; a run that kills its process (memory, a "
                        "crash in native code) needs fixing before it can run"
                    )
                    rows.append(failed_record(task.spec, why, attempts=task.attempt))
                refill()  # the workers go on while the rows are merged
                for row in rows:
                    self._accept(row, ledger)
        finally:
            for pool in owned:
                pool.shutdown(wait=True, cancel_futures=True)

    # -- bookkeeping -------------------------------------------------------------------------

    def _prepare(
        self, executor: object, max_concurrency: object
    ) -> tuple[Placement, dict[tuple[str, str], bytes]]:
        """Everything that can be refused is refused here, before any run starts."""
        cpu_runs = sum(1 for s in self.grid if cpu_bound(self.agents[s.agent]))
        placement = place(executor, self.agents, max_concurrency, cpu_runs)
        payloads = {
            (agent, job): payload(agent, self.agents[agent], job, self.jobs[job])
            for agent in self.agents
            if agent not in placement.on_loop
            for job in self.jobs
        }
        return placement, payloads

    def _make_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"the experiment's root {self.root} cannot be made a folder "
                f"({exc.strerror or exc}); give root= a folder path (or another name=)"
            ) from None

    def _needs_run(self, spec: RunSpec, retry_failed: bool) -> bool:
        row = self._rows.get(spec.key)
        return row is None or row.status in RERUN or (retry_failed and row.status == "failed")

    def _attempt(self, spec: RunSpec) -> int:
        row = self._rows.get(spec.key)
        return 1 if row is None else row.attempts + 1

    def _accept(self, record: RunRecord, ledger: Ledger) -> None:
        if record.store and record.run_id and Path(record.store) != self.store:
            self._merge(Path(record.store), [record.run_id])
        ledger.append(record)
        self._rows[record.spec.key] = record
        if self._progress is not None:
            self._progress.update(record)

    def _sweep(self) -> None:
        """Merge every worker store whole: a run whose row never came back is kept too."""
        folder = self.root / STORES_DIR
        if folder.is_dir():
            for source in sorted(folder.glob("*.sqlite")):
                self._merge(source)

    def _merge(self, source: Path, run_ids: list[str] | None = None) -> None:
        if self._merger is not None:
            self._merger.merge(source, run_ids)
        else:
            merge_runs(self.store, source, run_ids)

    def _check_fingerprint(self) -> None:
        """A root holds one experiment: a variant, job or seed changed under the same name
        would mix two experiments' rows, so it is refused; new names and repeats are not."""
        mine = self._fingerprint()
        path = self.root / FINGERPRINT_FILE
        theirs = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        for part in ("agents", "jobs"):
            for key, value in mine[part].items():
                if theirs.get(part, {}).get(key, value) != value:
                    raise ConfigError(
                        f"{self.root} holds another experiment, whose {part[:-1]} {key!r} "
                        f"differs from this one's; give this experiment another name= (or "
                        "root=), or delete that folder to start over"
                    )
        if theirs.get("seed", mine["seed"]) != mine["seed"]:
            raise ConfigError(
                f"{self.root} holds an experiment with seed={theirs['seed']}; give this one "
                "another name= (or root=), or the same seed to resume it"
            )
        merged = {
            "seed": mine["seed"],
            "agents": {**theirs.get("agents", {}), **mine["agents"]},
            "jobs": {**theirs.get("jobs", {}), **mine["jobs"]},
        }
        path.write_text(json.dumps(merged, indent=1, sort_keys=True), encoding="utf-8")

    def _fingerprint(self) -> dict[str, Any]:
        def digest(value: object) -> str:
            text = json.dumps(value, sort_keys=True, default=repr)
            return hashlib.sha256(text.encode()).hexdigest()[:16]

        return {
            "seed": self.grid[0].seed,
            "agents": {n: digest(_described(a)) for n, a in self.agents.items()},
            "jobs": {n: digest([j.instructions, dict(j.files)]) for n, j in self.jobs.items()},
        }

    def __repr__(self) -> str:
        return (
            f"Experiment({self.name!r}: {len(self.agents)} agents × {len(self.jobs)} jobs × "
            f"{len(self.grid) // (len(self.agents) * len(self.jobs))} repeats = "
            f"{len(self.grid)} runs, root={str(self.root)!r})"
        )


def _described(agent: Agent) -> dict[str, Any]:
    config = agent.config()
    config.pop("name", None)
    return {**config, "model": repr(agent.model)}


def _check_root(root: Path) -> None:
    """A root that is a file, or lies under one, can never hold the experiment's folders."""
    for folder in (root, *root.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "is" if folder == root else f"lies under {folder}, which is"
                raise ConfigError(
                    f"the experiment's root {root} {where} a file, not a folder; give root= "
                    "a folder path (or another name=)"
                )
            return


def _lost(future: asyncio.Future[Any]) -> bool:
    """Still running, or failed: not a run whose row came back before its pool broke."""
    return not future.done() or future.cancelled() or future.exception() is not None


def _broken(executor: object) -> bool:
    return bool(getattr(executor, "_broken", False))


class _CtrlC:
    """Ctrl-C during a blocking :meth:`Experiment.run`: the first asks every run to stop at
    its next safe point (through the loop's thread-safe door) and ``run`` raises
    ``KeyboardInterrupt`` once they have; a second raises at once. Only the main thread
    can take signals, so elsewhere it does nothing."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.pressed = 0
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self.pressed and exc[0] is None:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.pressed += 1
        loop = self.experiment._loop
        if self.pressed > 1 or loop is None:
            raise KeyboardInterrupt
        loop.call_soon_threadsafe(lambda: self.experiment.cancel(interrupted=True))
