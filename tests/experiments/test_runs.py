"""Running a grid: one row per run, own workspaces, one merged store, reproducible."""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import matplotlib
import pytest

import gr_notebook as gr
from gr_notebook.experiments import COLUMNS
from gr_notebook.history.store import Store
from tests.experiments.helpers import JOB

matplotlib.use("Agg")


def grid(tmp_path: Path, repeats: int = 2, **kwargs: object) -> gr.Experiment:
    agents = {
        "bare": gr.Agent("simulated:reckless", max_iterations=80),
        "guarded": gr.Agent(
            "simulated:reckless", policies=[gr.ReadBeforeWritePolicy()], max_iterations=80
        ),
    }
    tmp_path.mkdir(exist_ok=True)
    return gr.Experiment(
        agents,
        {"short": JOB, "guide": gr.examples.QUICKSTART},
        repeats,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_grid_on_the_loop_gives_one_row_per_run_with_every_column(tmp_path: Path) -> None:
    results = grid(tmp_path).run("loop", progress=False)
    frame = results.df
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 8 and results.complete
    assert set(frame.status) == {"completed"} and frame.job_done.all()
    assert (frame.turns > 0).all() and (frame.tokens > 0).all()
    assert frame.cost_usd.isna().all()  # the simulated model has no price
    # the guardrail's decisions are data: the read-before-write policy denied the rewrite
    denials = frame.groupby("agent").denials.sum()
    assert denials["bare"] == 0 and denials["guarded"] > 0
    assert (frame[frame.job == "guide"].phases_completed == 3).all()
    assert frame.guidance_conflicts.eq(0).all()
    assert frame.run_id.is_unique and frame.workspace.is_unique
    assert all(Path(w).is_relative_to(tmp_path / "exp" / "runs") for w in frame.workspace)


def test_each_runs_events_are_one_call_away(tmp_path: Path) -> None:
    results = grid(tmp_path, repeats=1).run("loop", progress=False)
    events = results.events(0)
    assert events[0].kind == "run_started" and events[-1].kind == "run_finished"
    assert results.events(results.records[0].run_id) == events
    assert len(results.events_df(results.records[1])) == len(results.events(1))
    with pytest.raises(gr.ConfigError, match="out of range"):
        results.events(99)


def test_the_same_grid_gives_the_same_runs(tmp_path: Path) -> None:
    figures = ["status", "turns", "tokens", "denials", "phases_completed"]
    first = grid(tmp_path / "a").run("loop", progress=False).df[figures]
    again = grid(tmp_path / "b").run("processes", progress=False).df[figures]
    assert first.equals(again)


def test_process_workers_write_their_own_stores_merged_with_nothing_lost_or_duplicated(
    tmp_path: Path,
) -> None:
    exp = grid(tmp_path, repeats=2)
    results = exp.run(ProcessPoolExecutor(2), progress=False)
    frame = results.df
    assert len(frame) == 8 and set(frame.status) == {"completed"}
    workers = set(frame.worker)
    assert all(not w.endswith(f":{os.getpid()}") for w in workers)
    stores = sorted((tmp_path / "exp" / "stores").glob("*.sqlite"))
    assert 1 <= len(stores) <= 2
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert sorted(runs.run_id) == sorted(frame.run_id)
    with Store(tmp_path / "store.sqlite") as merged:
        total = sum(len(merged.events(r)) for r in frame.run_id)
    per_worker = 0
    for path in stores:
        with Store(path) as own:
            per_worker += sum(len(own.events(r)) for r in own.run_ids())
    assert total == per_worker
    exp._sweep()  # merging again changes nothing
    assert len(gr.runs_df(tmp_path / "store.sqlite")) == 8
    with Store(tmp_path / "store.sqlite") as merged:
        assert sum(len(merged.events(r)) for r in frame.run_id) == total


def test_a_run_from_a_worker_forks_from_the_merged_store(tmp_path: Path) -> None:
    """Checkpoints reference content-addressed blobs, which belong to no run: the merge
    copies them too, so the merged store can fork any run of the experiment."""
    results = grid(tmp_path, repeats=1).run(ProcessPoolExecutor(2), progress=False)
    record = results.records[0]
    with Store(tmp_path / "store.sqlite") as merged:
        blobs = merged._conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
        assert blobs > 0
    agent = gr.Agent("simulated:reckless", max_iterations=80)  # a worker's: not this process's
    fork = gr.fork(
        record.run_id,
        turn=3,
        agent=agent,
        workspace=tmp_path / "fork",
        store=tmp_path / "store.sqlite",
    )
    assert fork.status == "completed"
    started = fork.events.of_kind("run_resumed")[0]
    assert started.data["parent_run_id"] == record.run_id and started.data["parent_turn"] == 3


def test_a_thread_pool_is_an_executor_too(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        results = grid(tmp_path, repeats=1).run(pool, progress=False)
    assert [r.status for r in results.records] == ["completed"] * 4
    assert len(gr.runs_df(tmp_path / "store.sqlite")) == 4


def test_summary_gives_rates_and_means_with_intervals(tmp_path: Path) -> None:
    results = grid(tmp_path, repeats=3).run("loop", progress=False)
    table = results.summary()
    assert list(table.agent) == ["bare", "guarded"]
    row = table.set_index("agent").loc["guarded"]
    assert row.runs == 6 and row.job_done == 1.0
    assert 0.5 < row.job_done_low < 1.0 and row.job_done_high == 1.0  # Wilson at 6 of 6
    assert row.tokens_low <= row.tokens <= row.tokens_high
    assert row.denials > 0 and row.failed == 0.0
    by_job = results.summary(0.9, by=["agent", "job"])
    assert len(by_job) == 4
    with pytest.raises(gr.ConfigError, match=r"summary\(by=...\) takes columns"):
        results.summary(by="colour")


def test_plot_draws_each_agent_with_its_interval(tmp_path: Path) -> None:
    results = grid(tmp_path, repeats=2).run("loop", progress=False)
    ax = results.plot("tokens")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bare", "guarded"]
    assert len(ax.patches) == 2
    grouped = results.plot("job_done", by_job=True)
    assert len(grouped.patches) == 4
    assert [t.get_text() for t in grouped.get_xticklabels()] == ["short", "guide"]
    with pytest.raises(gr.ConfigError, match=r"plot\(\) takes one of"):
        results.plot("colour")
    assert not math.isnan(results.summary().tokens.iloc[0])


def test_a_jobs_toolsets_join_the_agent_once(tmp_path: Path) -> None:
    coding = gr.examples.coding_job()
    exp = gr.Experiment(
        {
            "plain": gr.Agent("simulated:implementer", max_iterations=80),
            "given": gr.Agent("simulated:implementer", tools=coding.toolsets, max_iterations=80),
        },
        {"cells": coding},
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    results = exp.run("loop", progress=False)
    assert [r.status for r in results.records] == ["completed", "completed"]
    for record in results.records:
        tools = {
            e.tool for e in map(gr.events.as_typed, results.events(record)) if e.kind == "tool_call"
        }
        assert "run_tests" in tools
