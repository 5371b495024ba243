"""Crafted store rows: every row the store reads back (events, runs, checkpoints, blobs,
lineage) that is malformed ends as a StoreError naming the run, the turn and what
is wrong, through the public paths, never as a raw ValueError, AttributeError or
RecursionError, nor as a hang."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.digests import digest_of
from gr_notebook.examples import QUICKSTART
from gr_notebook.history import checkpoint_store as rows

DEEP = "[" * 200_000 + "]" * 200_000
"""Past any recursion limit: stdlib json raises RecursionError on it."""


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, gr.Run, gr.Agent]]:
    """A completed quickstart run with its checkpoints."""
    agent = gr.Agent(
        gr.SimulatedModel(),
        store=tmp_path / "store.sqlite",
        workspace=tmp_path / "ws",
        max_iterations=200,
    )
    run = agent.run_sync(QUICKSTART)
    assert run.status == "completed"
    yield tmp_path / "store.sqlite", run, agent
    store = agent.open_store()
    if store is not None:
        store.close()


def craft(path: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


def document(path: Path, run_id: str, turn: int = 1) -> dict[str, Any]:
    """The document of ``turn``'s checkpoint, as JSON values."""
    with sqlite3.connect(path) as conn:
        [(state, base)] = conn.execute(
            "SELECT state, base FROM checkpoints WHERE run_id = ? AND turn = ?", (run_id, turn)
        )
    with gr.Store(path) as store:
        unpacker = zlib.decompressobj(zdict=rows.blob(store, base))
    return json.loads(unpacker.decompress(state))  # type: ignore[no-any-return]


def craft_state(path: Path, run_id: str, state: Any, turn: int = 1) -> None:
    craft(
        path,
        "UPDATE checkpoints SET state = ? WHERE run_id = ? AND turn = ?",
        state,
        run_id,
        turn,
    )


def fork_turn_1(path: Path, run: gr.Run, agent: gr.Agent, tmp_path: Path) -> gr.Run:
    return gr.fork(run.run_id, 1, agent, store=path, workspace=tmp_path / "fork")


# -- checkpoints ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "wrong"),
    [
        (b"not compressed", "decompressing"),
        (zlib.compress(b'{"state": {}}')[:-6], "cut short"),
        (zlib.compress(b"not json"), "not JSON"),
        (zlib.compress(b"\xff\xfe"), "not JSON"),
        (zlib.compress(b"[1]"), "a JSON array, not an object"),
        (zlib.compress(DEEP.encode()), "nested too deep"),
        (zlib.compress(b'{"state": 1, "files": {}}'), "holds no run state snapshot"),
        (zlib.compress(b'{"state": {"context": {"messages": [1]}}, "files": {}}'), "not chunks"),
        (zlib.compress(b'{"state": {"context": {"messages": []}}, "files": []}'), "paths"),
        ("text, not bytes", "a JSON string, not compressed bytes"),
        (7, "a JSON number, not compressed bytes"),
    ],
)
def test_a_crafted_checkpoint_row_is_a_store_error_naming_the_turn(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, state: Any, wrong: str
) -> None:
    path, run, agent = recorded
    craft_state(path, run.run_id, state)
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}") as caught:
        fork_turn_1(path, run, agent, tmp_path)
    assert wrong in str(caught.value)


