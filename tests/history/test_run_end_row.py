"""The store's ``error`` column holds why a run failed or was stopped; a run the model
ended (``ended``), like a ``completed`` one, is no error and leaves it empty."""

from __future__ import annotations

from pathlib import Path

import gr_notebook as gr
from tests.conftest import agent_at


def test_an_ended_run_has_no_error_and_its_reason_stays_in_run_finished(tmp_path: Path) -> None:
    run = agent_at(tmp_path, gr.ScriptedModel([gr.text("All done, I think.")])).run_sync("job")
    assert run.status == "ended"
    [row] = gr.runs_df(tmp_path / "store.sqlite").to_dict("records")
    assert row["status"] == "ended"
    assert row["error"] is None
    finished = run.events.of_kind("run_finished")[-1]
    assert finished.data["reason"] == "the model ended its turn"


def test_a_stopped_run_keeps_its_reason_in_the_error_column(tmp_path: Path) -> None:
    script = [gr.tool_call("list_files")] * 5
    run = agent_at(tmp_path, gr.ScriptedModel(script), max_iterations=2).run_sync("job")
    assert run.status == "budget_exhausted"
    [row] = gr.runs_df(tmp_path / "store.sqlite").to_dict("records")
    assert row["status"] == "budget_exhausted" and row["error"] == run.reason
