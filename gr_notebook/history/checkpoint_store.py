"""The checkpoint tables of the run store: blobs by hash, checkpoints, lineage.

A checkpoint row keeps, as one JSON text, the run state's parts that changed since the
run's last checkpoint (whole, or the keys that changed) and what the run's append-only
logs gained since then (layer 5's new messages, the feedback's new tool calls); and the
hash of the workspace's root folder. Reading a checkpoint back replays the rows up to it.
Every blob (a file, a folder) is keyed by the hash of its content, so what did not change is
never written twice, and a turn costs one row. The JSON is orjson's, checked for what
orjson would write differently from ``json`` (:func:`json_bytes`). The tables are created
by the store's ``add_checkpoints`` migration (schema 2).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson

from gr_notebook.errors import StoreError
from gr_notebook.history.store import Store

__all__ = [
    "CHECKPOINTS_MIGRATION",
    "RESUMABLE",
    "BlobRow",
    "CheckpointRow",
    "Lineage",
    "blob",
    "checkpoint",
    "checkpoint_turns",
    "checkpoints_by_run",
    "copy_events",
    "digest_of",
    "finite",
    "insert_checkpoints",
    "json_bytes",
    "lineage",
    "migrated_at",
    "pack_blobs",
    "record_lineage",
    "states_upto",
    "write_checkpoint",
]

CHECKPOINTS_MIGRATION: Final = "add_checkpoints"
RESUMABLE: Final = frozenset({"interrupted", "cancelled", "failed"})
"""The statuses ``gr.resume`` takes (``running`` too, once its process is gone)."""
COMPRESS_ABOVE: Final = 1024
"""Blobs longer than this many bytes are stored zlib-compressed (level 1: cheap)."""


_ORJSON_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""What ``json`` would refuse (a subclass, a dataclass, a datetime) goes to ``default``."""


def json_bytes(
    value: Any,
    default: Callable[[Any], Any] | None = None,
    *,
    checked: bool = True,
    sort_keys: bool = False,
) -> bytes:
    """Compact JSON, UTF-8, that ``json.loads`` reads back as ``value``: orjson's, which costs a
    sixth of ``json.dumps``, unless orjson refuses the value (an int over 64 bits, a lone
    surrogate, a key that is not a string) or, when ``checked``, would change it (it writes
    a NaN or an infinity as null, with no option to refuse them: ijl/orjson#441): then
    ``json.dumps``'s, as before. Output without a ``null`` holds neither, so only output
    with one is looked at, with :func:`finite`, then a round trip. ``checked=False`` is for
    values known to hold no float that is not finite (a folder's names and hashes)."""
    try:
        option = _ORJSON_OPTIONS | orjson.OPT_SORT_KEYS if sort_keys else _ORJSON_OPTIONS
        data = orjson.dumps(value, default=default, option=option)
        if not checked or b"null" not in data or finite(value) or orjson.loads(data) == value:
            return data
    except TypeError:  # orjson.JSONEncodeError
        pass
    text = json.dumps(value, separators=(",", ":"), default=default, sort_keys=sort_keys)
    return text.encode()


def finite(value: Any) -> bool:
    """True when ``value`` surely holds no NaN and no infinity (False: look closer).

    ``marshal`` (version 2: no table of shared objects to build) walks the value in C and
    writes each float as its 8 bytes, little-endian: a NaN or an infinity has every exponent
    bit set, so its last two bytes are 0xF0-0xFF then 0x7F or 0xFF, a pair that UTF-8 text
    never holds. Other bytes (an int, a length) may look so too, rarely; then the caller
    compares a round trip instead."""
    try:
        data = marshal.dumps(value, 2)
    except ValueError:  # a type marshal does not know
        return False
    for mark in (0x7F, 0xFF):  # bytes.find is memchr: cheaper than a regular expression
        at = data.find(mark, 1)
        while at != -1:
            if data[at - 1] >= 0xF0:
                return False
            at = data.find(mark, at + 1)
    return True


def digest_of(data: bytes) -> str:
    """The content address of ``data``: BLAKE2b, 128 bits, as 32 hex digits."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class CheckpointRow(NamedTuple):
    """One turn's checkpoint: the state when the turn began, before its model call.

    A named tuple, not a dataclass: it is made at every turn and goes to SQLite as it is,
    in its columns' order."""

    run_id: str
    turn: int
    seq: int
    """The seq of the run's last event at the checkpoint."""
    time: float
    state: str | bytes
    """JSON (UTF-8 bytes as a checkpoint writes it, text as it is read back): the counters,
    the parts that changed, and what the run's logs gained since its previous checkpoint."""
    files: str
    """The hash of the workspace's root folder blob."""


@dataclass(frozen=True, slots=True)
class Lineage:
    """A run started from another run's checkpoint: a fork, or a resume."""

    run_id: str
    parent_run_id: str
    parent_turn: int
    relation: str


def write_checkpoint(store: Store, row: CheckpointRow, blobs: Mapping[str, bytes]) -> int:
    """Record a checkpoint and its new blobs in one transaction: a kill mid-write leaves
    the previous checkpoint the latest. Returns the bytes written (blobs and row)."""
    packed, written = pack_blobs(blobs)
    with store.transaction() as conn:
        insert_checkpoints(conn, (row,), packed)
    return written + len(row.state) + len(row.files)


BlobRow = tuple[str, int, int, bytes]
"""A blob as stored: its hash, its size, whether it is compressed, its bytes."""


