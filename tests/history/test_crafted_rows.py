"""Crafted store rows: every row the store reads back (events, runs, checkpoints, blobs,
folders, lineage) that is malformed ends as a StoreError naming the run, the turn and what
is wrong, through the public paths, never as a raw ValueError, AttributeError or
RecursionError, nor as a hang."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.examples import QUICKSTART
from gr_notebook.history import checkpoint_store as rows

DEEP = "[" * 200_000 + "]" * 200_000
"""Past any recursion limit: stdlib json raises RecursionError on it."""


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, gr.Run, gr.Agent]]:
    """A completed quickstart run with its checkpoints; turn 1's is a row of its own."""
    agent = gr.Agent(
        gr.SimulatedModel(),
        store=tmp_path / "store.sqlite",
        workspace=tmp_path / "ws",
        max_iterations=200,
    )
    run = agent.run_sync(QUICKSTART)
    assert run.status == "completed"
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        (last,) = conn.execute(
            "SELECT last_turn FROM checkpoints WHERE run_id = ? AND turn = 1", (run.run_id,)
        ).fetchone()
    assert last is None
    yield tmp_path / "store.sqlite", run, agent
    store = agent.open_store()
    if store is not None:
        store.close()


def craft(path: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


def craft_root(path: Path, run_id: str, content: bytes, turn: int = 1) -> None:
    """Make ``content`` the root folder blob of ``turn``'s checkpoint, under its true hash."""
    digest = rows.digest_of(content)
    craft(path, "INSERT OR IGNORE INTO blobs VALUES (?, ?, 0, ?)", digest, len(content), content)
    craft(
        path, "UPDATE checkpoints SET files = ? WHERE run_id = ? AND turn = ?", digest, run_id, turn
    )


def a_file_digest(path: Path, run_id: str) -> str:
    """The hash of a file the run's turn-1 workspace holds."""
    with gr.Store(path) as store:
        row = rows.checkpoint(store, run_id, 1)
        assert row is not None
        root = json.loads(rows.blob(store, row.files))
    return next(child for name, child in root.items() if not name.endswith("/"))


def fork_turn_1(path: Path, run: gr.Run, agent: gr.Agent, tmp_path: Path) -> gr.Run:
    return gr.fork(run.run_id, 1, agent, store=path, workspace=tmp_path / "fork")


# -- folder blobs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "wrong"),
    [
        (b"not json at all", "not JSON"),
        (b'["plan.md"]', "a JSON array, not an object"),
        (DEEP.encode(), "nested too deep"),
        (b'{"plan.md": 5}', "hash"),
        (b'{"plan.md": ["x"]}', "hash"),
        (b'{"": "0123"}', "not a file name"),
        (b'{"..": "0123"}', "not a file name"),
        (b'{"a/b.md": "0123"}', "not a file name"),
        (b"\xff\xfe not utf-8", "not JSON"),
    ],
)
def test_a_crafted_folder_blob_is_a_store_error_naming_the_turn(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, content: bytes, wrong: str
) -> None:
    path, run, agent = recorded
    craft_root(path, run.run_id, content)
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}") as caught:
        fork_turn_1(path, run, agent, tmp_path)
    assert wrong in str(caught.value)
    assert "restore it from a copy" in str(caught.value)
    assert not (tmp_path / "fork").exists()  # nothing was written


def test_a_nul_in_a_folder_blobs_name_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    path, run, agent = recorded
    digest = a_file_digest(path, run.run_id)
    craft_root(path, run.run_id, json.dumps({"plan\u0000.md": digest}).encode())
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*NUL"):
        fork_turn_1(path, run, agent, tmp_path)


def test_a_folder_blob_that_names_a_folder_over_and_over_ends_at_once(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    """Each folder names the next one twice: 2**40 paths from 40 small blobs. The walk stops
    at a bound instead of hanging."""
    path, run, agent = recorded
    child = json.dumps({"f.md": a_file_digest(path, run.run_id)}).encode()
    for _ in range(40):
        digest = rows.digest_of(child)
        craft(path, "INSERT OR IGNORE INTO blobs VALUES (?, ?, 0, ?)", digest, len(child), child)
        child = json.dumps({"a/": digest, "b/": digest}).encode()
    craft_root(path, run.run_id, child)
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*more than"):
        fork_turn_1(path, run, agent, tmp_path)


# -- checkpoint rows ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "wrong"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "a JSON array, not an object"),
        (DEEP, "nested too deep"),
        ('{"inline": [], "appended": {}, "counters": {}}', "inline"),
        ('{"inline": {}, "changed": [1], "appended": {}, "counters": {}}', "changed"),
        ('{"inline": {}, "appended": [], "counters": {}}', "appended"),
    ],
)
def test_a_crafted_checkpoint_row_is_a_store_error_naming_the_turn(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, state: str, wrong: str
) -> None:
    path, run, agent = recorded
    craft(path, "UPDATE checkpoints SET state = ? WHERE run_id = ? AND turn = 1", state, run.run_id)
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}") as caught:
        fork_turn_1(path, run, agent, tmp_path)
    assert wrong in str(caught.value)


