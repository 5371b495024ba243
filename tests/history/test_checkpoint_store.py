"""The checkpoint tables: blobs by hash, damaged rows, lineage, and an older store."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.errors import StoreError
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
        with pytest.raises(StoreError, match="is damaged"):
            rows.blob(store, digest)
        with pytest.raises(StoreError, match="lacks blob nope"):
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
        with pytest.raises(StoreError, match="FOREIGN KEY"), store.transaction() as conn:
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
        with pytest.raises(StoreError, match=r"turns 1–4 of run r .*it holds 1 checkpoints, not 4"):
            rows.checkpoint(store, "r", 1)


def test_a_batch_is_cut_where_the_turns_or_the_run_change() -> None:
    """The rows are split column by column: a gap, a turn taken again or another run's
    turn starts a new row; the files show where they change; text and bytes states mix."""

    def taken(run_id: str, turn: int, files: str = "f") -> rows.CheckpointRow:
        state = f'{{"turn":{turn}}}'
        return rows.CheckpointRow(
            run_id, turn, turn, 0.5, state.encode() if turn % 2 else state, files
        )

    given = [
        taken("a", 1), taken("a", 2, "g"), taken("a", 3, "g"),  # one row, files at 1 and 2
        taken("b", 4),  # another run: a row of its own
        taken("a", 4), taken("a", 5),  # back to the first run: a new row
        taken("a", 5),  # taken again: its own row
    ]  # fmt: skip
    stored = rows.batched(given)
    assert [(r[0], r[1], r[6]) for r in stored] == [
        ("a", 1, 3), ("b", 4, None), ("a", 4, 5), ("a", 5, None)
    ]  # fmt: skip
    assert json.loads(stored[0][4]) == [
        [1, 0.5, "f", {"turn": 1}], [2, 0.5, "g", {"turn": 2}], [3, 0.5, None, {"turn": 3}]
    ]  # fmt: skip
    assert stored[1] == (*given[3], None)
    assert stored[0][5] == "g" and stored[2][2:4] == (5, 0.5)
    assert rows.batched([]) == [] and rows.batched(given[:1]) == [(*given[0], None)]