def pack_blobs(blobs: Mapping[str, bytes]) -> tuple[list[BlobRow], int]:
    """``{hash: content}`` as rows to store (zlib above :data:`COMPRESS_ABOVE` bytes,
    when that is shorter), and the bytes they hold."""
    packed: list[BlobRow] = []
    written = 0
    for digest, data in blobs.items():
        stored = zlib.compress(data, 1) if len(data) > COMPRESS_ABOVE else data
        compressed = len(stored) < len(data)
        if not compressed:
            stored = data
        written += len(stored)
        packed.append((digest, len(data), int(compressed), stored))
    return packed, written


def insert_checkpoints(
    conn: sqlite3.Connection, rows: Sequence[CheckpointRow], blobs: Sequence[BlobRow]
) -> None:
    """Record ``rows``, in turn order, and the new blobs they name, on ``conn``, inside a
    transaction the caller commits (a run's rows ride with an event: :meth:`Store.defer`).
    The blobs go first; a row that fails leaves the rows before it."""
    if blobs:
        conn.executemany(
            "INSERT OR IGNORE INTO blobs (digest, size, zlib, data) VALUES (?, ?, ?, ?)", blobs
        )
    try:
        conn.executemany(_INSERT_CHECKPOINT, rows)
    except sqlite3.IntegrityError:  # a turn written again: the new row replaces the old
        conn.executemany(_REPLACE_CHECKPOINT, rows)


_COLUMNS_AND_VALUES: Final = (
    " INTO checkpoints (run_id, turn, seq, time, state, files)"
    " VALUES (?, ?, ?, ?, CAST(? AS TEXT), ?)"
)
_INSERT_CHECKPOINT: Final = "INSERT" + _COLUMNS_AND_VALUES
"""``state`` goes in as the UTF-8 bytes orjson wrote and is kept as text: no decoding to
a ``str`` and encoding back for SQLite. A plain ``INSERT`` costs a sixth less than ``INSERT
OR REPLACE`` (:data:`_REPLACE_CHECKPOINT`), which is only needed when a turn is written
again."""
_REPLACE_CHECKPOINT: Final = "INSERT OR REPLACE" + _COLUMNS_AND_VALUES


def blob(store: Store, digest: str) -> bytes:
    """The content stored under ``digest``; StoreError if it is missing or damaged."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT size, zlib, data FROM blobs WHERE digest = ?", (digest,)
        ).fetchone()
    if found is None:
        raise StoreError(
            f"run store {store.path} lacks blob {digest} that a checkpoint names; the store "
            "is damaged: restore it from a copy"
        )
    size, compressed, data = found
    try:
        content = zlib.decompress(data) if compressed else bytes(data)
    except zlib.error as exc:
        raise StoreError(f"blob {digest} in run store {store.path} is damaged ({exc})") from None
    if len(content) != size or digest_of(content) != digest:
        raise StoreError(f"blob {digest} in run store {store.path} is damaged (wrong content)")
    return content


_CHECKPOINT_COLUMNS: Final = "run_id, turn, seq, time, state, files"


def checkpoint(store: Store, run_id: str, turn: int | None = None) -> CheckpointRow | None:
    """The checkpoint of ``turn``, or the run's latest when ``turn`` is None."""
    sql = f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id = ?"
    params: tuple[object, ...] = (run_id,)
    if turn is None:
        sql += " ORDER BY turn DESC LIMIT 1"
    else:
        sql += " AND turn = ?"
        params = (run_id, turn)
    with store.transaction() as conn:
        found = conn.execute(sql, params).fetchone()
    return CheckpointRow(*found) if found is not None else None


def states_upto(store: Store, row: CheckpointRow) -> list[str]:
    """The ``state`` JSON of the run's checkpoints up to ``row``'s, in turn order."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT state FROM checkpoints WHERE run_id = ? AND turn <= ? ORDER BY turn",
            (row.run_id, row.turn),
        ).fetchall()
    return [text for (text,) in rows]


def checkpoint_turns(store: Store, run_id: str) -> list[int]:
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT turn FROM checkpoints WHERE run_id = ? ORDER BY turn", (run_id,)
        ).fetchall()
    return [row[0] for row in rows]


def checkpoints_by_run(store: Store) -> dict[str, tuple[int, int]]:
    """``run_id -> (checkpoints, latest turn)`` for every run that has any."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT run_id, COUNT(*), MAX(turn) FROM checkpoints GROUP BY run_id"
        ).fetchall()
    return {run_id: (count, last) for run_id, count, last in rows}


def copy_events(store: Store, source: str, target: str, upto_seq: int) -> None:
    """Give ``target`` the events of ``source`` up to ``upto_seq``, so a resumed or forked
    run's record is whole on its own."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO events (run_id, seq, kind, turn, phase, time, data)"
            " SELECT ?, seq, kind, turn, phase, time, data FROM events"
            " WHERE run_id = ? AND seq <= ? ORDER BY seq",
            (target, source, upto_seq),
        )


def record_lineage(store: Store, link: Lineage) -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO lineage (run_id, parent_run_id, parent_turn, relation)"
            " VALUES (?, ?, ?, ?)",
            (link.run_id, link.parent_run_id, link.parent_turn, link.relation),
        )


def lineage(store: Store, run_ids: Iterable[str] | None = None) -> list[Lineage]:
    """Every link in the store (or those of ``run_ids``, as child or parent)."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT run_id, parent_run_id, parent_turn, relation FROM lineage ORDER BY rowid"
        ).fetchall()
    links = [Lineage(*row) for row in rows]
    if run_ids is None:
        return links
    wanted = set(run_ids)
    return [x for x in links if x.run_id in wanted or x.parent_run_id in wanted]


def migrated_at(store: Store, name: str = CHECKPOINTS_MIGRATION) -> float | None:
    """When this store gained a migration: runs started before it have no checkpoints."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT applied_at FROM _migrations WHERE name = ?", (name,)
        ).fetchone()
    return float(found[0]) if found and found[0] is not None else None
