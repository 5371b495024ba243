"""Workers' stores merged into one: keyed, idempotent, any number of them."""

from __future__ import annotations

import shutil
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import gr_notebook as gr
from gr_notebook.events import Event
from gr_notebook.experiments.executors import payload, place
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.stores import Merger
from gr_notebook.experiments.worker import CANCEL_FILE, RunTask, run_task
from gr_notebook.history.store import Store
from tests.experiments.helpers import JOB


def worker_store(path: Path, run_id: str, events: int, status: str = "running") -> None:
    with Store(path) as store:
        store.record_run_started(
            run_id, started_at=1.0, model="m", workspace="w", instructions="i", config={}
        )
        for seq in range(events):
            store.record_event(run_id, Event(seq, "note", 0, 0, 1.0, {"n": seq}))
        if status != "running":
            store.record_run_finished(run_id, status=status, finished_at=2.0)


def test_many_worker_stores_merge_into_one_each_run_once(tmp_path: Path) -> None:
    sources = [tmp_path / f"w{i}.sqlite" for i in range(Merger.MAX_ATTACHED + 3)]
    for i, source in enumerate(sources):
        worker_store(source, f"run-{i}", events=i + 1, status="completed")
    target = tmp_path / "merged.sqlite"
    with Merger(target) as merger:
        for i, source in enumerate(sources):
            assert merger.merge(source, [f"run-{i}"]) == 1
        for source in sources:  # again, whole: nothing changes
            merger.merge(source)
    with Store(target) as merged:
        assert sorted(merged.run_ids()) == sorted(f"run-{i}" for i in range(len(sources)))
        assert [len(merged.events(f"run-{i}")) for i in range(len(sources))] == [
            i + 1 for i in range(len(sources))
        ]


def test_a_worker_store_an_earlier_version_wrote_merges_as_it_did(tmp_path: Path) -> None:
    """Its checkpoints are in the earlier format: the runs and events merge, read or not."""
    fixture = Path(__file__).parent.parent / "history" / "fixtures" / "store_checkpoints_v1.sqlite"
    untouched, opened = tmp_path / "untouched.sqlite", tmp_path / "opened.sqlite"
    shutil.copy(fixture, untouched)
    shutil.copy(fixture, opened)
    Store(opened).close()  # opened by this version first: migrated
    for source in (untouched, opened):
        target = tmp_path / f"merged-{source.stem}.sqlite"
        with Merger(target) as merger:
            assert merger.merge(source) == 1
        with Store(target) as merged:
            (run_id,) = merged.run_ids()
            assert len(merged.events(run_id)) == 27


def test_a_run_merged_while_running_is_updated_when_merged_again(tmp_path: Path) -> None:
    source, target = tmp_path / "worker.sqlite", tmp_path / "merged.sqlite"
    worker_store(source, "r", events=2)
    with Merger(target) as merger:
        merger.merge(source)
        with Store(source) as store:
            store.record_event("r", Event(2, "note", 0, 0, 1.0, {"n": 2}))
            store.record_run_finished("r", status="completed", finished_at=3.0)
        merger.merge(source)
    with Store(target) as merged:
        (run,) = merged.runs()
        assert run["status"] == "ended" and run["finished_at"] == 3.0
        assert len(merged.events("r")) == 3


def test_a_task_due_after_a_stop_runs_nothing(tmp_path: Path) -> None:
    root = tmp_path / "exp"
    root.mkdir()
    (root / CANCEL_FILE).write_text("cancelled")
    data = payload("a", gr.Agent(max_iterations=40), "x", gr.examples.ExampleJob(JOB))
    assert run_task(RunTask(RunSpec("a", "x", 0, 0), data, str(root))) is None
    assert not (root / "runs").exists()


def test_runs_wait_ahead_of_workers_except_in_a_process_pool() -> None:
    agents = {"a": gr.Agent(max_iterations=40)}
    with ThreadPoolExecutor(3) as threads, ProcessPoolExecutor(2) as processes:
        assert place(threads, agents, None, 4).in_flight == 6
        assert place(threads, agents, 2, 4).in_flight == 4
        assert place(processes, agents, None, 4).in_flight == 2
    assert place("processes", agents, 1, 4).in_flight == 1
