"""Issue 28's experiment faults: a shared folder, a huge grid, a dead worker's neighbours,
bad confidence levels, a ledger line that is not a row, and a root that is a file."""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.experiments import Results, RunRecord
from gr_notebook.experiments.ledger import Ledger
from tests.experiments.helpers import JOB, Announces, KillsItsWorkerAfter

ROOT = Path(__file__).resolve().parents[2]
HOLDER_FILE = ".lock.json"
"""Beside the lock, the record of who holds it (the lock file itself is truncated on opening)."""


def slow_agent(latency: float = 0.02) -> gr.Agent:
    """Waits a little each turn, so a run is still going when the next thing happens."""
    return gr.Agent(gr.SimulatedModel(latency=latency), max_iterations=60)


def experiment(tmp_path: Path, repeats: int = 2, **agents: gr.Agent) -> gr.Experiment:
    return gr.Experiment(
        agents or {"a": slow_agent()},
        {"x": JOB},
        repeats=repeats,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )


# -- 2. one experiment at a time in a folder ------------------------------------------------------


async def taken(tmp_path: Path) -> None:
    """Wait until the experiment running on this loop has started its runs."""
    deadline = time.monotonic() + 10
    while not (tmp_path / "exp" / "runs").exists():
        assert time.monotonic() < deadline, "the first experiment never took its folder"
        await asyncio.sleep(0.01)


def test_a_second_experiment_on_a_running_folder_is_refused_in_one_process(
    tmp_path: Path,
) -> None:
    first, second = experiment(tmp_path), experiment(tmp_path)

    async def main() -> tuple[Results, list[BaseException]]:
        running = asyncio.ensure_future(first.arun("loop", progress=False))
        await taken(tmp_path)
        refused = []
        for other in (second, first):  # another object, and the same one run twice at once
            try:
                await other.arun("loop", progress=False)
            except gr.GrNotebookError as exc:
                refused.append(exc)
        return await running, refused

    results, refused = asyncio.run(main())
    assert len(refused) == 2 and all(isinstance(e, gr.RunError) for e in refused)
    message = str(refused[0])
    assert str(tmp_path / "exp") in message and f"process {os.getpid()}" in message
    assert socket.gethostname() in message and "this process" in message
    assert "'experiment'" in message and "since" in message
    # the first experiment was not disturbed: every cell ran once, to the end
    assert results.complete and {r.status for r in results.records} == {"completed"}
    assert [r.attempts for r in results.records] == [1, 1]
    assert len(gr.runs_df(tmp_path / "store.sqlite")) == 2
    # once it ended, the folder is free again, and nothing is left to run
    assert second.run("loop", progress=False).complete
    assert not (tmp_path / "exp" / HOLDER_FILE).exists()


CHILD = """
import sys
import gr_notebook as gr
from tests.experiments.helpers import JOB
root, store = sys.argv[1], sys.argv[2]
agent = gr.Agent(gr.SimulatedModel(latency=0.05), max_iterations=60)
results = gr.Experiment({"a": agent}, {"x": JOB}, repeats=2, root=root, store=store).run(
    "loop", progress=False
)
print(sorted(r.status for r in results.records))
"""


def start_child(tmp_path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "exp"), str(tmp_path / "child.sqlite")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "exp" / "runs").exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the child never took the folder: {child.communicate()}")
        time.sleep(0.02)
    return child


def test_a_second_experiment_on_a_running_folder_is_refused_across_processes(
    tmp_path: Path,
) -> None:
    """About 2 s: a real second process, which imports the package and runs two runs."""
    child = start_child(tmp_path)
    try:
        with pytest.raises(gr.RunError) as refused:
            experiment(tmp_path, a=slow_agent(0.05)).run("loop", progress=False)
    finally:
        out, err = child.communicate(timeout=60)
    message = str(refused.value)
    assert f"process {child.pid} on {socket.gethostname()}" in message
    assert "this process" not in message and "cancel()" in message
    # the child's experiment ran each cell once, untouched by the refused one
    assert child.returncode == 0, err
    assert out.strip().splitlines()[-1] == "['completed', 'completed']"
    rows = Ledger(tmp_path / "exp").load()
    assert sorted(r.attempts for r in rows.values()) == [1, 1]
    assert not (tmp_path / "store.sqlite").exists()  # the refused one created nothing


def test_a_lock_left_by_a_killed_experiment_is_not_in_the_way(tmp_path: Path) -> None:
    child = start_child(tmp_path)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)
    assert (tmp_path / "exp" / HOLDER_FILE).exists()  # its record is stale, not its lock
    results = experiment(tmp_path, a=slow_agent(0.05)).run("loop", progress=False)
    assert results.complete and {r.status for r in results.records} == {"completed"}


def test_cancel_from_an_experiment_that_is_not_running_leaves_the_folder_alone(
    tmp_path: Path,
) -> None:
    first, idle = experiment(tmp_path), experiment(tmp_path)

    async def main() -> Results:
        running = asyncio.ensure_future(first.arun("loop", progress=False))
        await taken(tmp_path)
        with pytest.warns(UserWarning, match="not running, so there is nothing to stop"):
            idle.cancel()  # not the one running: it must not stop it
        return await running

    results = asyncio.run(main())
    assert results.complete and {r.status for r in results.records} == {"completed"}


# -- 3. a huge grid is refused at once ------------------------------------------------------------