@pytest.mark.parametrize(
    ("state", "wrong"),
    [
        ("not json", "not JSON"),
        ('{"a": 1}', "a JSON object, not an array"),
        (DEEP, "nested too deep"),
        ("[[1, 2]]", "holds 1 checkpoints"),
    ],
)
def test_a_crafted_batch_row_is_a_store_error_naming_its_turns(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, state: str, wrong: str
) -> None:
    path, run, agent = recorded
    padded = state.ljust(4000)  # long enough for the turns the row claims (else said so)
    craft(
        path, "UPDATE checkpoints SET state = ? WHERE run_id = ? AND turn = 2", padded, run.run_id
    )
    with pytest.raises(gr.errors.StoreError, match=f"turns 2–.* of run {run.run_id}") as caught:
        gr.fork(run.run_id, 5, agent, store=path, workspace=tmp_path / "fork")
    assert wrong in str(caught.value)


@pytest.mark.parametrize(
    ("column", "value", "wrong"),
    [
        ("seq", "many", "seq"),
        ("time", "noon", "time"),
        ("files", b"\x00", "files"),  # a blob: a number in a TEXT column reads as text
        ("state", 7, "a JSON number, not an object"),
    ],
)
def test_a_checkpoint_column_of_the_wrong_type_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, column: str, value: Any, wrong: str
) -> None:
    path, run, agent = recorded
    craft(
        path,
        f"UPDATE checkpoints SET {column} = ? WHERE run_id = ? AND turn = 1",
        value,
        run.run_id,
    )
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}") as caught:
        fork_turn_1(path, run, agent, tmp_path)
    assert wrong in str(caught.value)


@pytest.mark.parametrize("last_turn", [10**15, "lots", 0])
def test_a_crafted_last_turn_is_a_store_error_not_a_hang(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, last_turn: Any
) -> None:
    """A batch row of turns 2 to 10**15 would list a quadrillion turns."""
    path, run, agent = recorded
    craft(
        path,
        "UPDATE checkpoints SET last_turn = ? WHERE run_id = ? AND turn = 2",
        last_turn,
        run.run_id,
    )
    with pytest.raises(gr.errors.StoreError, match=f"turns 2–.* of run {run.run_id}"):
        gr.runs_df(path)
    with pytest.raises(gr.errors.StoreError, match=f"turns 2–.* of run {run.run_id}"):
        fork_turn_1(path, run, agent, tmp_path)


def test_a_crafted_turn_is_a_store_error(recorded: tuple[Path, gr.Run, gr.Agent]) -> None:
    path, run, _ = recorded
    craft(path, "UPDATE checkpoints SET turn = 'one' WHERE run_id = ? AND turn = 1", run.run_id)
    with pytest.raises(gr.errors.StoreError, match=f"run {run.run_id}.*'one'"):
        gr.runs_df(path)


def test_a_crafted_named_part_blob_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    """Rows written before decision 274 name unchanged parts by blob."""
    path, run, agent = recorded
    content = DEEP.encode()
    digest = rows.digest_of(content)
    craft(path, "INSERT INTO blobs VALUES (?, ?, 0, ?)", digest, len(content), content)
    with gr.Store(path) as store:
        row = rows.checkpoint(store, run.run_id, 1)
        assert row is not None
        state = json.loads(row.state)
    state["named"] = {"regulation": digest}
    craft(
        path,
        "UPDATE checkpoints SET state = ? WHERE run_id = ? AND turn = 1",
        json.dumps(state),
        run.run_id,
    )
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*nested too deep"):
        fork_turn_1(path, run, agent, tmp_path)


