"""When checkpoints reach the store, what a failed batch leaves, and the state keys that
spare a checkpoint the parts that did not change."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine import checkpoint as checkpoint_module
from gr_notebook.engine.checkpoint import FLUSH_AFTER_S, Checkpointer, load_checkpoint
from gr_notebook.examples import QUICKSTART, audit_job
from gr_notebook.history import checkpoint_store as rows
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
        await asyncio.sleep(4 * FLUSH_AFTER_S)
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
    assert seen[4] == [1, 2, 3, 4]  # turns 2-4 waited at most 50 ms, not for the run's end
    assert committed_turns(path, run.run_id) == list(range(1, run.turns + 1))


def test_a_fast_run_commits_its_rows_together_and_none_waits_past_the_bound(
    tmp_path: Path,
) -> None:
    """Turns of a few milliseconds commit their rows about 20 times a second (decision
    281), not at every turn; no row waits for long, and the first goes at once."""
    path = tmp_path / "s.sqlite"
    turns = 400
    seen: list[tuple[float, int]] = []  # (when, the newest committed turn then)
    run_ids: list[str] = []

    def look(event: gr.Event) -> None:
        if event.kind == "model_call":
            committed = committed_turns(path, run_ids[0])
            seen.append((time.time(), committed[-1] if committed else 0))

    agent = gr.Agent(
        gr.ScriptedModel([gr.tool_call("list_files")] * turns + [gr.text("done")]),
        workspace=tmp_path / "ws",
        store=path,
        max_iterations=2 * turns,
        stuck_turns=None,
        interventions=gr.InterventionConfig(consecutive_stuck_tolerance=turns),
    )

    async def main() -> gr.Run:
        run = agent.start("List the files.")
        run_ids.append(run.run_id)
        run.subscribe(look)
        return await run.wait()

    run = asyncio.run(main())
    assert run.status == "ended"
    assert committed_turns(path, run.run_id) == list(range(1, run.turns + 1))
    taken = checkpoint_times(path, run.run_id)
    assert seen[0][1] == 1  # the first row rode with the first event
    commits = len({newest for _when, newest in seen})
    assert commits < turns / 4, commits  # rows went together, not one commit each
    # A row is committed with the first event at least FLUSH_AFTER_S after the last
    # commit: no row waits much past the bound (the slack is one slow turn on a busy
    # machine), whatever the machine's speed.
    for when, newest in seen:
        waiting = [t for turn, t in taken.items() if turn > newest and t < when]
        assert not waiting or when - min(waiting) < FLUSH_AFTER_S + 0.25, (when, newest)


def checkpoint_times(path: Path, run_id: str) -> dict[int, float]:
    with gr.Store(path) as store:
        return {row.turn: row.time for row in rows.checkpoint_rows(store, run_id)}


def test_a_row_that_fails_to_write_ends_checkpoints_with_no_gap_and_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert = rows.insert_checkpoints

    def failing_at_turn_5(
        conn: sqlite3.Connection, batch: list[rows.CheckpointRow], blobs: list[rows.BlobRow]
    ) -> None:
        insert(conn, [row for row in batch if row.turn < 5], blobs)  # as executemany stops
        if any(row.turn >= 5 for row in batch):
            raise sqlite3.OperationalError("disk full")

    monkeypatch.setattr(checkpoint_module.rows, "insert_checkpoints", failing_at_turn_5)
    run = quickstart(tmp_path)
    assert run.status == "completed"
    errors = [(e.data["source"], e.data["error_type"]) for e in run.events if e.kind == "error"]
    assert errors == [("checkpoint", "StoreError")]
    with gr.Store(tmp_path / "s.sqlite") as store:
        assert rows.checkpoint_turns(store, run.run_id) == [1, 2, 3, 4]
        assert load_checkpoint(store, run.run_id, 4).turn == 4  # what is there reads back


def test_a_row_is_kept_as_text(tmp_path: Path) -> None:
    run = gr.Agent(
        gr.ScriptedModel([gr.tool_call("list_files"), gr.text("done")]),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
    ).run_sync("List the files.")
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        types = conn.execute(
            "SELECT DISTINCT typeof(state) FROM checkpoints WHERE run_id = ?", (run.run_id,)
        ).fetchall()
    assert types == [("text",)]


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


@pytest.mark.parametrize("job", ["quickstart", "audit"])
def test_a_state_key_that_did_not_change_means_a_part_that_did_not(
    tmp_path: Path, job: str
) -> None:
    """Equal keys must mean equal JSON, or a checkpoint would miss a change."""
    take = Checkpointer._take
    last: dict[str, tuple[object, Any]] = {}
    compared = {"phases": 0, "regulation": 0}

    def checking(self: Checkpointer) -> None:
        state = self.state
        assert state.regulation is not None
        now = {
            "phases": (state.phases.state_key(), state.phases.to_json()),
            "regulation": (state.regulation.state_key(), state.regulation.to_json()),
        }
        for name, (key, part) in now.items():
            if name in last and last[name][0] == key:
                assert last[name][1] == part, f"{name} changed under the same key"
                compared[name] += 1
        last.update(now)
        take(self)

    Checkpointer._take = checking  # type: ignore[method-assign]
    try:
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
    finally:
        Checkpointer._take = take  # type: ignore[method-assign]
    assert run.status == "completed"
    assert compared["phases"] > 5 and compared["regulation"] > 5  # the keys were put to use


def test_a_written_file_is_in_a_row_once_and_its_call_reads_back_whole(tmp_path: Path) -> None:
    content = "the whole report, " * 200
    model = gr.ScriptedModel(
        [gr.tool_call("write_file", path="report.md", content=content), gr.text("done")]
    )
    store = gr.Store(tmp_path / "s.sqlite")
    run = gr.Agent(model, workspace=tmp_path / "ws", store=store).run_sync("Write it.")
    with sqlite3.connect(store.path) as conn:
        (state,) = conn.execute(
            "SELECT state FROM checkpoints WHERE run_id = ? AND turn = 2", (run.run_id,)
        ).fetchone()
    assert state.count(content) == 1  # in the message; the call's record names it
    (record,) = load_checkpoint(store, run.run_id, 2).snapshot["guardrails"]["feedback"]["recent"]
    assert record["params"] == {"path": "report.md", "content": content}
    store.close()


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


def test_rows_whose_event_could_not_be_stored_go_with_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event a batch of rows rides with fails (busy past the timeout, disk full):
    SQLite undoes the rows with it, and they are written again with the next commit."""
    truth = Truth(monkeypatch)
    execute = Store._execute
    carried: list[str] = []

    def failing_once(store: Store, sql: str, params: Any = ()) -> Any:
        if store._deferred and sql.startswith("INSERT INTO events"):
            carried.append(sql)
            if len(carried) == 2:  # the second event that carries rows cannot be stored
                sql = sql.replace("INSERT INTO events", "INSERT INTO no_such_table")
        return execute(store, sql, params)

    monkeypatch.setattr(Store, "_execute", failing_once)
    monkeypatch.setattr(checkpoint_module, "FLUSH_AFTER_S", 0.0)  # each row rides an event
    run = quickstart(tmp_path)
    assert run.status == "completed"
    assert not [e for e in run.events if e.kind == "error" and e.data["source"] == "checkpoint"]
    assert truth.check(tmp_path / "s.sqlite", run.run_id) == list(range(1, run.turns + 1))


