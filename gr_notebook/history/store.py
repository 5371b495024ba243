"""A durable SQLite record of runs, jobs and events, written as they happen.

Every write commits at once, so a crashed Jupyter kernel loses nothing already recorded and
another process (or a second :class:`Store`) can read a run while it is still going.

The schema evolves as in simonw/llm: each migration is a small function registered, in
order, in :data:`MIGRATIONS` and recorded by name in ``_migrations`` once applied. Never edit
or reorder a released migration; append a new one.

An event row holds its kind and its data, the kind's fields as a JSON object
(:meth:`Event.to_data`): the layout events had before they were typed, so stores written
then read the same. Reading decodes each row by its kind and layout
(:func:`gr_notebook.events.decode`): a kind's class when the data has its layout, else an
untyped event that keeps the data as it is (a kind this version lacks, an older or newer
layout), which :func:`gr_notebook.events.as_typed` still reads leniently.

Every JSON cell is decoded by :func:`~gr_notebook.history.cells.parse_json`, and a row that
is not what it should be (a crafted one) is a :class:`StoreError` naming it
(:meth:`Store.damaged`), but an event's payload or a run's JSON cell, which reads as
unreadable so that one bad cell fails no query. A store that is read must exist:
:func:`reading` opens one without creating it, so a mistyped path is not an empty store.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Final, Self, TypeAlias

from gr_notebook.errors import ConfigError, StoreError
from gr_notebook.events import Event, decode
from gr_notebook.history.cells import DamagedRow, checked, parse_json

__all__ = [
    "DEFAULT_STORE_PATH",
    "MIGRATIONS",
    "Migration",
    "Store",
    "StoreError",
    "StoreLike",
    "reading",
    "status_as_read",
    "writable_path",
]

#: Relative to the working directory, so each notebook folder keeps its own history.
DEFAULT_STORE_PATH: Final = Path("gr_runs") / "store.sqlite"

Migration = Callable[[sqlite3.Connection], None]

StoreLike: TypeAlias = "Store | str | os.PathLike[str]"
"""What every ``store=`` takes: a :class:`Store`, or the path of one (None, where a store is
optional, is the default path; only ``gr.Agent(store=False)`` keeps no store)."""

#: Applied in this order; a migration's name is its function's ``__name__``.
MIGRATIONS: list[Migration] = []


def status_as_read(status: str, *, job: bool) -> str:
    """A stored status in this version's words. Before ``ended`` existed, a run whose
    model ended its turn with no job reported was stored ``completed``, its job row
    ``stopped``: both read ``ended``. Rows are read so, never rewritten."""
    if status == "stopped" or (status == "completed" and not job):
        return "ended"
    return status


def _migration(fn: Migration) -> Migration:
    """Register ``fn``. It runs inside a transaction, so it must not use executescript."""
    MIGRATIONS.append(fn)
    return fn


@_migration
def create_runs_jobs_events(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, status TEXT NOT NULL, model TEXT, workspace TEXT,
            instructions TEXT, config TEXT, started_at REAL, finished_at REAL, error TEXT)"""
    )
    conn.execute(
        """CREATE TABLE jobs (
            run_id TEXT PRIMARY KEY REFERENCES runs(run_id), status TEXT NOT NULL,
            completed_at REAL, summary TEXT, deliverables TEXT, confidence REAL, notes TEXT)"""
    )
    conn.execute(
        """CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,
            kind TEXT NOT NULL, turn INTEGER NOT NULL, phase INTEGER NOT NULL,
            time REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq))"""
    )
    conn.execute("CREATE INDEX events_run_id_kind ON events (run_id, kind)")


@_migration
def add_checkpoints(conn: sqlite3.Connection) -> None:
    """Schema 2: blobs kept by the hash of their content, a checkpoint per turn (in a
    format schema 4 replaced), and the lineage that links a fork or a resume to its parent."""
    conn.execute(
        "CREATE TABLE blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL,"
        " zlib INTEGER NOT NULL, data BLOB NOT NULL)"
    )
    conn.execute(
        """CREATE TABLE checkpoints (
            run_id TEXT NOT NULL REFERENCES runs(run_id), turn INTEGER NOT NULL,
            seq INTEGER NOT NULL, time REAL NOT NULL, state TEXT NOT NULL,
            files TEXT NOT NULL, PRIMARY KEY (run_id, turn))"""
    )
    conn.execute(
        """CREATE TABLE lineage (
            run_id TEXT PRIMARY KEY REFERENCES runs(run_id), parent_run_id TEXT NOT NULL,
            parent_turn INTEGER NOT NULL, relation TEXT NOT NULL)"""
    )
    conn.execute("CREATE INDEX lineage_parent ON lineage (parent_run_id)")


