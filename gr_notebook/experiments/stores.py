"""Each worker writes its own store; the experiment merges them into one.

A worker process (or a Dask worker) never shares a SQLite file with another: it writes
``<root>/stores/<host>-<pid>.sqlite`` as any run writes its store, one commit per event. The
experiment copies each finished run into its own store as the run's row arrives, and sweeps
every worker store at the end, so a run whose row never came back (its worker died) is kept
too. The copy is keyed: rows with the same key are updated, never added twice, so merging
again (a resumed experiment, the final sweep) changes nothing.

The copy reads the tables' layout from SQLite itself and takes every table with a
``run_id`` column, so tables added by later migrations come along without a change here.
A content-addressed table (keyed by ``digest`` alone: the checkpoints' ``blobs``) belongs to
no run; its rows are copied as they were added since the last merge from that store, which
is exact because such rows are only ever added.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from pathlib import Path

from gr_notebook.history.store import Store

__all__ = ["STORES_DIR", "Merger", "merge_runs", "worker_store", "worker_store_path"]

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
            path.parent.mkdir(parents=True, exist_ok=True)  # the experiment's own folder
            store = _open[path] = Store(path)
        return store


class Merger:
    """One connection to the experiment's store, each worker store attached once and its
    tables' copy statements built once: merging a run as its row arrives costs the copy."""

    MAX_ATTACHED = 8
    """SQLite attaches at most 10 databases to a connection by default."""

    def __init__(self, target: Path) -> None:
        Store(target).close()  # the target exists and is migrated
        self.target = target
        self._conn = sqlite3.connect(target, timeout=30)
        self._conn.execute("PRAGMA synchronous = NORMAL")  # as the store's own connection
        self._sources: dict[Path, tuple[str, list[tuple[str, str]]]] = {}
        self._shared: dict[Path, list[tuple[str, str]]] = {}
        """Per source, the copy statements of its content-addressed tables."""
        self._copied: dict[tuple[Path, str], int] = {}
        """The highest rowid of each source's content-addressed table copied so far."""
        self._count = 0

    def merge(self, source: Path, run_ids: list[str] | None = None) -> int:
        """Copy ``run_ids`` (every run when None) from the store at ``source``; returns how
        many runs ``source`` held of them. Idempotent."""
        if not source.exists() or source.resolve() == self.target.resolve():
            return 0
        alias, plan = self._attach(source)
        where = "" if run_ids is None else f" WHERE run_id IN ({', '.join('?' * len(run_ids))})"
        params = () if run_ids is None else tuple(run_ids)
        with self._conn:  # one transaction: a reader sees the whole run or none of it
            for table, sql in self._shared[source]:  # first: a checkpoint's blobs before it
                last = self._copied.get((source, table), 0)
                self._conn.execute(sql, (last,))
                top = self._conn.execute(f"SELECT MAX(rowid) FROM {alias}.{_quoted(table)}")
                self._copied[source, table] = int(top.fetchone()[0] or 0)
            for _, sql in plan:
                self._conn.execute(sql.format(where=where or " WHERE true"), params)
            found = self._conn.execute(f"SELECT COUNT(*) FROM {alias}.runs{where}", params)
            return int(found.fetchone()[0])

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Merger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _attach(self, source: Path) -> tuple[str, list[tuple[str, str]]]:
        known = self._sources.get(source)
        if known is not None:
            return known
        if len(self._sources) >= self.MAX_ATTACHED:
            oldest = next(iter(self._sources))
            self._conn.execute(f"DETACH DATABASE {self._sources.pop(oldest)[0]}")
            self._shared.pop(oldest, None)
        Store(source).close()  # a store an earlier version wrote gains today's tables
        self._count += 1
        alias = f"src{self._count}"
        self._conn.execute(f"ATTACH DATABASE ? AS {alias}", (str(source),))
        self._sources[source] = alias, _plan(self._conn, alias)
        self._shared[source] = _shared_plan(self._conn, alias)
        return self._sources[source]


def merge_runs(target: Path, source: Path, run_ids: list[str] | None = None) -> int:
    """:meth:`Merger.merge`, once."""
    with Merger(target) as merger:
        return merger.merge(source, run_ids)


def _plan(conn: sqlite3.Connection, alias: str) -> list[tuple[str, str]]:
    """``(table, statement)`` for each table with a ``run_id`` column that the target has too
    (an earlier version's checkpoints stay in the worker's store), ``runs`` first; each
    statement upserts by the table's primary key, with ``{where}`` left to fill."""
    targets = {row[0] for row in conn.execute("SELECT name FROM main.sqlite_master")}
    tables = [
        row[0]
        for row in conn.execute(
            f"SELECT name FROM {alias}.sqlite_master WHERE type = 'table' AND name NOT LIKE "
            "'sqlite_%' AND name != '_migrations' ORDER BY name != 'runs', name"
        )
    ]
    plan = []
    for table in tables:
        info = list(conn.execute(f"PRAGMA {alias}.table_info({_quoted(table)})"))
        columns = [row[1] for row in info]
        if "run_id" not in columns or table not in targets:
            continue
        keys = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]]
        names = ", ".join(map(_quoted, columns))
        sql = (
            f"INSERT INTO main.{_quoted(table)} ({names}) SELECT {names} "
            f"FROM {alias}.{_quoted(table)}{{where}}"
        )
        updates = [c for c in columns if c not in keys]
        if keys and updates:
            sets = ", ".join(f"{_quoted(c)} = excluded.{_quoted(c)}" for c in updates)
            sql += f" ON CONFLICT ({', '.join(map(_quoted, keys))}) DO UPDATE SET {sets}"
        else:
            sql = sql.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)
        plan.append((table, sql))
    return plan


def _shared_plan(conn: sqlite3.Connection, alias: str) -> list[tuple[str, str]]:
    """``(table, statement)`` for each content-addressed table: keyed by ``digest`` alone,
    with no ``run_id``; the statement copies the rows after a rowid (``?``)."""
    plan = []
    for (table,) in conn.execute(
        f"SELECT name FROM {alias}.sqlite_master WHERE type = 'table' AND name NOT LIKE "
        "'sqlite_%' AND name != '_migrations' ORDER BY name"
    ):
        info = list(conn.execute(f"PRAGMA {alias}.table_info({_quoted(table)})"))
        keys = [row[1] for row in info if row[5]]
        if keys != ["digest"] or any(row[1] == "run_id" for row in info):
            continue
        names = ", ".join(_quoted(row[1]) for row in info)
        plan.append(
            (
                table,
                f"INSERT OR IGNORE INTO main.{_quoted(table)} ({names}) SELECT {names} "
                f"FROM {alias}.{_quoted(table)} WHERE rowid > ?",
            )
        )
    return plan


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