def test_rows_that_fail_twice_end_checkpoints_with_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth = Truth(monkeypatch)
    execute = Store._execute
    carried: list[str] = []

    def failing_from_the_second(store: Store, sql: str, params: Any = ()) -> Any:
        if store._deferred and sql.startswith("INSERT INTO events"):
            carried.append(sql)
            if len(carried) >= 2:
                sql = sql.replace("INSERT INTO events", "INSERT INTO no_such_table")
        return execute(store, sql, params)

    monkeypatch.setattr(Store, "_execute", failing_from_the_second)
    monkeypatch.setattr(checkpoint_module, "FLUSH_AFTER_S", 0.0)  # each row rides an event
    run = quickstart(tmp_path)
    assert run.status == "completed"
    errors = [e for e in run.events if e.kind == "error" and e.data["source"] == "checkpoint"]
    assert [e.data["error_type"] for e in errors] == ["StoreError"]
    assert "twice" in errors[0].data["message"]
    committed = truth.check(tmp_path / "s.sqlite", run.run_id)  # what is there reads back
    assert committed == list(range(1, len(committed) + 1)) and len(committed) < run.turns


def test_the_feedback_calls_read_back_after_a_person_restores_the_guardrails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run.restore()`` puts back older call records, whose indexes the next calls use
    again: those calls are logged all the same."""
    truth = Truth(monkeypatch)
    saved: dict[str, Any] = {}
    runs: list[gr.Run] = []

    def save(request: ModelRequest) -> ModelResponse:
        saved["guardrails"] = runs[0].snapshot()
        return gr.tool_call("write_file", path="b.txt", content="two")

    def put_back(request: ModelRequest) -> ModelResponse:
        runs[0].restore(saved["guardrails"])
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
