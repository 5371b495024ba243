"""One word, one meaning: a run's status reads the same wherever it is shown (decisions 305,
306, 307). ``completed`` is the job done; ``ended`` is a model that stopped without it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_header, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.experiments.ledger import Ledger
from gr_notebook.experiments.record import RunRecord
from gr_notebook.history.store import Store
from gr_notebook.jupyter.magics import status_line
from tests.test_run_controls import slow_reader, until

Factory = Callable[..., gr.Agent]
FIXTURES = Path(__file__).parent / "history" / "fixtures"
JOB = "# Notes\n\n## Draft\n- Collect the changes\n- Write the highlights\n"


def dashboard_of(run: gr.Run) -> RunTracker:
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    return tracker


def test_a_quitter_without_a_checker_ends_and_says_so_everywhere(tmp_path: Path) -> None:
    agents = {"quitter/bare": gr.Agent("simulated:quitter", max_iterations=120)}
    results = gr.Experiment(
        agents, {"notes": JOB}, 1, root=tmp_path / "exp", store=tmp_path / "store.sqlite"
    ).run("loop", progress=False)
    [row] = results.records
    assert (row.status, row.job_done) == ("ended", False)
    assert str(results) == "<Results: 1 runs (ended 1)>"
    [stored] = gr.runs_df(tmp_path / "store.sqlite").itertuples()
    assert (stored.status, stored.job_status) == ("ended", "ended")

    run = gr.Agent("simulated:quitter", workspace=tmp_path / "ws", store=False).run_sync(JOB)
    assert run.status == "ended" and run.done and run.job is None
    assert run.todos.remaining > 0  # it quit in phase 1
    assert run.summary()["status"] == "ended"
    assert status_line(run).startswith(f"Run {run.run_id}: ended (the model ended its turn);")
    assert repr(run).startswith(f"<Run {run.run_id} ended (the model ended its turn):")
    state = dashboard_of(run).snapshot(run)
    assert state.status == "ended" and state.ended_early
    assert ">ended</span>" in render_header(state)
    assert text_dashboard(state).startswith(f"Run {run.run_id}: ended (")
    [finished] = run.events.of_kind("run_finished")
    assert finished.data["status"] == "ended"


def test_an_agent_that_reports_the_job_completes(make_agent: Factory) -> None:
    run = make_agent("simulated:literal", max_iterations=400).run_sync(JOB)
    assert run.status == "completed" and run.job is not None and run.job.source == "model"
    assert status_line(run).startswith(f"Run {run.run_id}: completed;")
    assert dashboard_of(run).snapshot(run).note is None


def test_a_stop_the_checker_accepts_is_the_job_recorded_complete(
    make_agent: Factory, tmp_path: Path
) -> None:
    """Without a plan or job_complete, the agent's checker is what says the job is done."""
    checker = gr.FileOutputChecker(["report.md"])
    script = [
        gr.text("Nothing written yet."),  # refused: report.md is missing
        gr.tool_call("write_file", path="report.md", content="# Report\n"),
        gr.text("report.md is written."),
    ]
    run = make_agent(gr.ScriptedModel(script), task_completion_checker=checker).run_sync("job")
    assert run.status == "completed" and run.job is not None
    assert (run.job.summary, run.job.source) == ("report.md is written.", "completion_check")
    assert list(run.completion_df().complete) == [False, True]
    with Store(tmp_path / "store.sqlite") as store:
        [row] = store.runs()
    assert (row["status"], row["job_status"], row["summary"]) == (
        "completed",
        "completed",
        "report.md is written.",
    )


async def test_a_paused_background_run_says_paused_everywhere(make_agent: Factory) -> None:
    run = make_agent(slow_reader(60), interventions=None).start("job")
    await until(lambda: run.turns >= 2)
    run.pause()
    assert run.status == "pausing" and not run.done
    await until(lambda: run.paused)
    assert run.status == "paused" and not run.done
    assert status_line(run).startswith(f"Run {run.run_id}: paused;")
    state = dashboard_of(run).snapshot(run)
    assert state.status == "paused" and state.settled
    assert run.summary()["status"] == "paused"
    run.unpause()
    assert run.status == "running"
    await run.wait()
    assert run.status == "ended" and run.done


async def test_a_stopping_run_says_stopping_until_it_has_ended(make_agent: Factory) -> None:
    run = make_agent(slow_reader(60), interventions=None).start("job")
    await until(lambda: run.turns >= 2)
    run.pause()
    await until(lambda: run.paused)
    run.cancel("enough")
    assert run.status == "stopping" and not run.done
    await run.wait()
    assert run.status == "cancelled" and run.reason == "enough"


def test_an_ended_run_is_not_resumed(make_agent: Factory, tmp_path: Path) -> None:
    run = make_agent(gr.ScriptedModel([gr.tool_call("list_files"), gr.text("bye")])).run_sync("j")
    assert run.status == "ended"
    with pytest.raises(gr.RunError, match=r"ended: its model ended its turn .* gr\.fork\("):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")


def test_a_store_written_before_ended_reads_its_quit_run_as_ended(tmp_path: Path) -> None:
    """The fixture's run was stored ``completed`` with its job row ``stopped``: a model that
    ended its turn with no job. It reads ``ended``, and the file is left as it was."""
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store_checkpoints_v1.sqlite", path)
    with sqlite3.connect(path) as raw:
        before = raw.execute("SELECT r.status, j.status FROM runs r JOIN jobs j USING (run_id)")
        assert before.fetchall() == [("completed", "stopped")]
    [row] = gr.runs_df(path).itertuples()
    assert (row.status, row.job_status) == ("ended", "ended")
    with sqlite3.connect(path) as raw:
        after = raw.execute("SELECT r.status, j.status FROM runs r JOIN jobs j USING (run_id)")
        assert after.fetchall() == [("completed", "stopped")]
    with pytest.raises(gr.RunError, match="ended: its model ended its turn"):
        gr.resume(row.run_id, store=path)


def test_a_ledger_row_written_before_ended_reads_as_ended(tmp_path: Path) -> None:
    base = {"agent": "quitter/bare", "job": "notes", "seed": 0, "reason": None, "error": None}
    rows = [
        {**base, "repeat": 0, "status": "completed", "job_done": False},
        {**base, "repeat": 1, "status": "completed", "job_done": True},
        {**base, "repeat": 2, "status": "budget_exhausted", "job_done": False},
    ]
    ledger = Ledger(tmp_path)
    ledger.path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    read = sorted(ledger.load().values(), key=lambda r: r.repeat)
    assert [(r.status, r.job_done) for r in read] == [
        ("ended", False),
        ("completed", True),
        ("budget_exhausted", False),
    ]
    assert RunRecord.from_dict(read[0].to_dict()) == read[0]


def test_a_live_run_is_not_done_whatever_its_status_says(make_agent: Factory) -> None:
    async def main() -> tuple[str, bool, gr.Run]:
        run = make_agent(slow_reader(5)).start("job")
        status, done = run.status, run.done
        return status, done, await run.wait()

    status, done, run = asyncio.run(main())
    assert (status, done) == ("running", False)
    assert run.done and run.outcome is not None and run.status == run.outcome.status
