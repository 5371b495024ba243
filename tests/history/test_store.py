"""Tests for the durable run store: migrations, round-trips, durability and failures."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from gr_notebook.errors import ConfigError, GrNotebookError, StoreError
from gr_notebook.events import Event
from gr_notebook.history import store as store_module
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store

LATEST = [
    "create_runs_jobs_events",
    "add_checkpoints",
    "batch_checkpoints",
    "plain_checkpoints",
    "add_labels",
]


def start(store: Store, run_id: str, started_at: float = 1.0, **config: Any) -> None:
    store.record_run_started(
        run_id,
        started_at=started_at,
        model="scripted",
        workspace="/tmp/ws",
        instructions="do the thing",
        config=config,
    )


def event(seq: int, kind: str = "tool_call", **data: Any) -> Event:
    return Event(seq=seq, kind=kind, turn=seq, phase=1, time=100.0 + seq, data=data)


def migration_names(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


# ── migrations ───────────────────────────────────────────────────────────────


def test_fresh_db_records_each_migration_once(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path):
        pass
    assert migration_names(path) == LATEST
    with sqlite3.connect(path) as conn:
        stamps = [row[0] for row in conn.execute("SELECT applied_at FROM _migrations")]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert stamps and all(isinstance(applied_at, float) for applied_at in stamps)
    assert {"runs", "jobs", "events", "events_run_id_kind"} <= tables
    assert {"blobs", "checkpoints", "lineage"} <= tables


def test_reopen_does_not_reapply_and_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        start(store, "r1")
        store.record_event("r1", event(0))
    with Store(path) as store:
        assert store.run_ids() == ["r1"]
        assert store.events("r1") == [event(0)]
    assert migration_names(path) == LATEST


def test_new_migration_is_applied_once_to_an_older_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:  # an "older version": only migration 1 exists
        start(store, "old")
    calls: list[str] = []

    def add_runs_tags(conn: sqlite3.Connection) -> None:
        calls.append("add_runs_tags")
        conn.execute("ALTER TABLE runs ADD COLUMN tags TEXT")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS, add_runs_tags])
    for _ in range(2):
        with Store(path) as store:
            assert store.run_ids() == ["old"]
    assert calls == ["add_runs_tags"]
    assert migration_names(path) == [*LATEST, "add_runs_tags"]
    with sqlite3.connect(path) as conn:
        assert "tags" in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}


def test_failing_migration_rolls_back_and_raises_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.sqlite"

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (x)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS, half_done])
    with pytest.raises(StoreError, match="cannot open run store"):
        Store(path)
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "half" not in tables
    assert "runs" not in tables  # all pending migrations share one transaction


# ── round-trips ──────────────────────────────────────────────────────────────


def test_events_round_trip_in_seq_order(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
        written = [
            event(0, "run_started"),
            event(1, text="héllo ✓ 日本語 🚀", nested={"a": [1, 2.5, None, True]}),
            event(2, "todos_written", todos=[{"id": 1, "done": False}]),
        ]
        for e in reversed(written):
            store.record_event("r1", e)
        assert store.events("r1") == written
        assert store.events("r1")[1]["text"] == "héllo ✓ 日本語 🚀"
        assert store.events("nope") == []


def test_unserialisable_values_fall_back_to_repr(tmp_path: Path) -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque>"

    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
        store.record_event("r1", event(0, path=Path("a/b"), obj=Opaque(), ok=1))
        store.record_event("r1", event(1, loop=cyclic, ok=1))
        store.record_event("r1", event(2, stdout="bad \udcff byte"))
        first, second, third = store.events("r1")
    assert dict(first.data) == {"path": repr(Path("a/b")), "obj": "<Opaque>", "ok": 1}
    assert dict(second.data) == {"loop": "[[...]]", "ok": "1"}
    assert third["stdout"] == "bad \udcff byte"


def test_runs_newest_first_with_job_columns(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "old", started_at=1.0, max_turns=5)
        start(store, "new", started_at=2.0)
        store.record_event("old", event(0))
        store.record_event("old", event(1))
        store.record_run_finished("old", status="completed", finished_at=3.0)
        store.record_job(
            "old",
            status="complete",
            completed_at=2.5,
            summary="done",
            deliverables=["report.md", "données.csv"],
            confidence=0.9,
            notes=None,
        )
        new, old = store.runs()
        assert store.run_ids() == ["new", "old"]
    assert new["run_id"] == "new"
    assert new["status"] == "running"
    assert new["n_events"] == 0
    assert new["config"] == {}
    for column in ("job_status", "completed_at", "summary", "confidence", "deliverables"):
        assert new[column] is None
    assert old == {
        "run_id": "old",
        "status": "completed",
        "model": "scripted",
        "workspace": "/tmp/ws",
        "instructions": "do the thing",
        "started_at": 1.0,
        "finished_at": 3.0,
        "error": None,
        "n_events": 2,
        "job_status": "complete",
        "completed_at": 2.5,
        "summary": "done",
        "confidence": 0.9,
        "deliverables": ["report.md", "données.csv"],
        "notes": None,
        "config": {"max_turns": 5},
        "unreadable": None,
    }


def test_record_job_upserts(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
        job: dict[str, Any] = {"completed_at": None, "summary": None, "confidence": None}
        store.record_job("r1", status="partial", deliverables=["a"], notes="first", **job)
        store.record_job(
            "r1",
            status="complete",
            completed_at=5.0,
            summary="all done",
            deliverables=["a", "b"],
            confidence=0.75,
            notes=None,
        )
        (run,) = store.runs()
    assert run["job_status"] == "complete"
    assert run["completed_at"] == 5.0
    assert run["summary"] == "all done"
    assert run["deliverables"] == ["a", "b"]
    assert run["confidence"] == 0.75
    assert run["notes"] is None


def test_record_run_finished_keeps_error(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
        store.record_run_finished("r1", status="failed", finished_at=9.0, error="boom")
        (run,) = store.runs()
    assert (run["status"], run["finished_at"], run["error"]) == ("failed", 9.0, "boom")


# ── durability and configuration ─────────────────────────────────────────────


def test_events_are_visible_to_a_second_store_before_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    writer = Store(path)
    start(writer, "r1")
    for seq in range(3):
        writer.record_event("r1", event(seq, n=seq))
    reader = Store(path)
    try:
        assert reader.events("r1") == [event(seq, n=seq) for seq in range(3)]
        assert reader.runs()[0]["n_events"] == 3
    finally:
        reader.close()
        writer.close()


def test_wal_mode_is_on(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path), sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(StoreError, match="failed"):
            store.record_event("missing", event(0))
        with pytest.raises(StoreError, match="record_run_started first"):
            store.record_run_finished("missing", status="failed", finished_at=1.0)


def test_duplicate_run_or_event_raises_store_error(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
        store.record_event("r1", event(0))
        with pytest.raises(StoreError):
            start(store, "r1")
        with pytest.raises(StoreError):
            store.record_event("r1", event(0))


def test_concurrent_writes_from_threads(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")

        def write(offset: int) -> None:
            for i in range(50):
                store.record_event("r1", event(offset + i))

        threads = [threading.Thread(target=write, args=(n * 50,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [e.seq for e in store.events("r1")] == list(range(200))


def test_a_store_is_made_in_a_folder_that_exists_and_exposes_its_path(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        assert store.path == path
        assert path.exists()


def test_a_store_in_a_missing_folder_is_a_config_error_and_makes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "deep" / "er"
    with pytest.raises(ConfigError, match=f"folder {missing} does not exist; make it first"):
        Store(missing / "store.sqlite")
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ConfigError, match="a_file is not a folder"):
        Store(tmp_path / "a_file" / "store.sqlite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_default_path_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Store() as store:
        assert store.path == tmp_path / DEFAULT_STORE_PATH
    assert (tmp_path / "gr_runs" / "store.sqlite").exists()


# ── failures and lifecycle ───────────────────────────────────────────────────


def test_corrupt_file_raises_store_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(StoreError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert "gr.Agent(store=...)" in str(info.value)
    assert isinstance(info.value, GrNotebookError)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_directory_path_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open run store") as info:
        Store(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_close_is_idempotent_and_blocks_further_use(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.close()
    store.close()
    assert "closed" in repr(store)
    with pytest.raises(StoreError, match="closed"):
        start(store, "r1")
    with pytest.raises(StoreError, match="closed"):
        store.runs()


def test_context_manager_closes(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        start(store, "r1")
    with pytest.raises(StoreError, match="closed"):
        store.run_ids()


# ── corrupt rows ─────────────────────────────────────────────────────────────


def corrupt(path: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


def test_a_corrupt_event_row_is_marked_and_the_others_are_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        start(store, "r1")
        for seq in range(3):
            store.record_event("r1", event(seq, n=seq))
    corrupt(path, "UPDATE events SET data = '{\"n\": 1, trunc' WHERE seq = 1")
    corrupt(path, "UPDATE events SET data = CAST(x'7b226e223a2032ff7d' AS TEXT) WHERE seq = 2")
    with Store(path) as store:
        events = store.events("r1")
        assert [e.seq for e in events] == [0, 1, 2]
        assert events[0].data == {"n": 0}
        assert "JSONDecodeError" in events[1]["unreadable"]
        assert events[1]["raw"] == '{"n": 1, trunc'
        assert "unreadable" in events[2].data
        assert [e.seq for _, e in store.events_of_kind("tool_call")] == [0, 1, 2]


def test_store_error_only_when_no_event_of_a_run_can_be_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        start(store, "r1")
        store.record_event("r1", event(0))
    corrupt(path, "UPDATE events SET data = 'not json'")
    with Store(path) as store, pytest.raises(StoreError, match="none of the 1 events of run 'r1'"):
        store.events("r1")


def test_a_corrupt_config_cell_is_marked_and_runs_df_reads_every_run(tmp_path: Path) -> None:
    from gr_notebook.history.analysis import runs_df

    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        start(store, "r1", 1.0, name="a")
        start(store, "r2", 2.0, name="b")
        store.record_job(
            "r2",
            status="completed",
            completed_at=3.0,
            summary="s",
            deliverables=["out.md"],
            confidence=1.0,
            notes=None,
        )
    corrupt(path, "UPDATE runs SET config = '{\"name\": ' WHERE run_id = 'r2'")
    corrupt(path, "UPDATE jobs SET deliverables = '[\"out' WHERE run_id = 'r2'")
    frame = runs_df(path)
    assert list(frame.run_id) == ["r2", "r1"]
    assert frame.config.iloc[1] == {"name": "a"} and frame.unreadable.iloc[1] is None
    assert frame.config.iloc[0] == {} and frame.deliverables.iloc[0] is None
    assert frame.unreadable.iloc[0] == ["config", "deliverables"]
