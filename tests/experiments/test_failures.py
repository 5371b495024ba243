"""A run that raises, a worker that dies, a stop, Ctrl-C and resuming."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.examples import ExampleJob
from gr_notebook.experiments import RunRecord
from gr_notebook.experiments.ledger import Ledger
from gr_notebook.models import ModelRequest, ModelResponse
from tests.experiments.helpers import JOB, KillsItsWorker


def slow_agent(**kwargs: object) -> gr.Agent:
    """Waits a little each turn, so a stop finds runs in flight (and it stays on the loop)."""
    return gr.Agent(gr.SimulatedModel(latency=0.02), max_iterations=60, **kwargs)  # type: ignore[arg-type]


class Calls:
    """A progress reporter that calls ``then`` after the ``after``-th row."""

    def __init__(self, after: int, then: object) -> None:
        self.after, self.then, self.rows = after, then, 0

    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        pass

    def update(self, record: RunRecord) -> None:
        self.rows += 1
        if self.rows == self.after:
            self.then()  # type: ignore[operator]

    def close(self) -> None:
        pass


def test_a_run_that_raises_is_a_failed_row_and_the_others_go_on(tmp_path: Path) -> None:
    broken = ExampleJob(JOB, {"../outside.md": "escapes the workspace"})
    exp = gr.Experiment(
        {"a": gr.Agent(max_iterations=60)},
        {"broken": broken, "fine": JOB},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    for executor in ("loop", "processes"):
        results = exp.run(executor, progress=False, retry_failed=True)
        rows = {(r.job, r.repeat): r for r in results.records}
        assert {rows["fine", i].status for i in (0, 1)} == {"completed"}
        failed = rows["broken", 0]
        assert failed.status == "failed" and not failed.job_done and failed.run_id is None
        assert "WorkspaceError" in (failed.error or "") and "outside the workspace" in failed.error
    with pytest.raises(gr.ConfigError, match="failed before it started"):
        results.events(failed)


def test_a_failing_model_is_a_failed_row_with_its_reason(tmp_path: Path) -> None:
    async def broken(request: ModelRequest) -> ModelResponse:
        raise RuntimeError("the provider is down")

    results = gr.Experiment(
        {"down": gr.Agent(gr.FunctionModel(broken))},
        {"x": JOB},
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    ).run(progress=False)
    (row,) = results.records
    assert row.status == "failed" and "the provider is down" in (row.reason or "")
    assert row.run_id is not None and results.events(row)[-1].kind == "run_finished"


def test_a_worker_that_dies_is_retried_once(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    exp = gr.Experiment(
        {"dies": gr.Agent(KillsItsWorker(str(marks), times=1), max_iterations=60)},
        {"x": JOB},
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    (row,) = exp.run("processes", max_concurrency=1, progress=False).records
    assert row.status == "completed" and row.attempts == 2
    assert len(list(marks.iterdir())) == 1
    # nothing lost: the attempt that died is in the store, shown as interrupted
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert sorted(runs.status) == ["completed", "interrupted"]


def test_a_worker_that_dies_twice_gives_a_failed_row(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    exp = gr.Experiment(
        {
            "dies": gr.Agent(KillsItsWorker(str(marks), times=5), max_iterations=60),
            "fine": gr.Agent(max_iterations=60),
        },
        {"x": JOB},
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    results = exp.run("processes", max_concurrency=1, progress=False)
    rows = {r.agent: r for r in results.records}
    assert rows["fine"].status == "completed"
    assert rows["dies"].status == "failed" and rows["dies"].attempts == 2
    assert "worker died twice" in (rows["dies"].error or "")
    assert len(list(marks.iterdir())) == 2


def test_cancel_stops_cleanly_keeps_what_finished_and_resume_runs_the_rest(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.sqlite"
    exp = gr.Experiment(
        {"a": slow_agent(), "b": slow_agent()},
        {"x": JOB},
        repeats=4,
        root=tmp_path / "exp",
        store=store,
    )
    results = exp.run(max_concurrency=2, progress=Calls(after=2, then=exp.cancel))
    assert exp.stopped == "cancelled"
    finished = [r for r in results.records if r.status == "completed"]
    assert len(finished) >= 2 and not results.complete
    assert {r.status for r in results.records} <= {"completed", "cancelled"}
    assert len(results.records) < 8  # no run started after the stop
    # every run that started is in the store, each in its final state
    stored = gr.runs_df(store)
    assert set(stored.status) <= {"completed", "cancelled"} and len(stored) == len(results)
    # a new process (a new Experiment on the same root) runs only the rest
    again = gr.Experiment(
        {"a": slow_agent(), "b": slow_agent()},
        {"x": JOB},
        repeats=4,
        root=tmp_path / "exp",
        store=store,
    )
    done_before = {r.run_id for r in finished}
    rerun = again.run(max_concurrency=2, progress=False)
    assert rerun.complete and {r.status for r in rerun.records} == {"completed"}
    assert done_before <= {r.run_id for r in rerun.records}
    cancelled_before = [r for r in results.records if r.status == "cancelled"]
    assert all(
        rerun.records[i].attempts == 1
        for i, r in enumerate(rerun.records)
        if r.run_id in done_before
    )
    assert len(gr.runs_df(store)) == 8 + len(cancelled_before)


def test_ctrl_c_stops_every_run_keeps_what_finished_then_raises(tmp_path: Path) -> None:
    exp = gr.Experiment(
        {"a": slow_agent()},
        {"x": JOB},
        repeats=4,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    press = Calls(after=1, then=lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        exp.run(max_concurrency=2, progress=press)
    assert exp.stopped == "interrupted"
    rows = list(Ledger(tmp_path / "exp").load().values())
    assert [r.status for r in rows].count("completed") >= 1
    assert {r.status for r in rows} <= {"completed", "interrupted"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    results = exp.run(max_concurrency=2, progress=False)  # resumes
    assert results.complete and {r.status for r in results.records} == {"completed"}


def test_a_cancelled_process_experiment_keeps_what_finished(tmp_path: Path) -> None:
    exp = gr.Experiment(
        {"a": gr.Agent(max_iterations=60)},
        {"x": JOB, "y": gr.examples.QUICKSTART},
        repeats=3,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    results = exp.run("processes", progress=Calls(after=1, then=exp.cancel))
    assert 1 <= len(results) < 6
    assert len(gr.runs_df(tmp_path / "store.sqlite")) == len(results)
    assert exp.run("processes", progress=False).complete
