"""An experiment's grid, and every mistake refused before anything runs."""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.experiments.executors import cpu_bound, place
from tests.experiments.helpers import JOB


def agent(profile: str = "diligent", **kwargs: object) -> gr.Agent:
    return gr.Agent(f"simulated:{profile}", max_iterations=60, **kwargs)  # type: ignore[arg-type]


def test_the_grid_is_every_agent_on_every_job_with_a_seed_per_repeat(tmp_path: Path) -> None:
    exp = gr.Experiment(
        {"a": agent(), "b": agent("reckless")},
        {"x": JOB, "y": JOB},
        repeats=3,
        seed=10,
        root=tmp_path,
    )
    assert len(exp.grid) == 12
    assert [(s.agent, s.job, s.repeat, s.seed) for s in exp.grid[:4]] == [
        ("a", "x", 0, 10),
        ("a", "x", 1, 11),
        ("a", "x", 2, 12),
        ("a", "y", 0, 10),
    ]
    # every variant meets the same seeds on a job: the comparison is paired
    seeds = {(s.job, s.repeat): s.seed for s in exp.grid if s.agent == "a"}
    assert all(seeds[s.job, s.repeat] == s.seed for s in exp.grid if s.agent == "b")


def test_agents_may_be_a_list_named_by_their_names(tmp_path: Path) -> None:
    exp = gr.Experiment([agent(name="bare"), agent(name="strict")], {"x": JOB}, root=tmp_path)
    assert list(exp.agents) == ["bare", "strict"]


@pytest.mark.parametrize(
    ("agents", "jobs", "repeats", "says"),
    [
        ({}, {"x": JOB}, 1, "grid is empty (agents empty)"),
        ({"a": agent()}, {}, 1, "grid is empty (jobs empty)"),
        ({"a": agent()}, {"x": JOB}, 0, "grid is empty (repeats=0)"),
        ([agent(name="same"), agent(name="same")], {"x": JOB}, 1, "a variant 'same' twice"),
        ({"a b": agent(), "a_b": agent()}, {"x": JOB}, 1, "that name one folder"),
        ({"a": agent()}, {"x": JOB, " x ": JOB}, 1, "a variant 'x' twice"),
        ({"a": "simulated"}, {"x": JOB}, 1, "not a gr.Agent"),
        ({"a": agent()}, {"x": "  "}, 1, "empty instructions"),
        ({"a": agent()}, {"x": 3}, 1, "as a str or a gr.examples.ExampleJob"),
        ({"a": agent()}, {"x": JOB}, -1, "repeats must be a whole number"),
    ],
)
def test_a_bad_grid_is_refused_with_what_to_do(
    tmp_path: Path, agents: object, jobs: object, repeats: int, says: str
) -> None:
    with pytest.raises(gr.ConfigError) as caught:
        gr.Experiment(agents, jobs, repeats, root=tmp_path / "exp")  # type: ignore[arg-type]
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "exp").exists()


class LockedPolicy:
    """A policy that holds a lock: it cannot be sent to another process."""

    name = "locked"

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def check(self, tool: str, params: object, *, context: object) -> gr.PolicyDecision:
        return gr.PolicyDecision.allow()

    def on_result(self, *args: object, **kwargs: object) -> None:
        pass


def test_an_agent_that_cannot_be_sent_to_a_process_is_refused_before_any_run(
    tmp_path: Path,
) -> None:
    exp = gr.Experiment(
        {"locked": agent(policies=[LockedPolicy()])},
        {"x": JOB},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    with pytest.raises(gr.ConfigError) as caught:
        exp.run("processes", progress=False)
    message = str(caught.value)
    assert "agent 'locked'" in message and "cannot be sent to a worker process" in message
    assert "lock" in message  # why: the attribute and pickle's own reason
    assert "executor='loop'" in message  # what to do
    assert not (tmp_path / "exp").exists() and not (tmp_path / "store.sqlite").exists()
    # on the loop nothing is sent, so the same agent runs
    results = exp.run("loop", progress=False)
    assert [r.status for r in results.records] == ["completed", "completed"]


@pytest.mark.parametrize(
    ("executor", "says"),
    [
        ("threads", "got 'threads'"),
        (ProcessPoolExecutor, "pass an instance"),
        (42, "got a int"),
    ],
)
def test_an_executor_of_the_wrong_kind_is_refused(
    tmp_path: Path, executor: object, says: str
) -> None:
    exp = gr.Experiment({"a": agent()}, {"x": JOB}, root=tmp_path / "exp")
    with pytest.raises(gr.ConfigError) as caught:
        exp.run(executor, progress=False)
    assert says in str(caught.value)
    assert "concurrent.futures.Executor" in str(caught.value)
    assert not (tmp_path / "exp").exists()


def test_a_multiprocessing_pool_is_named_with_its_replacement(tmp_path: Path) -> None:
    pool = multiprocessing.get_context("spawn").Pool(1)
    try:
        exp = gr.Experiment({"a": agent()}, {"x": JOB}, root=tmp_path / "exp")
        with pytest.raises(gr.ConfigError, match=r"use concurrent\.futures\.ProcessPoolExecutor"):
            exp.run(pool, progress=False)
    finally:
        pool.terminate()


def test_max_concurrency_must_be_a_count(tmp_path: Path) -> None:
    exp = gr.Experiment({"a": agent()}, {"x": JOB}, root=tmp_path / "exp")
    with pytest.raises(gr.ConfigError, match="max_concurrency must be a whole number >= 1"):
        exp.run(max_concurrency=0, progress=False)


def test_the_simulated_agent_goes_to_processes_and_a_model_that_waits_to_the_loop() -> None:
    fast, slow = agent(), gr.Agent(gr.SimulatedModel(latency=0.01))
    assert cpu_bound(fast) and not cpu_bound(slow)
    placement = place(None, {"fast": fast, "slow": slow}, None, cpu_runs=4)
    cores = os.cpu_count() or 1
    assert placement.on_loop == ({"slow"} if cores > 1 else {"fast", "slow"})
    assert placement.executor is None and placement.owned and placement.workers == cores
    assert place(None, {"fast": fast}, None, cpu_runs=1).on_loop == {"fast"}  # one run: no pool
    assert place("loop", {"fast": fast}, 3, cpu_runs=4).loop_concurrency == 3


def test_a_root_holding_another_experiment_is_refused(tmp_path: Path) -> None:
    root, store = tmp_path / "exp", tmp_path / "store.sqlite"
    gr.Experiment({"a": agent()}, {"x": JOB}, root=root, store=store).run("loop", progress=False)
    changed = gr.Experiment({"a": agent("reckless")}, {"x": JOB}, root=root, store=store)
    with pytest.raises(gr.ConfigError, match="agent 'a' differs from this one's"):
        changed.run("loop", progress=False)
    grown = gr.Experiment({"a": agent(), "b": agent()}, {"x": JOB}, 2, root=root, store=store)
    assert len(grown.run("loop", progress=False)) == 4