# -- lineage --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turn", "relation", "wrong"),
    [("three", "fork", "'three'"), (3, "adopted", "'adopted'"), (2.5, "fork", "2.5")],
)
def test_a_crafted_lineage_row_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], turn: Any, relation: str, wrong: str
) -> None:
    path, run, _ = recorded
    craft(path, "PRAGMA foreign_keys = OFF")
    craft(
        path,
        "INSERT INTO lineage VALUES (?, ?, ?, ?)",
        "child",
        run.run_id,
        turn,
        relation,
    )
    with pytest.raises(gr.errors.StoreError, match=r"lineage of run 'child'") as caught:
        gr.runs_df(path)
    assert wrong in str(caught.value)


# -- events and runs ------------------------------------------------------------------------------


def test_a_deeply_nested_event_row_is_marked_unreadable_not_a_recursion_error(
    recorded: tuple[Path, gr.Run, gr.Agent],
) -> None:
    path, run, _ = recorded
    craft(path, "UPDATE events SET data = ? WHERE run_id = ? AND seq = 3", DEEP, run.run_id)
    with gr.Store(path) as store:
        events = store.events(run.run_id)
    assert "nested too deep" in events[3]["unreadable"]
    assert len(events) == len(run.events)
    assert gr.compare(run.run_id, run.run_id, store=path).diverged_at is None


def test_an_event_row_that_is_a_json_array_is_marked_unreadable(
    recorded: tuple[Path, gr.Run, gr.Agent],
) -> None:
    path, run, _ = recorded
    craft(path, "UPDATE events SET data = '[1, 2]' WHERE run_id = ? AND seq = 3", run.run_id)
    with gr.Store(path) as store:
        assert "a JSON array, not an object" in store.events(run.run_id)[3]["unreadable"]


@pytest.mark.parametrize(
    ("column", "value"), [("turn", "two"), ("time", "noon"), ("kind", b"\x05")]
)
def test_an_event_column_of_the_wrong_type_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, column: str, value: Any
) -> None:
    path, run, agent = recorded
    craft(path, f"UPDATE events SET {column} = ? WHERE run_id = ? AND seq = 3", value, run.run_id)
    with pytest.raises(gr.errors.StoreError, match=f"event 3 of run '{run.run_id}'.*{column}"):
        gr.compare(run.run_id, run.run_id, store=path)
    with pytest.raises(gr.errors.StoreError, match=f"event 3 of run '{run.run_id}'.*{column}"):
        fork_turn_1(path, run, agent, tmp_path)


def test_a_deeply_nested_config_cell_is_marked_unreadable(
    recorded: tuple[Path, gr.Run, gr.Agent],
) -> None:
    path, run, _ = recorded
    craft(path, "UPDATE runs SET config = ? WHERE run_id = ?", DEEP, run.run_id)
    frame = gr.runs_df(path)
    assert frame.unreadable.iloc[0] == ["config"] and frame.config.iloc[0] == {}


@pytest.mark.parametrize(("column", "value"), [("workspace", b"\x05"), ("started_at", "dawn")])
def test_a_run_column_of_the_wrong_type_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], column: str, value: Any
) -> None:
    path, run, agent = recorded
    craft(path, f"UPDATE runs SET {column} = ? WHERE run_id = ?", value, run.run_id)
    with pytest.raises(gr.errors.StoreError, match=f"run '{run.run_id}'.*{column}"):
        gr.runs_df(path)
    with pytest.raises(gr.errors.StoreError, match=f"run '{run.run_id}'.*{column}"):
        gr.fork(run.run_id, 1, agent, store=path)


def test_a_folder_that_names_itself_ends_at_once(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    """A folder held in the row (as rows of an older format hold them, unhashed) that names
    itself: a walk without a bound follows it a million levels deep, copying ever longer
    paths for minutes."""
    path, run, agent = recorded
    key = "f" * 64
    with sqlite3.connect(path) as conn:
        [(state,)] = conn.execute(
            "SELECT state FROM checkpoints WHERE run_id = ? AND turn = 1", (run.run_id,)
        )
    state = json.loads(state)
    state.setdefault("appended", {})["folders"] = {key: {"a/": key}}
    craft(
        path,
        "UPDATE checkpoints SET state = ?, files = ? WHERE run_id = ? AND turn = 1",
        json.dumps(state),
        key,
        run.run_id,
    )
    started = time.monotonic()
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*nest deeper"):
        fork_turn_1(path, run, agent, tmp_path)
    assert time.monotonic() - started < 10