def test_a_row_that_unpacks_past_the_bound_is_refused_not_read(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, run, agent = recorded
    monkeypatch.setattr(rows, "MAX_STATE", 10_000)
    craft_state(path, run.run_id, zlib.compress(b" " * 20_000))
    with pytest.raises(gr.errors.StoreError, match="unpacks to more than 10,000 bytes"):
        fork_turn_1(path, run, agent, tmp_path)


def test_a_missing_or_crafted_message_blob_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    path, run, agent = recorded
    saved = document(path, run.run_id)
    saved["state"]["context"]["messages"] = {"chunks": [], "tail": ["0" * 32]}
    craft_state(path, run.run_id, zlib.compress(json.dumps(saved).encode()))
    with pytest.raises(
        gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*blob 0000.* is missing"
    ):
        fork_turn_1(path, run, agent, tmp_path)
    content = b"[1, 2]"
    craft(path, "INSERT INTO blobs VALUES (?, ?, 0, ?)", digest_of(content), 6, content)
    saved["state"]["context"]["messages"] = {"chunks": [], "tail": [digest_of(content)]}
    craft_state(path, run.run_id, zlib.compress(json.dumps(saved).encode()))
    with pytest.raises(
        gr.errors.StoreError, match=r"its messages blob \w+ is a JSON array, not an object"
    ):
        fork_turn_1(path, run, agent, tmp_path)


def craft_file(path: Path, run_id: str, turn: int, name: str) -> None:
    """Add a file called ``name`` to ``turn``'s checkpoint, with the content of its first."""
    saved = document(path, run_id, turn)
    saved["files"][name] = next(iter(saved["files"].values()))
    craft_state(path, run_id, zlib.compress(json.dumps(saved).encode()), turn)


@pytest.mark.parametrize("name", ["../outside.md", "ABSOLUTE", "notes\x00.md"])
@pytest.mark.parametrize("call", ["fork", "resume"])
def test_a_crafted_file_name_is_a_store_error_and_nothing_is_written(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, name: str, call: str
) -> None:
    path, run, agent = recorded
    name = name.replace("ABSOLUTE", str(tmp_path / "absolute.md"))
    with gr.Store(path) as store:
        turn = rows.checkpoint_turns(store, run.run_id)[-1]  # the one a resume reads
    craft_file(path, run.run_id, turn, name)
    craft(path, "UPDATE runs SET status = 'interrupted' WHERE run_id = ?", run.run_id)
    target = tmp_path / "new"
    with pytest.raises(gr.errors.StoreError, match=f"turn {turn} of run {run.run_id}") as caught:
        if call == "fork":
            gr.fork(run.run_id, turn, agent, store=path, workspace=target)
        else:
            gr.resume(run.run_id, agent, store=path, workspace=target)
    assert "which is not a path inside a workspace" in str(caught.value)
    assert not target.exists()
    assert not (tmp_path / "outside.md").exists() and not (tmp_path / "absolute.md").exists()


@pytest.mark.parametrize("name", ["../../planted.txt", "ABSOLUTE", "../../precious"])
def test_a_crafted_file_name_never_leads_a_replay_out_of_its_folder(
    recorded: tuple[Path, gr.Run, gr.Agent],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """A replay reads stores from elsewhere: one must not write or delete outside its folder."""
    path, run, _ = recorded
    temp = tmp_path / "outer" / "tmp"
    temp.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the replay's: outer/tmp/gr-replay-…
    planted, absolute = tmp_path / "outer" / "planted.txt", tmp_path / "absolute.txt"
    precious = tmp_path / "outer" / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine\n", encoding="utf-8")
    name = name.replace("ABSOLUTE", str(absolute))
    with gr.Store(path) as store:
        turns = rows.checkpoint_turns(store, run.run_id)
    for turn in turns:  # else a later turn's checkpoint removes what an earlier one wrote
        craft_file(path, run.run_id, turn, name)
    try:
        gr.replay_guardrails(run.run_id, store=path, policies=[gr.ReadBeforeWritePolicy()])
    except gr.errors.StoreError as exc:
        refused: Exception | None = exc
    else:
        refused = None
    assert not planted.exists() and not absolute.exists()
    assert (precious / "keep.txt").read_text(encoding="utf-8") == "mine\n"
    assert refused is not None and f"turn {turns[0]} of run {run.run_id}" in str(refused)
    assert f"{name!r}, which is not a path inside a workspace" in str(refused)
    assert list(temp.iterdir()) == []  # the replay removed its own folder


@pytest.mark.parametrize(
    ("column", "value"), [("seq", "many"), ("time", "noon"), ("base", b"\x00")]
)
def test_a_checkpoint_column_of_the_wrong_type_is_a_store_error(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, column: str, value: Any
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
    assert column in str(caught.value)


def test_a_crafted_turn_is_a_store_error(recorded: tuple[Path, gr.Run, gr.Agent]) -> None:
    path, run, _ = recorded
    craft(path, "UPDATE checkpoints SET turn = 'one' WHERE run_id = ? AND turn = 1", run.run_id)
    with pytest.raises(gr.errors.StoreError, match=f"run {run.run_id}.*'one'"):
        gr.runs_df(path)


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


def test_a_checkpoint_without_the_guardrails_fields_is_refused_in_words(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path
) -> None:
    path, run, agent = recorded
    saved = document(path, run.run_id)
    del saved["state"]["guardrails"]["feedback"]["triggers"]
    craft_state(path, run.run_id, zlib.compress(json.dumps(saved).encode()))
    with pytest.raises(gr.RunError, match="is not a run state this version reads"):
        fork_turn_1(path, run, agent, tmp_path)


@pytest.mark.parametrize(("named", "length"), [(200, 64), (1, 100_000), (1, 3)])
def test_a_chunk_named_over_and_over_or_of_the_wrong_length_is_refused(
    recorded: tuple[Path, gr.Run, gr.Agent], tmp_path: Path, named: int, length: int
) -> None:
    """A tiny row could otherwise name one big chunk a million times."""
    path, run, agent = recorded
    content = json.dumps([0] * length).encode()
    digest = digest_of(content)
    craft(path, "INSERT INTO blobs VALUES (?, ?, 0, ?)", digest, len(content), content)
    saved = document(path, run.run_id)
    saved["state"]["context"]["messages"] = {"chunks": [digest] * named, "tail": []}
    craft_state(path, run.run_id, zlib.compress(json.dumps(saved).encode()))
    with pytest.raises(gr.errors.StoreError, match=f"turn 1 of run {run.run_id}.*"):
        fork_turn_1(path, run, agent, tmp_path)