@_migration
def batch_checkpoints(conn: sqlite3.Connection) -> None:
    """Schema 3: a row of the earlier checkpoint format could hold several turns."""
    conn.execute("ALTER TABLE checkpoints ADD COLUMN last_turn INTEGER")


@_migration
def plain_checkpoints(conn: sqlite3.Connection) -> None:
    """Schema 4: a checkpoint is its turn's whole state, one compressed JSON document a
    row, and the hash of the blob it was compressed against
    (:mod:`gr_notebook.history.checkpoint_store`). Checkpoints in the earlier format
    stay as they were, in ``old_checkpoints``, so that resume and fork can say why they
    refuse them; a store that holds none drops the old table."""
    (held,) = conn.execute("SELECT EXISTS (SELECT 1 FROM checkpoints)").fetchone()
    if held:
        conn.execute("ALTER TABLE checkpoints RENAME TO old_checkpoints")
    else:
        conn.execute("DROP TABLE checkpoints")
    conn.execute(
        """CREATE TABLE checkpoints (
            run_id TEXT NOT NULL REFERENCES runs(run_id), turn INTEGER NOT NULL,
            seq INTEGER NOT NULL, time REAL NOT NULL, state BLOB NOT NULL,
            base TEXT NOT NULL, PRIMARY KEY (run_id, turn))"""
    )


