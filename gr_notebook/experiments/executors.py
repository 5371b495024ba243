"""Where an experiment's runs go: the event loop, a process pool, any
``concurrent.futures.Executor``, or a Dask cluster, checked before anything runs.

Runs bound by the model (an API's latency) share this process's event loop; runs bound by
the CPU (the simulated agent) go to a process pool, one run per core at a time. Everything
sent to another process goes as cloudpickle bytes, built once per agent and job, so an agent
that cannot travel is refused up front, with the attribute that holds it back.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from gr_notebook.agent import Agent
from gr_notebook.errors import ConfigError
from gr_notebook.examples import ExampleJob
from gr_notebook.experiments.worker import ignore_sigint
from gr_notebook.models.simulated.model import SimulatedModel
from gr_notebook.validation import whole_number

__all__ = [
    "LOOP_CONCURRENCY",
    "Placement",
    "cpu_bound",
    "dead_worker",
    "payload",
    "place",
    "pool_broke",
    "process_pool",
]

LOOP_CONCURRENCY = 8
"""Model-bound runs in flight at once on the loop, unless ``max_concurrency`` says."""

_KINDS = (
    "None (automatic), 'loop', 'processes', a concurrent.futures.Executor such as "
    "ProcessPoolExecutor(2), or a dask.distributed.Client (or its get_executor())"
)


@dataclass(frozen=True)
class Placement:
    """Which runs go where. ``executor`` is None for a pool the experiment makes (and
    shuts down); ``workers`` is how many runs it keeps in flight there."""

    on_loop: frozenset[str]
    """Agent names whose runs share the event loop; the others go to the executor."""
    executor: cf.Executor | None
    workers: int
    loop_concurrency: int
    owned: bool
    ahead: int = 0
    """Runs sent beyond ``workers``, so a worker never waits on the round trip to the
    parent: none for a process pool, which would count a queued run's pool breaking against
    that run; as many as there are workers elsewhere (Dask reschedules on its own)."""

    @property
    def in_flight(self) -> int:
        return self.workers + self.ahead


def cpu_bound(agent: Agent) -> bool:
    """The simulated agent without pretend latency spends its time computing, not waiting."""
    model = agent.model
    return isinstance(model, SimulatedModel) and not model.latency


def place(
    executor: object, agents: Mapping[str, Agent], max_concurrency: object, cpu_runs: int
) -> Placement:
    limit = None if max_concurrency is None else whole_number(max_concurrency, "max_concurrency")
    loop_concurrency = limit or LOOP_CONCURRENCY
    cores = os.cpu_count() or 1
    if executor is None:
        to_pool = (
            {n for n, a in agents.items() if cpu_bound(a)} if cores > 1 and cpu_runs > 1 else set()
        )
        return Placement(
            frozenset(agents) - to_pool, None, min(limit or cores, cores), loop_concurrency, True
        )
    if executor == "loop":
        return Placement(frozenset(agents), None, 1, loop_concurrency, True)
    if executor == "processes":
        return Placement(frozenset(), None, min(limit or cores, cores), loop_concurrency, True)
    if _is_dask_client(executor):
        client: Any = executor
        executor = client.get_executor(pure=False)
    if isinstance(executor, cf.Executor):
        found = _workers_of(executor) or cores
        workers = min(limit or found, found)
        ahead = 0 if isinstance(executor, cf.ProcessPoolExecutor) else workers
        return Placement(frozenset(), executor, workers, loop_concurrency, False, ahead)
    raise ConfigError(f"executor takes {_KINDS}; got {_described(executor)}")


def process_pool(workers: int) -> cf.ProcessPoolExecutor:
    """Spawned workers, which never inherit a kernel's threads and sockets; the payloads
    carry everything cloudpickle can, so nothing else needs to come along."""
    return cf.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=ignore_sigint,
    )


def payload(name: str, agent: Agent, job_name: str, job: ExampleJob) -> bytes:
    """``(agent, job)`` as bytes a worker can load, or a one-line refusal naming what in
    the agent cannot be sent and what to do."""
    import cloudpickle

    template = agent.replace(store=False, workspace=None)
    try:
        return bytes(cloudpickle.dumps((template, job)))
    except Exception as exc:
        where, why = _culprit({"agent": template, "job": job}, exc)
        raise ConfigError(
            f"agent {name!r} (or job {job_name!r}) cannot be sent to a worker process: {where} "
            f"cannot be pickled ({why}). Build that object without open connections, locks "
            "or threads (e.g. a model from a spec string), or keep the runs in this process "
            "with executor='loop'"
        ) from None


def dead_worker(error: BaseException) -> bool:
    """The process that ran the task died (killed, out of memory, a crash in native code):
    a process pool breaks, Dask gives up on a task that killed its workers."""
    return isinstance(error, (BrokenProcessPool, cf.BrokenExecutor)) or (
        type(error).__name__ == "KilledWorker"
    )


def pool_broke(error: BaseException) -> bool:
    """The whole executor broke (a process pool whose worker died fails every run it held),
    so the error does not say which run killed it; Dask's ``KilledWorker`` does."""
    return isinstance(error, cf.BrokenExecutor)


def _is_dask_client(value: object) -> bool:
    kind = type(value)
    return kind.__name__ == "Client" and kind.__module__.startswith("distributed")


def _workers_of(executor: cf.Executor) -> int | None:
    client = getattr(executor, "_client", None)
    if client is not None and _is_dask_client(client):
        return int(sum(client.nthreads().values())) or None
    count = getattr(executor, "_max_workers", None)
    return count if isinstance(count, int) and count > 0 else None


def _described(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__} (pass an instance, e.g. {value.__name__}(2))"
    kind = type(value)
    if kind.__name__ == "LocalCluster" or kind.__name__.endswith("Cluster"):
        return f"a {kind.__name__} (pass dask.distributed.Client(cluster))"
    if kind.__module__.startswith("multiprocessing"):
        return f"a multiprocessing {kind.__name__} (use concurrent.futures.ProcessPoolExecutor)"
    return repr(value) if isinstance(value, str) else f"a {kind.__name__}"


def _culprit(
    value: object, error: BaseException, path: str = "", depth: int = 0
) -> tuple[str, str]:
    """The deepest attribute on the way to what failed to pickle, e.g.
    ``agent.model._client`` — found only on failure, so its cost does not matter."""
    import cloudpickle

    if depth < 8:
        for name, child in _children(value):
            try:
                cloudpickle.dumps(child)
            except Exception as exc:
                return _culprit(child, exc, f"{path}.{name}" if path else name, depth + 1)
    return path or "the agent", f"{type(error).__name__}: {error}"


def _children(value: object) -> Sequence[tuple[str, object]]:
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    found = list(getattr(value, "__dict__", {}).items())
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(value, slot) and slot != "__weakref__":
                found.append((slot, getattr(value, slot)))
    return found
