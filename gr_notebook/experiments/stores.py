"""Each worker writes its own store; the experiment merges them into one.

A worker process (or a Dask worker) never shares a SQLite file with another: it writes
``<root>/stores/<host>-<pid>.sqlite`` as any run writes its store, one commit per event. The
experiment copies each finished run into its own store as the run's row arrives, and sweeps
every worker store at the end, so a run whose row never came back (its worker died) is kept
too. The copy is keyed: rows with the same key are updated, never added twice, so merging
again (a resumed experiment, the final sweep) changes nothing.

The copy reads the tables' layout from SQLite itself and takes every table with a
``run_id`` column, so tables added by later migrations come along without a change here.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from pathlib import Path

from gr_notebook.history.store import Store

__all__ = ["STORES_DIR", "merge_runs", "worker_store", "worker_store_path"]

STORES_DIR = "stores"

_open: dict[Path, Store] = {}
_open_lock = threading.Lock()


def worker_store_path(root: Path) -> Path:
    return root / STORES_DIR / f"{socket.gethostname()}-{os.getpid()}.sqlite"


def worker_store(root: Path) -> Store:
    """This process's store under ``root``, opened once and shared by its threads (a
    :class:`Store` serialises its writers)."""
    path = worker_store_path(root)
    with _open_lock:
        store = _open.get(path)
        if store is None:
            store = _open[path] = Store(path)
        return store


def merge_runs(target: Path, source: Path, run_ids: list[str] | None = None) -> int:
    """Copy ``run_ids`` (every run when None) from the store at ``source`` into the store at
    ``target``; returns how many runs ``source`` held of them. Idempotent."""
    if not source.exists() or source.resolve() == target.resolve():
        return 0
    Store(target).close()  # the target exists and is migrated
    conn = sqlite3.connect(target, timeout=30)
    try:
        conn.execute("ATTACH DATABASE ? AS src", (str(source),))
        try:
            return _copy(conn, run_ids)
        finally:
            conn.execute("DETACH DATABASE src")
    finally:
        conn.close()


def _copy(conn: sqlite3.Connection, run_ids: list[str] | None) -> int:
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM src.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name != '_migrations' ORDER BY name != 'runs', name"
        )
    ]
    wanted = "" if run_ids is None else f" WHERE run_id IN ({', '.join('?' for _ in run_ids)})"
    params = () if run_ids is None else tuple(run_ids)
    found = 0
    with conn:  # one transaction: a reader sees the whole run or none of it
        for table in tables:
            info = list(conn.execute(f"PRAGMA src.table_info({_quoted(table)})"))
            columns = [row[1] for row in info]
            if "run_id" not in columns:
                continue
            keys = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]]
            names = ", ".join(map(_quoted, columns))
            sql = (
                f"INSERT INTO main.{_quoted(table)} ({names}) SELECT {names} "
                f"FROM src.{_quoted(table)}{wanted or ' WHERE true'}"
            )
            updates = [c for c in columns if c not in keys]
            if keys and updates:
                sets = ", ".join(f"{_quoted(c)} = excluded.{_quoted(c)}" for c in updates)
                sql += f" ON CONFLICT ({', '.join(map(_quoted, keys))}) DO UPDATE SET {sets}"
            else:
                sql = sql.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)
            conn.execute(sql, params)
            if table == "runs":
                found = conn.execute(f"SELECT COUNT(*) FROM src.runs{wanted}", params).fetchone()[0]
    return int(found)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