def test_a_grid_past_the_bound_is_refused_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(gr.ConfigError, match=r"1,000,000,000 runs.*at most 100,000"):
        experiment(tmp_path, repeats=10**9)
    with pytest.raises(gr.ConfigError, match="at most 100,000"):
        gr.Experiment(
            {f"v{i}": gr.Agent() for i in range(20)},
            {f"j{i}": JOB for i in range(100)},
            repeats=51,
            root=tmp_path / "exp",
        )
    assert time.monotonic() - started < 10
    from gr_notebook.experiments.grid import MAX_RUNS

    assert MAX_RUNS == 100_000
    assert len(experiment(tmp_path, repeats=MAX_RUNS).grid) == MAX_RUNS  # the bound itself
    assert not (tmp_path / "exp").exists()


# -- 9. a dead worker charges the run that killed it ----------------------------------------------


def test_a_worker_that_dies_charges_only_the_run_that_killed_it(tmp_path: Path) -> None:
    """About 3 s: three process pools, one per death."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two workers running at once")
    marks, flag = tmp_path / "marks", tmp_path / "fine-started"
    exp = experiment(
        tmp_path,
        repeats=1,
        dies=gr.Agent(KillsItsWorkerAfter(str(marks), str(flag), times=5), max_iterations=60),
        fine=gr.Agent(Announces(str(flag)), max_iterations=60),
    )
    # a pool whose two workers are both up (and watched by the pool), so the first death
    # comes while the fine run is running beside the one that dies
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    try:
        assert sorted(pool.map(abs, [-1, -2])) == [1, 2]
        results = exp.run(pool, progress=False)
    finally:
        pool.shutdown()
    rows = {r.agent: r for r in results.records}
    assert rows["fine"].status == "completed", rows["fine"].error
    assert rows["fine"].attempts == 2  # it was running when the pool broke: retried, free
    assert rows["dies"].status == "failed" and "worker died twice" in (rows["dies"].error or "")
    # the pool broke once under both (no one charged), then the killer died twice alone
    assert len(list(marks.iterdir())) == 3 and rows["dies"].attempts == 3
    stored = list(gr.runs_df(tmp_path / "store.sqlite").status)  # every attempt, dead or not
    assert stored.count("completed") == 1 and set(stored) == {"completed", "interrupted"}


# -- 17. a bad confidence level -------------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.5, math.nan, math.inf, True, "0.95"])
def test_summary_refuses_a_confidence_outside_0_to_1_with_a_config_error(
    tmp_path: Path, confidence: object
) -> None:
    spec_rows = [
        RunRecord("a", "x", i, i, "completed", None, None, True, turns=3 + i) for i in range(3)
    ]
    results = Results(spec_rows, grid=[r.spec for r in spec_rows], store=tmp_path / "s.sqlite")
    with pytest.raises(gr.ConfigError, match="confidence must be a number between 0 and 1"):
        results.summary(confidence)  # type: ignore[arg-type]
    with pytest.raises(gr.ConfigError, match="confidence must be a number between 0 and 1"):
        results.plot(confidence=confidence)  # type: ignore[arg-type]
    assert len(results.summary(0.9)) == 1


# -- 18. a ledger line that is JSON but not a row -------------------------------------------------


def test_a_ledger_line_that_is_not_an_object_is_skipped_and_said(tmp_path: Path) -> None:
    exp = experiment(tmp_path, repeats=2, a=gr.Agent(max_iterations=60))
    first = exp.run("loop", progress=False)
    ledger = tmp_path / "exp" / "results.jsonl"
    lines = ledger.read_text().splitlines()
    bad = ["[1, 2]", "42", "null", '"text"', '{"agent": 1}', '{"agent": "a", "job": "x"']
    ledger.write_text("\n".join([lines[0], *bad, lines[1]]) + "\n")
    with pytest.warns(UserWarning, match=r"6 lines \(2, 3, 4, 5, 6, 7\) are not rows.*skipped"):
        again = gr.Experiment(
            {"a": gr.Agent(max_iterations=60)},
            {"x": JOB},
            repeats=2,
            root=tmp_path / "exp",
            store=tmp_path / "store.sqlite",
        ).run("loop", progress=False)
    assert [r.run_id for r in again.records] == [r.run_id for r in first.records]


def test_a_row_after_a_line_cut_short_is_kept(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    row = RunRecord("a", "x", 0, 0, "completed", None, None, True)
    ledger.path.write_text('{"agent": "a", "job"')  # a crash mid-line, no newline
    ledger.append(row)
    with pytest.warns(UserWarning, match="line 1 is not a row.*was skipped"):
        loaded = ledger.load()
    assert repr(loaded) == repr({row.spec.key: row})  # repr: cost_usd is nan


# -- 19. a root that is a file --------------------------------------------------------------------


def test_a_root_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    afile = tmp_path / "exp"
    afile.write_text("not a folder")
    with pytest.raises(gr.ConfigError, match="is a file, not a folder"):
        experiment(tmp_path)
    with pytest.raises(gr.ConfigError, match="is a file, not a folder"):
        gr.Experiment({"a": gr.Agent()}, {"x": JOB}, root=afile / "inner")
    # made a file after the experiment was built: refused when it runs, nothing written
    afile.unlink()
    exp = experiment(tmp_path, a=gr.Agent(max_iterations=60))
    afile.write_text("not a folder")
    with pytest.raises(gr.ConfigError, match="cannot be made a folder"):
        exp.run("loop", progress=False)
    assert afile.read_text() == "not a folder"
