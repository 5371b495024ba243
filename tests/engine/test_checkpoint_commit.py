"""When checkpoints reach the store, what a failed write leaves, and that every turn reads
back as it was taken, a field added to a snapshot included."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine import checkpoint as checkpoint_module
from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.examples import QUICKSTART, audit_job
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.checkpoint_store import load_checkpoint
from gr_notebook.history.store import Store
from gr_notebook.models import ModelRequest, ModelResponse


def quickstart(tmp_path: Path) -> gr.Run:
    """The quickstart job on the simulated agent, checkpointed in ``tmp_path/s.sqlite``."""
    return gr.Agent(
        gr.SimulatedModel(),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
        max_iterations=200,
    ).run_sync(QUICKSTART)


def committed_turns(path: Path, run_id: str) -> list[int]:
    """What another connection sees: the turns whose rows are committed."""
    with gr.Store(path) as store:
        return rows.checkpoint_turns(store, run_id)


def test_a_checkpoint_is_in_the_store_while_the_model_call_after_it_is_under_way(
    tmp_path: Path,
) -> None:
    seen: dict[int, list[int]] = {}
    path = tmp_path / "s.sqlite"
    run_ids: list[str] = []

    async def slow(request: ModelRequest) -> ModelResponse:  # turn 4's model call
        await asyncio.sleep(0.2)
        seen[4] = committed_turns(path, run_ids[0])
        return gr.tool_call("list_files")

    script: list[Any] = [gr.tool_call("list_files")] * 3 + [slow, gr.text("done")]
    agent = gr.Agent(gr.ScriptedModel(script), workspace=tmp_path / "ws", store=path)

    async def main() -> gr.Run:
        run = agent.start("List the files.")
        run_ids.append(run.run_id)
        return await run.wait()

    run = asyncio.run(main())
    assert run.status == "ended"
    assert seen[4] == [1, 2, 3, 4]  # committed as taken, not at the run's end
    assert committed_turns(path, run.run_id) == list(range(1, run.turns + 1))


def test_a_row_that_fails_to_write_ends_checkpoints_with_no_gap_and_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = rows.write_checkpoint

    def failing_at_turn_5(store: Store, row: rows.CheckpointRow, blobs: Any) -> int:
        if row.turn >= 5:
            with store.transaction():
                raise sqlite3.OperationalError("disk full")
        return write(store, row, blobs)

    monkeypatch.setattr(checkpoint_module, "write_checkpoint", failing_at_turn_5)
    run = quickstart(tmp_path)
    assert run.status == "completed"
    errors = [(e.data["source"], e.data["error_type"]) for e in run.events if e.kind == "error"]
    assert errors == [("checkpoint", "StoreError")]
    with gr.Store(tmp_path / "s.sqlite") as store:
        assert rows.checkpoint_turns(store, run.run_id) == [1, 2, 3, 4]
        assert load_checkpoint(store, run.run_id, 4).turn == 4  # what is there reads back


def test_a_tool_input_that_is_not_finite_comes_back_as_it_was(tmp_path: Path) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("list_files", weights=[1.5, float("nan"), float("-inf")]), gr.text("ok")]
    )
    store = gr.Store(tmp_path / "s.sqlite")
    run = gr.Agent(model, workspace=tmp_path / "ws", store=store).run_sync("List.")
    checkpoint = load_checkpoint(store, run.run_id, 2)
    (use,) = checkpoint.snapshot["context"]["messages"][1]["content"]
    first, missing, low = use["input"]["weights"]
    assert first == 1.5 and math.isnan(missing) and low == -math.inf
    (record,) = checkpoint.snapshot["guardrails"]["feedback"]["recent"]
    assert math.isnan(record["params"]["weights"][1])
    store.close()


def test_a_written_file_is_one_blob_and_its_call_reads_back_whole(tmp_path: Path) -> None:
    content = "the whole report, " * 200
    model = gr.ScriptedModel(
        [
            gr.tool_call("write_file", path="report.md", content=content),
            gr.tool_call("list_files"),
            gr.text("done"),
        ]
    )
    store = gr.Store(tmp_path / "s.sqlite")
    run = gr.Agent(model, workspace=tmp_path / "ws", store=store).run_sync("Write it.")
    with sqlite3.connect(store.path) as conn:
        (copies,) = conn.execute(
            "SELECT COUNT(*) FROM blobs WHERE size = ?", (len(content),)
        ).fetchone()
    assert copies == 1  # the file, once, though two checkpoints name it
    for turn in (2, 3):
        checkpoint = load_checkpoint(store, run.run_id, turn)
        assert checkpoint.read(checkpoint.files["report.md"]) == content.encode()
        record = checkpoint.snapshot["guardrails"]["feedback"]["recent"][0]
        assert record["params"] == {"path": "report.md", "content": content}
    store.close()


def test_turn_n_reads_its_own_row_and_no_row_before_it(tmp_path: Path) -> None:
    run = quickstart(tmp_path)
    with gr.Store(tmp_path / "s.sqlite") as store:
        whole = load_checkpoint(store, run.run_id, 20)
        with store.transaction() as conn:
            conn.execute("DELETE FROM checkpoints WHERE run_id = ? AND turn < 20", (run.run_id,))
        alone = load_checkpoint(store, run.run_id, 20)
    assert alone.snapshot == whole.snapshot and alone.files == whole.files


class Truth:
    """The run's whole state as each checkpoint was taken, to compare what reads back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.states: dict[int, Any] = {}
        take = Checkpointer._take

        def recording(checkpointer: Checkpointer) -> None:
            self.states[checkpointer.state.turn + 1] = comparable(checkpointer.state.snapshot())
            take(checkpointer)

        monkeypatch.setattr(Checkpointer, "_take", recording)

    def check(self, path: Path, run_id: str) -> list[int]:
        """The committed turns, each asserted to read back as it was taken."""
        with gr.Store(path) as store:
            turns = rows.checkpoint_turns(store, run_id)
            for turn in turns:
                assert (
                    comparable(load_checkpoint(store, run_id, turn).snapshot) == (self.states[turn])
                ), turn
        return turns


