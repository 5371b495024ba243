"""The checkpoint tables: blobs by hash, damaged rows, lineage, and an older store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.history import checkpoint_store as rows

FIXTURES = Path(__file__).parent / "fixtures"


def row(turn: int) -> rows.CheckpointRow:
    return rows.CheckpointRow("r", turn, 0, 1.0, '{"counters":{}}', "f")


def test_a_blob_is_kept_once_by_its_hash_and_checked_when_read(tmp_path: Path) -> None:
    with gr.Store(tmp_path / "s.sqlite") as store:
        store.record_run_started(
            "r", started_at=0, model="m", workspace="", instructions="", config={}
        )
        big = b"abc" * 10_000
        digest = rows.digest_of(big)
        assert rows.write_checkpoint(store, row(1), {digest: big}) < len(big) // 10  # zlib
        rows.write_checkpoint(store, row(2), {digest: big})
        assert rows.blob(store, digest) == big
        assert rows.checkpoint_turns(store, "r") == [1, 2]
        assert rows.checkpoint(store, "r") == row(2)
        assert rows.checkpoints_by_run(store) == {"r": (2, 2)}
        with sqlite3.connect(store.path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone() == (1,)
            conn.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"junk", digest))
        with pytest.raises(gr.StoreError, match="is damaged"):
            rows.blob(store, digest)
        with pytest.raises(gr.StoreError, match="lacks blob nope"):
            rows.blob(store, "nope")


def test_an_old_store_opens_with_the_new_tables_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store_v0.sqlite", path)
    with gr.Store(path) as store:
        assert len(store.run_ids()) == 7
        assert rows.checkpoints_by_run(store) == {}
        migrated = rows.migrated_at(store)
        assert migrated is not None
        assert all(r["started_at"] < migrated for r in store.runs())


def test_a_turn_written_again_keeps_the_new_row_and_the_rows_around_it(tmp_path: Path) -> None:
    with gr.Store(tmp_path / "s.sqlite") as store:
        store.record_run_started(
            "r", started_at=0, model="m", workspace="", instructions="", config={}
        )
        rows.write_checkpoint(store, row(1), {})
        rows.write_checkpoint(store, row(2), {})
        again = row(2)._replace(seq=7, state='{"counters":{"turn":1}}')
        with store.transaction() as conn:  # a batch whose second row takes a turn again
            rows.insert_checkpoints(conn, [row(3), again, row(4)], [])
        assert rows.checkpoint_turns(store, "r") == [1, 2, 3, 4]
        assert rows.checkpoint(store, "r", 2) == again
        with pytest.raises(gr.StoreError, match="FOREIGN KEY"), store.transaction() as conn:
            rows.insert_checkpoints(conn, [row(5)._replace(run_id="no-such-run")], [])
        assert rows.checkpoint_turns(store, "r") == [1, 2, 3, 4]