@_migration
def add_labels(conn: sqlite3.Connection) -> None:
    """Schema 5: labels, each a person's (or a rule's) word on whether a guardrail should
    have acted at one recorded point of a run (:mod:`gr_notebook.review.labels`). Every
    label is kept, with who gave it and when, keyed by what it says rather than by a row
    number, so that merging stores never makes two labels one. ``kind`` is empty for a label
    of the point whatever guardrail decides there; ``settles`` marks the label that settles a
    disagreement. No other table changes."""
    conn.execute(
        """CREATE TABLE labels (
            run_id TEXT NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,
            kind TEXT NOT NULL, label INTEGER NOT NULL, who TEXT NOT NULL, note TEXT,
            given_at REAL NOT NULL, settles INTEGER NOT NULL,
            PRIMARY KEY (run_id, seq, kind, who, given_at))"""
    )


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply pending migrations atomically; IMMEDIATE makes concurrent openers take turns."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)"
        )
        applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        for migration in MIGRATIONS:
            if migration.__name__ not in applied:
                migration(conn)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                    (migration.__name__, time.time()),
                )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def _dumps(value: Mapping[str, Any]) -> str:
    """Encode as JSON without ever failing, so no event is lost to an odd value.

    Values JSON can't hold fall back to ``repr``; if the mapping still can't be encoded
    (non-string keys, cycles) every top-level value is ``repr``-ed. Lone surrogates, which
    SQLite can't store as UTF-8, are escaped.
    """
    try:
        text = json.dumps(dict(value), default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        text = json.dumps({str(k): repr(v) for k, v in value.items()}, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(json.loads(text))  # ensure_ascii=True escapes the surrogates
    return text


_UNREADABLE: Final = object()


def _loads(text: str | None, kind: type[dict[str, Any]] | type[list[Any]]) -> Any:
    """A JSON cell decoded, ``None`` for NULL, or :data:`_UNREADABLE` if it is damaged or is
    not a ``kind``."""
    if text is None:
        return None
    try:
        return parse_json(text, kind)
    except DamagedRow:
        return _UNREADABLE


def _event(seq: int, kind: str, turn: int, phase: int, at: float, data: str) -> Event:
    """An event row; a payload that cannot be decoded becomes an untyped event with
    ``{"unreadable": why, "raw": the first 400 characters}``, so the rest of the run stays
    readable. A column of the wrong type (a crafted row) raises :class:`DamagedRow`: an
    event's place in the run cannot be guessed."""
    checked(seq, int, "seq")
    checked(kind, str, "kind")
    checked(turn, int, "turn")
    checked(phase, int, "phase")
    checked(at, float, "time")
    try:
        payload = parse_json(data, dict)
    except DamagedRow as exc:
        unreadable = {"unreadable": str(exc), "raw": str(data)[:400]}
        return Event(seq, kind, turn, phase, at, MappingProxyType(unreadable))
    return decode(kind, MappingProxyType(payload), seq=seq, turn=turn, phase=phase, time=at)


def _text(raw: bytes) -> str:
    """SQLite TEXT as str; bytes that are not UTF-8 are replaced rather than failing the
    whole query (a damaged cell then reads as unreadable JSON, not as a crash)."""
    return raw.decode("utf-8", errors="replace")


_RUNS_QUERY: Final = """
    SELECT r.run_id, r.status, r.model, r.workspace, r.instructions, r.started_at, r.finished_at,
           r.error, (SELECT COUNT(*) FROM events e WHERE e.run_id = r.run_id) AS n_events,
           j.status AS job_status, j.completed_at, j.summary, j.confidence, j.deliverables,
           j.notes, r.config
    FROM runs r LEFT JOIN jobs j ON j.run_id = r.run_id
    ORDER BY r.started_at DESC, r.rowid DESC
"""

_RUN_COLUMNS: Final[Mapping[str, type]] = {
    "run_id": str,
    "status": str,
    "model": str,
    "workspace": str,
    "instructions": str,
    "started_at": float,
    "finished_at": float,
    "error": str,
    "job_status": str,
    "completed_at": float,
    "summary": str,
    "confidence": float,
    "notes": str,
}
"""The scalar columns :meth:`Store.runs` reads, and what each holds (or NULL, but the id
and the status); the JSON cells are read apart, leniently."""

_LABEL_COLUMNS: Final[Mapping[str, type]] = {
    "run_id": str,
    "seq": int,
    "kind": str,
    "label": int,
    "who": str,
    "note": str,
    "given_at": float,
    "settles": int,
}


def writable_path(path: str | os.PathLike[str], *, make: bool = True) -> Path:
    """The absolute path of a store to be written at ``path``, whose folder is there: the
    default location's folder (``gr_runs/``) is made (unless ``make`` is off, to check a
    path before it is used), any other must exist already, or it is a ConfigError naming it
    (a mistyped path makes no folder, anywhere)."""
    absolute = Path(path).absolute()
    folder = absolute.parent
    if absolute == DEFAULT_STORE_PATH.absolute():
        if not make:
            return absolute
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot make the folder {folder} for the run store: {exc}") from exc
    elif not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(
            f"the run store's folder {folder} {what}; make it first "
            f"(os.makedirs({str(folder)!r})), or give a store path in a folder that exists "
            f"(only the default, {DEFAULT_STORE_PATH}, has its folder made)"
        )
    return absolute


class Store:
    """One SQLite connection shared by every thread of a kernel, serialised by a lock.

    Failures raise :class:`StoreError`, not ``sqlite3`` errors, so callers need to know only
    gr_notebook's error hierarchy; a path in a folder that does not exist is a
    :class:`ConfigError` (:func:`writable_path`).
    """

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_STORE_PATH, *, create: bool = True
    ) -> None:
        """Open the store at ``path``, made there if need be in a folder that exists
        (:func:`writable_path`); ``create=False`` (to read it) refuses, creating nothing,
        when there is none there (:func:`reading`)."""
        # Absolute, so a later os.chdir in the notebook can't make .path or messages lie.
        self._path = Path(path).absolute()
        self._lock = threading.Lock()
        self._closed = False
        if create:
            self._path = writable_path(path)
        elif not self._path.exists():
            raise StoreError(
                f"there is no run store at {self._path}; nothing was recorded there. Pass "
                "store= the path your agent recorded into (gr.Agent(store=...), by default "
                f"{DEFAULT_STORE_PATH} in the folder it ran from)"
            )
        try:
            if create:
                self._conn = sqlite3.connect(self._path, check_same_thread=False)
            else:  # mode=rw: a file deleted since the check is not made again
                uri = f"{self._path.as_uri()}?mode=rw"
                self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise self._open_error(exc) from exc
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA busy_timeout = 5000")
            self._conn.execute("PRAGMA foreign_keys = ON")
            _migrate(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._open_error(exc) from exc
        self._conn.row_factory = sqlite3.Row
        self._conn.text_factory = _text

    @property
    def path(self) -> Path:
        return self._path

    def _open_error(self, exc: BaseException) -> StoreError:
        return StoreError(
            f"cannot open run store {self._path}: {exc}. If it is not a gr_notebook store, "
            "move it aside or pass gr.Agent(store=...) another path."
        )

    def damaged(self, what: str, why: object) -> StoreError:
        """The error for a stored row that cannot be read: ``what`` names the row (the run,
        the turn), ``why`` says what is wrong with it (a :class:`DamagedRow`)."""
        return StoreError(
            f"{what} in run store {self._path} cannot be read: {why}. The store is damaged: "
            "restore it from a copy, or move it aside"
        )

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[sqlite3.Row], int]:
        """Run one statement under the lock; a write is committed before this returns."""
        with self.transaction() as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall(), cursor.rowcount

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, for statements committed together or not at
        all (a checkpoint's rows); failures raise :class:`StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"run store {self._path} is closed; open a new Store to use it")
            try:
                with self._conn:
                    yield self._conn
            except sqlite3.Error as exc:
                raise StoreError(f"run store {self._path} failed: {exc}") from exc

    def record_run_started(
        self,
        run_id: str,
        *,
        started_at: float,
        model: str,
        workspace: str,
        instructions: str,
        config: Mapping[str, Any],
    ) -> None:
        """Create the run; raises StoreError if ``run_id`` was already recorded."""
        self._execute(
            "INSERT INTO runs (run_id, status, model, workspace, instructions, config,"
            " started_at) VALUES (?, 'running', ?, ?, ?, ?, ?)",
            (run_id, model, workspace, instructions, _dumps(config), started_at),
        )

    def record_event(self, run_id: str, event: Event) -> None:
        e = event
        self._execute(
            "INSERT INTO events (run_id, seq, kind, turn, phase, time, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, e.seq, e.kind, e.turn, e.phase, e.time, _dumps(e.to_data())),
        )

    def record_run_finished(
        self, run_id: str, *, status: str, finished_at: float, error: str | None = None
    ) -> None:
        _, changed = self._execute(
            "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
            (status, finished_at, error, run_id),
        )
        if not changed:  # an UPDATE of nothing would silently drop the outcome
            raise StoreError(
                f"run {run_id!r} is not in run store {self._path}; call record_run_started first"
            )

    def record_job(
        self,
        run_id: str,
        *,
        status: str,
        completed_at: float | None,
        summary: str | None,
        deliverables: Sequence[str],
        confidence: float | None,
        notes: str | None,
    ) -> None:
        """Insert or replace the run's job: a job may be reported more than once."""
        deliverables_json = json.dumps(list(deliverables))  # ASCII: paths may hold surrogates
        self._execute(
            "INSERT INTO jobs (run_id, status, completed_at, summary, deliverables, confidence,"
            " notes) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
            " status = excluded.status, completed_at = excluded.completed_at,"
            " summary = excluded.summary, deliverables = excluded.deliverables,"
            " confidence = excluded.confidence, notes = excluded.notes",
            (run_id, status, completed_at, summary, deliverables_json, confidence, notes),
        )

    def runs(self) -> list[dict[str, Any]]:
        """Newest first; job columns are None for a run that never reported a job. Statuses
        stored before ``ended`` existed read in its words (:func:`status_as_read`).

        A JSON cell that cannot be decoded reads as empty (``{}`` config, ``None``
        deliverables) and is named in the run's ``unreadable`` list, so one damaged row hides
        nothing else; ``unreadable`` is None for a sound row.
        """
        result = []
        for row in self._execute(_RUNS_QUERY)[0]:
            run = dict(row)
            try:
                for name, kind in _RUN_COLUMNS.items():
                    checked(run[name], kind, name, null=name not in ("run_id", "status"))
            except DamagedRow as exc:
                raise self.damaged(f"the row of run {run['run_id']!r}", exc) from None
            unreadable = []
            deliverables = _loads(run["deliverables"], list)
            if deliverables is _UNREADABLE:
                unreadable.append("deliverables")
                deliverables = None
            config = _loads(run["config"], dict)
            if config is _UNREADABLE:
                unreadable.append("config")
            run["deliverables"] = deliverables
            run["config"] = config if isinstance(config, dict) else {}
            job = run["completed_at"] is not None  # set for a reported job only
            run["status"] = status_as_read(run["status"], job=job)
            if run["job_status"] is not None:
                run["job_status"] = status_as_read(run["job_status"], job=job)
            run["unreadable"] = sorted(unreadable) or None
            result.append(run)
        return result

    def events(self, run_id: str) -> list[Event]:
        """The run's events in order; a row whose payload cannot be decoded is kept, marked
        (see :func:`_event`). Raises StoreError only when not one of them can be read."""
        rows, _ = self._execute(
            "SELECT seq, kind, turn, phase, time, data FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        events = [self._event(run_id, row) for row in rows]
        if events and all("unreadable" in e.data for e in events):
            raise StoreError(
                f"none of the {len(events)} events of run {run_id!r} in run store {self._path} "
                "can be decoded; the file is damaged: restore it from a copy, or move it aside"
            )
        return events

    def events_of_kind(self, *kinds: str) -> list[tuple[str, Event]]:
        """``(run_id, event)`` for every stored event of these kinds, across all runs."""
        if not kinds:
            return []
        marks = ", ".join("?" for _ in kinds)
        rows, _ = self._execute(
            "SELECT run_id, seq, kind, turn, phase, time, data FROM events "
            f"WHERE kind IN ({marks}) ORDER BY run_id, seq",
            kinds,
        )
        found = [(run_id, self._event(run_id, row)) for run_id, *row in rows]
        if found and all("unreadable" in e.data for _, e in found):
            raise StoreError(
                f"none of the {len(found)} stored events of kind {', '.join(kinds)} in run "
                f"store {self._path} can be decoded; the file is damaged: restore it from a "
                "copy, or move it aside"
            )
        return found

    def _event(self, run_id: str, row: Sequence[Any]) -> Event:
        try:
            return _event(*row)
        except DamagedRow as exc:
            raise self.damaged(f"event {row[0]} of run {run_id!r}", exc) from None

    def record_label(
        self,
        run_id: str,
        seq: int,
        *,
        label: bool,
        kind: str,
        who: str,
        note: str | None,
        given_at: float,
        settles: bool = False,
    ) -> None:
        """Keep one label (schema 5); every label is kept, a later one beside an earlier."""
        self._execute(
            "INSERT OR REPLACE INTO labels (run_id, seq, kind, label, who, note, given_at,"
            " settles) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, seq, kind, int(label), who, note, given_at, int(settles)),
        )

    def labels(self) -> list[dict[str, Any]]:
        """Every label kept here, oldest first, each as a dict of its columns (``label``
        and ``settles`` as booleans); a row that is not what it should be is a
        :class:`StoreError` naming it."""
        rows, _ = self._execute(
            "SELECT run_id, seq, kind, label, who, note, given_at, settles FROM labels"
            " ORDER BY given_at, rowid"
        )
        found = []
        for row in rows:
            label = dict(row)
            try:
                for name, kind in _LABEL_COLUMNS.items():
                    checked(label[name], kind, name, null=name == "note")
            except DamagedRow as exc:
                raise self.damaged(f"a label of run {label['run_id']!r}", exc) from None
            label["label"], label["settles"] = bool(label["label"]), bool(label["settles"])
            found.append(label)
        return found

    def run_ids(self) -> list[str]:
        """Newest first, matching :meth:`runs`."""
        rows, _ = self._execute("SELECT run_id FROM runs ORDER BY started_at DESC, rowid DESC")
        return [row[0] for row in rows]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Store {self._path} ({state})>"


@contextlib.contextmanager
def reading(store: StoreLike | None) -> Iterator[Store]:
    """The store to read from: the :class:`Store` given, left open, or the one at a path
    (default :data:`DEFAULT_STORE_PATH`), opened with ``create=False`` and closed after. A
    store that is read must exist: a mistyped path is a StoreError naming it, and leaves
    no empty store behind (a run's ``store=`` creates one)."""
    if isinstance(store, Store):
        yield store
        return
    with Store(DEFAULT_STORE_PATH if store is None else store, create=False) as opened:
        yield opened