def comparable(snapshot: dict[str, Any]) -> Any:
    """A snapshot as JSON, without its events (a checkpoint reads them from the store) and
    its elapsed time (a checkpoint's clock reading is its own)."""
    snapshot = {k: v for k, v in snapshot.items() if k != "events"}
    snapshot["counters"] = {k: v for k, v in snapshot["counters"].items() if k != "elapsed_s"}
    return json.loads(json.dumps(snapshot, default=dict))


@pytest.mark.parametrize("job", ["quickstart", "audit"])
def test_every_turn_of_an_example_job_reads_back_as_it_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    truth = Truth(monkeypatch)
    if job == "quickstart":
        run = quickstart(tmp_path)
    else:
        audit = audit_job()
        run = gr.Agent(
            gr.SimulatedModel(),
            workspace=audit.prepare(tmp_path / "ws"),
            store=tmp_path / "s.sqlite",
            max_iterations=300,
        ).run_sync(audit.instructions)
    assert run.status == "completed"
    assert truth.check(tmp_path / "s.sqlite", run.run_id) == list(range(1, run.turns + 1))


def test_a_field_added_to_a_parts_snapshot_comes_back_on_resume_with_no_other_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a checkpoint keeps is what ``snapshot()`` returns: nothing lists the fields."""
    from gr_notebook.workflow.phases import PhaseController

    to_json, load_json = PhaseController.to_json, PhaseController.load_json
    brought_back: list[Any] = []

    def with_a_new_field(self: PhaseController) -> dict[str, Any]:
        return {**to_json(self), "added_later": [item.title for item in self.todos.items]}

    def reading_it(self: PhaseController, data: Any) -> Any:
        brought_back.append(data.get("added_later"))
        return load_json(self, data)

    monkeypatch.setattr(PhaseController, "to_json", with_a_new_field)
    monkeypatch.setattr(PhaseController, "load_json", reading_it)
    run = quickstart(tmp_path)
    forked = run.fork(turn=10, workspace=tmp_path / "fork")
    assert forked.status == "completed"
    with gr.Store(tmp_path / "s.sqlite") as store:
        saved = load_checkpoint(store, run.run_id, 10).snapshot["phases"]["added_later"]
    assert saved and brought_back == [saved]  # the fork began from turn 10's value


def test_the_feedback_calls_read_back_after_a_person_restores_the_guardrails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run.restore_guardrail_state()`` puts back older call records, whose indexes the
    next calls use again: those calls are logged all the same."""
    truth = Truth(monkeypatch)
    saved: dict[str, Any] = {}
    runs: list[gr.Run] = []

    def save(request: ModelRequest) -> ModelResponse:
        saved["guardrails"] = runs[0].guardrail_state()
        return gr.tool_call("write_file", path="b.txt", content="two")

    def put_back(request: ModelRequest) -> ModelResponse:
        runs[0].restore_guardrail_state(saved["guardrails"])
        return gr.tool_call("write_file", path="c.txt", content="three")

    script: list[Any] = [
        gr.tool_call("write_file", path="a.txt", content="one"),
        save,
        gr.tool_call("list_files"),
        put_back,
        gr.tool_call("list_files"),
        gr.text("done"),
    ]
    path = tmp_path / "s.sqlite"
    agent = gr.Agent(gr.ScriptedModel(script), workspace=tmp_path / "ws", store=path)

    async def main() -> gr.Run:
        run = agent.start("Write three files.")
        runs.append(run)
        return await run.wait()

    run = asyncio.run(main())
    assert run.status == "ended"
    assert truth.check(path, run.run_id) == list(range(1, run.turns + 1))


@pytest.mark.parametrize(
    ("shadow", "turns"), [([], 300), ([gr.InterventionConfig()], 1000)], ids=["live", "shadowed"]
)
def test_a_rows_size_does_not_grow_with_the_run(
    tmp_path: Path, shadow: list[Any], turns: int
) -> None:
    """Messages and seen calls are kept in chunks: a long run's late rows are no larger
    than its early ones, though it has ten times the messages and the calls seen (the
    shadow interventions' seen calls too: kept whole, they made turn 1,000's row 5 times
    turn 30's)."""
    script: list[Any] = [
        gr.tool_call("write_file", path=f"notes/{i % 5}.md", content=f"note {i}\n")
        for i in range(turns)
    ]
    agent = gr.Agent(
        gr.ScriptedModel([*script, gr.text("done")]),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
        interventions=gr.InterventionConfig(),
        max_iterations=turns + 100,
        self_regulation=False,
        shadow=shadow,
    )
    run = agent.run_sync("Write the notes.")
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        sizes = dict(
            conn.execute(
                "SELECT turn, length(state) FROM checkpoints WHERE run_id = ?", (run.run_id,)
            ).fetchall()
        )
    early = statistics.median(sizes[t] for t in range(20, 40))
    late = statistics.median(sizes[t] for t in range(turns - 20, turns))
    assert late < 1.5 * early, (early, late)
