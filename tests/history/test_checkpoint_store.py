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


def test_rows_of_consecutive_turns_are_stored_as_one_and_read_back_each(tmp_path: Path) -> None:
    def taken(turn: int, files: str = "f") -> rows.CheckpointRow:
        return rows.CheckpointRow("r", turn, turn * 3, turn / 2, f'{{"turn":{turn}}}', files)

    with gr.Store(tmp_path / "s.sqlite") as store:
        store.record_run_started(
            "r", started_at=0, model="m", workspace="", instructions="", config={}
        )
        first = [taken(1), taken(2), taken(3, "g"), taken(4, "g")]
        with store.transaction() as conn:
            rows.insert_checkpoints(conn, [*first, taken(6)], [])  # 5 is missing: two rows
            stored = conn.execute("SELECT turn, last_turn FROM checkpoints").fetchall()
        assert [tuple(r) for r in stored] == [(1, 4), (6, None)]
        assert rows.checkpoint_rows(store, "r") == [*first, taken(6)]
        assert rows.checkpoint(store, "r", 3) == taken(3, "g")
        assert rows.checkpoint(store, "r") == taken(6)
        assert rows.checkpoint(store, "r", 5) is None
        assert rows.checkpoint_turns(store, "r") == [1, 2, 3, 4, 6]
        assert rows.checkpoints_by_run(store) == {"r": (5, 6)}
        assert rows.states_upto(store, taken(3)) == [{"turn": 1}, {"turn": 2}, {"turn": 3}]

        # turns taken again (a run brought back to turn 2 by a person) replace the old ones
        again = [t._replace(seq=99) for t in (taken(2), taken(3))]
        with store.transaction() as conn:
            rows.insert_checkpoints(conn, again, [])
        assert [r.seq for r in rows.checkpoint_rows(store, "r")] == [3, 99, 99, 12, 18]
        assert rows.checkpoint(store, "r", 3) == again[1]
        assert rows.checkpoints_by_run(store) == {"r": (5, 6)}

        with sqlite3.connect(store.path) as conn:  # a batch cut short by a damaged store
            conn.execute("UPDATE checkpoints SET state = '[[1, 0.5, \"f\", {}]]' WHERE turn = 1")
        with pytest.raises(gr.StoreError, match="turns 1-4 holds 1 checkpoints"):
            rows.checkpoint(store, "r", 1)
