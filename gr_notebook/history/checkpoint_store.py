"""The checkpoint tables of the run store: blobs by hash, checkpoints, lineage.

A checkpoint keeps, as one JSON text, the run state's parts that changed since the run's
last checkpoint (whole, or the keys that changed) and what the run's append-only logs
gained since then (layer 5's new messages, the feedback's new tool calls); and the hash of
the workspace's root folder. Reading a checkpoint back replays the checkpoints up to it.
Every blob (a file, a folder) is keyed by the hash of its content, so what did not change is
never written twice. The checkpoints of consecutive turns committed together are one row
of the table (:func:`batched`): a fast run pays one insert per commit, not one per turn.
The JSON is orjson's, checked for what orjson would write differently from ``json``
(:func:`json_bytes`). The tables are created by the store's ``add_checkpoints`` migration
(schema 2); ``batch_checkpoints`` (schema 3) lets a row hold several turns.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, eq, ne, or_
from typing import Any, Final, NamedTuple

import orjson
from orjson import Fragment

from gr_notebook.errors import StoreError
from gr_notebook.history.cells import DamagedRow, checked, json_kind, parse_json
from gr_notebook.history.store import Store

__all__ = [
    "CHECKPOINTS_MIGRATION",
    "RELATIONS",
    "RESUMABLE",
    "BlobRow",
    "CheckpointRow",
    "Lineage",
    "batched",
    "blob",
    "checkpoint",
    "checkpoint_rows",
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
        if not checked or data.find(b"null") == -1 or finite(value) or orjson.loads(data) == value:
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
    The blobs go first. Rows of consecutive turns go in as one row (:func:`batched`): a
    fast run's 50 ms of turns cost one insert, not dozens (decision 283)."""
    if blobs:
        conn.executemany(
            "INSERT OR IGNORE INTO blobs (digest, size, zlib, data) VALUES (?, ?, ?, ?)", blobs
        )
    stored = batched(rows)
    try:
        conn.executemany(_INSERT_CHECKPOINT, stored)
    except sqlite3.IntegrityError:  # a turn written again: the new row replaces the old
        conn.executemany(_REPLACE_CHECKPOINT, stored)


def batched(rows: Sequence[CheckpointRow]) -> list[tuple[Any, ...]]:
    """``rows`` as the table keeps them: each run of consecutive turns of one run as a row
    from its first turn to its last (``last_turn``), whose ``state`` is the JSON array of
    ``[seq, time, files, state]`` of each turn (``files`` null when it is the previous
    one's), and whose other columns are its last turn's; a turn on its own as a row of
    that turn, ``last_turn`` NULL. The rows are split and joined column by column, in C: a
    fast run hands over a hundred turns at a time."""
    if len(rows) < 2:
        return [(*row, None) for row in rows]
    run_ids, turns, seqs, times, states, files = zip(*rows, strict=True)
    cuts = [
        *compress(
            range(1, len(rows)),
            map(or_, map(ne, run_ids[1:], run_ids), map(ne, turns[1:], map(add, turns, repeat(1)))),
        ),
        len(rows),
    ]
    shown = list(files)  # the array names the files only where they changed
    for index in compress(range(1, len(rows)), map(eq, files[1:], files)):
        shown[index] = None
    stored: list[tuple[Any, ...]] = []
    start = 0
    for end in cuts:
        last = end - 1
        if start == last:
            stored.append((*rows[last], None))
        else:
            shown[start] = files[start]
            entries = zip(
                seqs[start:end],
                times[start:end],
                shown[start:end],
                map(Fragment, states[start:end]),
                strict=True,
            )
            stored.append(
                (
                    run_ids[last],
                    turns[start],
                    seqs[last],
                    times[last],
                    orjson.dumps([*entries]),
                    files[last],
                    turns[last],
                )
            )
        start = end
    return stored


