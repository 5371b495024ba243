"""The checkpoint tables: a row per turn, blobs by hash, and an older store."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.digests import digest_of
from gr_notebook.history import checkpoint_store as rows

FIXTURES = Path(__file__).parent / "fixtures"
MESSAGE = b'{"role":"user","content":[{"type":"text","text":"Begin."}]}'


def row(turn: int, seq: int = 0, **state: Any) -> tuple[rows.CheckpointRow, dict[str, bytes]]:
    """A checkpoint of one message, its own base, and the blobs it names."""
    snapshot = {
        "context": {"messages": {"chunks": [], "tail": [digest_of(MESSAGE)]}},
        "guardrails": {"feedback": {"recent": []}},
        "interventions": None,
        **state,
    }
    document = rows.json_bytes({"state": snapshot, "files": {}})
    base = digest_of(document)
    checkpoint = rows.CheckpointRow("r", turn, seq, 1.0, rows.compressed(document, document), base)
    return checkpoint, {base: document, digest_of(MESSAGE): MESSAGE}


def started(store: gr.Store) -> gr.Store:
    store.record_run_started("r", started_at=0, model="m", workspace="", instructions="", config={})
    return store


def test_a_blob_is_kept_once_by_its_hash_and_checked_when_read(tmp_path: Path) -> None:
    with started(gr.Store(tmp_path / "s.sqlite")) as store:
        big = b"abc" * 10_000
        digest = digest_of(big)
        checkpoint, blobs = row(1)
        assert rows.write_checkpoint(store, checkpoint, {**blobs, digest: big}) < len(big) // 10
        rows.write_checkpoint(store, row(2)[0], {digest: big})
        assert rows.blob(store, digest) == big
        assert rows.checkpoint_turns(store, "r") == [1, 2]
        assert rows.checkpoints_by_run(store) == {"r": (2, 2)}
        with sqlite3.connect(store.path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone() == (3,)
            conn.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"junk", digest))
        with pytest.raises(gr.errors.StoreError, match="is damaged"):
            rows.blob(store, digest)
        with pytest.raises(gr.errors.StoreError, match="blob nope is missing"):
            rows.blob(store, "nope")


def test_a_checkpoint_reads_back_with_its_messages_and_the_latest_by_default(
    tmp_path: Path,
) -> None:
    with started(gr.Store(tmp_path / "s.sqlite")) as store:
        rows.write_checkpoint(store, *row(1, note="one"))
        rows.write_checkpoint(store, *row(2, seq=5, note="two"))
        latest = rows.load_checkpoint(store, "r")
        assert (latest.turn, latest.seq, latest.snapshot["note"]) == (2, 5, "two")
        assert latest.snapshot["context"]["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Begin."}]}
        ]
        assert rows.load_checkpoint(store, "r", 1).snapshot["note"] == "one"
        with pytest.raises(gr.RunError, match="has no checkpoint of turn 3"):
            rows.load_checkpoint(store, "r", 3)


def test_an_old_store_opens_with_the_new_tables_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store_v0.sqlite", path)
    with gr.Store(path) as store:
        assert len(store.run_ids()) == 7
        assert rows.checkpoints_by_run(store) == {}
        assert all(
            rows.from_earlier_version(store, r["run_id"], r["started_at"]) for r in store.runs()
        )


def test_a_turn_written_again_replaces_its_row_and_keeps_the_rows_around_it(
    tmp_path: Path,
) -> None:
    with started(gr.Store(tmp_path / "s.sqlite")) as store:
        for turn in (1, 2, 3):
            rows.write_checkpoint(store, *row(turn))
        rows.write_checkpoint(store, *row(2, seq=7))  # a run brought back to turn 2
        assert rows.checkpoint_turns(store, "r") == [1, 2, 3]
        assert rows.load_checkpoint(store, "r", 2).seq == 7
        with pytest.raises(gr.errors.StoreError, match="FOREIGN KEY"):
            rows.write_checkpoint(store, dataclasses.replace(row(4)[0], run_id="no-such-run"), {})
        assert rows.checkpoint_turns(store, "r") == [1, 2, 3]


@pytest.mark.parametrize(
    ("size", "data", "wrong"),
    [
        (2**62, b"x", "not 0 to"),
        (-5, b"x", "not 0 to"),
        ("big", b"x", "size is 'big'"),
        (1, 2**40, "not bytes"),
    ],
)
def test_a_crafted_blob_row_is_a_store_error_not_a_crash(
    tmp_path: Path, size: object, data: object, wrong: str
) -> None:
    with started(gr.Store(tmp_path / "s.sqlite")) as store:
        with store.transaction() as conn:
            conn.execute("INSERT INTO blobs VALUES ('d', ?, 0, ?)", (size, data))
        with pytest.raises(gr.errors.StoreError, match=wrong):
            rows.blob(store, "d")