_COLUMNS_AND_VALUES: Final = (
    " INTO checkpoints (run_id, turn, seq, time, state, files, last_turn)"
    " VALUES (?, ?, ?, ?, CAST(? AS TEXT), ?, ?)"
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


_CHECKPOINT_COLUMNS: Final = "run_id, turn, seq, time, state, files, last_turn"


def _expanded(found: Sequence[Any]) -> list[tuple[CheckpointRow, Any]]:
    """A stored row as the checkpoints it holds: one, its state the row's text (``None``
    beside it), or a batch's (:func:`batched`), each state decoded beside an empty text.
    A row that is not so (a crafted one) raises :class:`DamagedRow` saying what is wrong."""
    run_id, turn, seq, at, state, files, last_turn = found
    checked(turn, int, "turn")
    checked(seq, int, "seq")
    checked(at, float, "time")
    checked(files, str, "files (the hash of its root folder)")
    checked(last_turn, int, "last turn", null=True)
    if last_turn is None:
        return [(CheckpointRow(run_id, turn, seq, at, state, files), None)]
    entries = parse_json(state, list)
    if len(entries) != last_turn - turn + 1:
        raise DamagedRow(f"it holds {len(entries)} checkpoints, not {last_turn - turn + 1}")
    expanded = []
    files = None
    for offset, entry in enumerate(entries):
        at_turn = f"turn {turn + offset}'s"
        if not isinstance(entry, list) or len(entry) != 4:
            raise DamagedRow(f"{at_turn} entry is {json_kind(entry)}, not [seq, time, files, part]")
        seq, at, named, part = entry
        checked(seq, int, f"{at_turn} seq")
        checked(at, float, f"{at_turn} time")
        files = checked(named, str, f"{at_turn} files", null=True) or files
        if files is None:
            raise DamagedRow(f"{at_turn} entry names no files")
        if not isinstance(part, dict):
            raise DamagedRow(f"{at_turn} state is {json_kind(part)}, not an object")
        expanded.append((CheckpointRow(run_id, turn + offset, seq, at, "", files), part))
    return expanded


def _row_name(run_id: object, turn: object, last_turn: object) -> str:
    """A stored checkpoints row, as a message names it."""
    if last_turn is None or last_turn == turn:
        return f"the checkpoint of turn {turn!r} of run {run_id}"
    return f"the checkpoints of turns {turn!r}–{last_turn!r} of run {run_id}"


def _with_text(row: CheckpointRow, state: Any) -> CheckpointRow:
    """A checkpoint with its state as the text a row of its own keeps (compact, UTF-8)."""
    if state is None:
        return row
    return row._replace(state=json.dumps(state, separators=(",", ":"), ensure_ascii=False))


def _checkpoints(
    store: Store, where: str, params: tuple[object, ...]
) -> list[tuple[CheckpointRow, Any]]:
    """The checkpoints of the stored rows ``where`` selects, in turn order (a batch's with
    their states decoded, see :func:`_expanded`); a row written later replaces an earlier
    one's checkpoint of a turn (a turn taken again). A damaged row raises StoreError."""
    with store.transaction() as conn:
        found = conn.execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE {where} ORDER BY rowid",
            params,
        ).fetchall()
    latest: dict[int, tuple[CheckpointRow, Any]] = {}
    for stored in found:
        try:
            expanded = _expanded(stored)
        except DamagedRow as exc:
            raise store.damaged(_row_name(stored[0], stored[1], stored[-1]), exc) from None
        for checkpoint in expanded:
            latest[checkpoint[0].turn] = checkpoint
    return [latest[turn] for turn in sorted(latest)]


def checkpoint(store: Store, run_id: str, turn: int | None = None) -> CheckpointRow | None:
    """The checkpoint of ``turn``, or the run's latest when ``turn`` is None."""
    if turn is None:
        with store.transaction() as conn:
            (turn,) = conn.execute(
                "SELECT MAX(COALESCE(last_turn, turn)) FROM checkpoints WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        if turn is None:
            return None
    where = "run_id = ? AND turn <= ? AND COALESCE(last_turn, turn) >= ?"
    for row, state in _checkpoints(store, where, (run_id, turn, turn)):
        if row.turn == turn:
            return _with_text(row, state)
    return None


def checkpoint_rows(store: Store, run_id: str) -> list[CheckpointRow]:
    """Every checkpoint of the run, in turn order (a batch's with their states as text)."""
    found = _checkpoints(store, "run_id = ?", (run_id,))
    return [_with_text(row, state) for row, state in found]


def states_upto(store: Store, row: CheckpointRow) -> list[Any]:
    """The states (decoded) of the run's checkpoints up to ``row``'s, in turn order."""
    found = _checkpoints(store, "run_id = ? AND turn <= ?", (row.run_id, row.turn))
    return [
        store.decode(checkpoint.state, dict, _row_name(row.run_id, checkpoint.turn, None))
        if state is None
        else state
        for checkpoint, state in found
        if checkpoint.turn <= row.turn
    ]


_TURNS_QUERY: Final = "SELECT run_id, turn, last_turn, length(state) FROM checkpoints"


def _turns(store: Store, found: Sequence[Any]) -> range:
    """The turns a stored row holds (``last_turn`` NULL: its own), read from its columns
    only. A batch holds an entry of several bytes per turn, so a row that claims more
    turns than its state has bytes is damaged: a crafted ``last_turn`` of 10**15 must not
    make a reader list a quadrillion turns."""
    run_id, first, last, size = found
    try:
        checked(first, int, "turn")
        checked(last, int, "last turn", null=True)
        if last is None:
            return range(first, first + 1)
        if last < first:
            raise DamagedRow(f"its last turn, {last}, comes before its first")
        if last - first >= (size or 0):
            raise DamagedRow(f"its {size or 0} bytes of state cannot hold {last - first + 1} turns")
    except DamagedRow as exc:
        raise store.damaged(_row_name(run_id, first, last), exc) from None
    return range(first, last + 1)


def checkpoint_turns(store: Store, run_id: str) -> list[int]:
    with store.transaction() as conn:
        found = conn.execute(f"{_TURNS_QUERY} WHERE run_id = ?", (run_id,)).fetchall()
    return sorted({t for row in found for t in _turns(store, row)})


def checkpoints_by_run(store: Store) -> dict[str, tuple[int, int]]:
    """``run_id -> (checkpoints, latest turn)`` for every run that has any."""
    with store.transaction() as conn:
        found = conn.execute(_TURNS_QUERY).fetchall()
    turns: dict[str, set[int]] = {}
    for row in found:
        turns.setdefault(row[0], set()).update(_turns(store, row))
    return {run_id: (len(held), max(held)) for run_id, held in turns.items()}


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


def record_lineage(store: Store, link: Lineage) -> Lineage | None:
    """Record ``link``, or return the resume that took its place: a run is resumed once,
    so when ``link`` is a resume and its parent was resumed already, nothing is recorded
    and that resume's link is returned. The check and the insert are one write
    transaction (``BEGIN IMMEDIATE``: another process's waits for it), so of two resumes
    racing, in one process or two, exactly one is recorded."""
    with store.transaction() as conn:
        if not conn.in_transaction:  # else a deferred write holds the write lock already
            conn.execute("BEGIN IMMEDIATE")
        if link.relation == "resume":
            found = conn.execute(
                "SELECT run_id, parent_run_id, parent_turn, relation FROM lineage"
                " WHERE parent_run_id = ? AND relation = 'resume' ORDER BY rowid LIMIT 1",
                (link.parent_run_id,),
            ).fetchone()
            if found is not None:
                return Lineage(*found)
        conn.execute(
            "INSERT INTO lineage (run_id, parent_run_id, parent_turn, relation)"
            " VALUES (?, ?, ?, ?)",
            (link.run_id, link.parent_run_id, link.parent_turn, link.relation),
        )
    return None


def lineage(store: Store, run_ids: Iterable[str] | None = None) -> list[Lineage]:
    """Every link in the store (or those of ``run_ids``, as child or parent)."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT run_id, parent_run_id, parent_turn, relation FROM lineage ORDER BY rowid"
        ).fetchall()
    links = [_link(store, row) for row in rows]
    if run_ids is None:
        return links
    wanted = set(run_ids)
    return [x for x in links if x.run_id in wanted or x.parent_run_id in wanted]


RELATIONS: Final = frozenset({"fork", "resume"})


def _link(store: Store, row: Sequence[Any]) -> Lineage:
    """A lineage row, checked: StoreError naming the run when a column is not what it
    should hold (SQLite keeps any value in any column)."""
    run_id, parent_run_id, parent_turn, relation = row
    try:
        checked(run_id, str, "run id")
        checked(parent_run_id, str, "parent's run id")
        checked(parent_turn, int, "parent's turn")
        if relation not in RELATIONS:
            raise DamagedRow(f"its relation is {relation!r}, neither 'fork' nor 'resume'")
    except DamagedRow as exc:
        raise store.damaged(f"the lineage of run {run_id!r}", exc) from None
    return Lineage(run_id, parent_run_id, parent_turn, relation)


def migrated_at(store: Store, name: str = CHECKPOINTS_MIGRATION) -> float | None:
    """When this store gained a migration: runs started before it have no checkpoints."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT applied_at FROM _migrations WHERE name = ?", (name,)
        ).fetchone()
    return float(found[0]) if found and found[0] is not None else None
