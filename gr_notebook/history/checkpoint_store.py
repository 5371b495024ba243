"""The checkpoint tables of the run store: a row per turn, and blobs by content.

A checkpoint is the run state as a turn began (``RunState.snapshot(history=False)``: the
events table holds the events) as one JSON document, ``{"state": snapshot, "files": {path:
hash}}``. Each message and each recent tool call is a blob, stored once however many
checkpoints name it, as each file is; the lists that grow with the run are kept in chunks
(:data:`CHUNKED`), so a row holds their new items only. The document is compressed with zlib
against a base, the document of an earlier turn kept as a blob: zlib finds what the two share
within its 32 KB window, so a row of a document that size or less is small. Reading turn N
reads that turn's row and the blobs it names, never the rows before it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gr_notebook.digests import digest_of
from gr_notebook.errors import RunError, WorkspaceError
from gr_notebook.events import Event
from gr_notebook.history.cells import DamagedRow, checked, json_kind, parse_json
from gr_notebook.history.store import Store
from gr_notebook.workflow.workspace_restore import stored_parts

__all__ = [
    "RESUMABLE",
    "Checkpoint",
    "CheckpointRow",
    "blob",
    "checkpoint_turns",
    "checkpoints_by_run",
    "from_earlier_version",
    "json_bytes",
    "keep_blob",
    "load_checkpoint",
    "write_checkpoint",
]

RESUMABLE: Final = frozenset({"interrupted", "cancelled", "failed"})
"""The statuses ``gr.resume`` takes (``running`` too, once its process is gone)."""
CHUNK: Final = 64
CHUNKED: Final[tuple[tuple[str, ...], ...]] = (
    ("context", "messages"),
    ("interventions", "seen"),
    ("shadow", "interventions", "seen"),
)
"""The snapshot's lists that grow with the run, which a checkpoint keeps as ``{"chunks":
[hash, ...], "tail": [...]}``: every full chunk of :data:`CHUNK` items is a blob, named again
by every later checkpoint while the list only grows, so a row holds the new items alone."""
BY_HASH: Final[tuple[tuple[str, ...], ...]] = (
    ("context", "messages"),
    ("guardrails", "feedback", "recent"),
)
"""The lists whose items a checkpoint keeps as hashes, each message and each recent tool
call a blob of its own, stored once."""
LEVEL: Final = 1
"""zlib's fastest level: it finds what a document shares with its base all the same, and a
checkpoint is taken at every turn."""
MAX_BLOB: Final = 2**30
"""The largest blob a store may hold, a gibibyte: a crafted size past it is refused."""
MAX_ITEMS: Final = 1_000_000
"""The most items a checkpoint's list may hold: no run grows one this long."""
MAX_STATE: Final = 256 * 2**20
"""The most bytes a checkpoint's document may unpack to: a crafted row that would unpack
to gigabytes is refused instead."""


class Chunks:
    """One of the :data:`CHUNKED` lists as a checkpointer keeps it from turn to turn."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.hashes: list[str] = []
        """The hashes of the full chunks of :attr:`items`."""

    def store(self, items: list[Any], blobs: dict[str, bytes]) -> dict[str, Any]:
        """``items`` as chunks; the new full chunks go to ``blobs``."""
        if items[: len(self.items)] != self.items:  # rewritten, not only grown
            self.hashes = []
        self.items = items
        while (len(self.hashes) + 1) * CHUNK <= len(items):
            start = len(self.hashes) * CHUNK
            data = json_bytes(items[start : start + CHUNK])
            self.hashes.append(digest_of(data))
            blobs[self.hashes[-1]] = data
        return {"chunks": list(self.hashes), "tail": items[len(self.hashes) * CHUNK :]}


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One turn's checkpoint, to store: the state when the turn began, before its model
    call, and the seq of the run's last event then."""

    run_id: str
    turn: int
    seq: int
    time: float
    state: bytes
    """The document, :func:`compressed` against the base."""
    base: str
    """The hash of the blob that holds the base document."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint read back: the snapshot for ``RunState.restore`` with the events it
    stands on, and the workspace's files as ``{path: hash}``."""

    run_id: str
    turn: int
    seq: int
    time: float
    snapshot: dict[str, Any]
    events: list[Event]
    files: dict[str, str]
    read: Callable[[str], bytes]
    """Reads a blob (a file's bytes) from the store by its hash."""


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8: a message's blob, a checkpoint's document."""
    text = json.dumps(value, separators=(",", ":"), default=_plain)
    return text.encode()


def _plain(value: object) -> Any:
    """A read-only mapping (a tool's input may be one) as JSON's object."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} in the run state is not JSON")


def compressed(document: bytes, base: bytes) -> bytes:
    """``document`` compressed with ``base`` as zlib's preset dictionary: the runs of bytes
    they share cost a few bytes each."""
    packer = zlib.compressobj(LEVEL, zdict=base) if base else zlib.compressobj(LEVEL)
    return packer.compress(document) + packer.flush()


def write_checkpoint(store: Store, row: CheckpointRow, blobs: Mapping[str, bytes]) -> int:
    """Record a checkpoint and the new content it names (``{hash: bytes}``; content the
    store holds already is skipped) in one transaction, so a kill mid-write leaves the
    previous checkpoint the latest. Returns the bytes written."""
    written = len(row.state) + len(row.base)
    with store.transaction() as conn:
        for digest, data in blobs.items():
            packed = _packed(digest, data)
            insert = "INSERT OR IGNORE INTO blobs (digest, size, zlib, data) VALUES (?, ?, ?, ?)"
            if conn.execute(insert, packed).rowcount:
                written += len(packed[3])
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (run_id, turn, seq, time, state, base)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (row.run_id, row.turn, row.seq, row.time, row.state, row.base),
        )
    return written


def keep_blob(store: Store, data: bytes) -> str:
    """Keep ``data`` in the store under its hash (once: a blob held already is not written
    again), committed before this returns; returns the hash. The records of a run's side
    effects keep the model's reply, an edited input and a long result so."""
    digest = digest_of(data)
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO blobs (digest, size, zlib, data) VALUES (?, ?, ?, ?)",
            _packed(digest, data),
        )
    return digest


def _packed(digest: str, data: bytes) -> tuple[str, int, int, bytes]:
    """A blob as its row holds it: hash, size, whether compressed, bytes (compressed when
    that is shorter)."""
    small = zlib.compress(data, LEVEL)
    if len(small) < len(data):
        return digest, len(data), 1, small
    return digest, len(data), 0, data


def blob(store: Store, digest: str) -> bytes:
    """The content stored under ``digest``; StoreError if it is missing or damaged."""
    try:
        return _blob(store, digest, MAX_BLOB)
    except DamagedRow as exc:
        raise store.damaged("a checkpoint's content", exc) from None


def _blob(store: Store, digest: str, limit: int) -> bytes:
    """The content under ``digest``, at most ``limit`` bytes; DamagedRow saying why not."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT size, zlib, data FROM blobs WHERE digest = ?", (digest,)
        ).fetchone()
    if found is None:
        raise DamagedRow(f"blob {digest} is missing")
    size, compressed, data = found
    checked(size, int, f"blob {digest}'s size")
    if not 0 <= size <= limit:
        raise DamagedRow(f"blob {digest}'s size is {size:,}, not 0 to {limit:,} bytes")
    if not isinstance(data, bytes):
        raise DamagedRow(f"blob {digest}'s data is {json_kind(data)}, not bytes")
    try:
        content = _unpack(data, size + 1) if compressed else data
    except zlib.error as exc:
        raise DamagedRow(f"blob {digest} is damaged ({exc})") from None
    if len(content) != size or digest_of(content) != digest:
        raise DamagedRow(f"blob {digest} is damaged (wrong content)")
    return content


def _unpack(data: bytes, limit: int, base: bytes = b"") -> bytes:
    """Compressed bytes unpacked (against ``base``), at most ``limit`` of them: a crafted
    row that would unpack to gigabytes is refused."""
    unpacker = zlib.decompressobj(zdict=base) if base else zlib.decompressobj()
    content = unpacker.decompress(data, limit)
    if unpacker.unconsumed_tail:
        raise DamagedRow(f"it unpacks to more than {limit:,} bytes")
    if not unpacker.eof:
        raise DamagedRow("its compressed bytes are cut short")
    return content


def load_checkpoint(
    store: Store, run_id: str, turn: int | None = None, *, with_history: bool = True
) -> Checkpoint:
    """The checkpoint of ``turn`` (the latest when None): RunError when there is none,
    StoreError when the store lacks what it names or a row is not what it should be (a
    crafted one, or one whose files lead out of a workspace): the error names the turn and
    what is wrong. ``with_history=False`` reads only the files and the state's own fields:
    ``events`` is empty, and the messages, the recent tool calls and the tracker's calls are
    left as the hashes the row names."""
    query = "SELECT turn, seq, time, state, base FROM checkpoints WHERE run_id = ?"
    with store.transaction() as conn:
        if turn is None:
            found = conn.execute(f"{query} ORDER BY turn DESC LIMIT 1", (run_id,)).fetchone()
        else:
            found = conn.execute(f"{query} AND turn = ?", (run_id, turn)).fetchone()
    if found is None:
        which = "checkpoints" if turn is None else f"checkpoint of turn {turn}"
        raise RunError(f"run {run_id} has no {which}")
    what = f"the checkpoint of turn {found[0]!r} of run {run_id}"
    try:
        at_turn = checked(found[0], int, "turn")
        seq = checked(found[1], int, "seq")
        at = checked(found[2], float, "time")
        if not isinstance(found[3], bytes):
            raise DamagedRow(f"its state is {json_kind(found[3])}, not compressed bytes")
        base = blob(store, checked(found[4], str, "base"))
        document = parse_json(_unpack(found[3], MAX_STATE, base), dict, subject="its state")
        snapshot, files = document.get("state"), document.get("files")
        if not isinstance(snapshot, dict):
            raise DamagedRow("its state holds no run state snapshot")
        if not isinstance(files, dict) or not all(isinstance(h, str) for h in files.values()):
            raise DamagedRow("its files are not an object of paths and hashes")
        for name in files:  # refused here, so that no reader writes or removes outside
            try:
                stored_parts(name)
            except WorkspaceError as exc:
                raise DamagedRow(str(exc)) from None
        read = _Reader(store)
        for chunked in CHUNKED if with_history else ():
            _unchunk(read, snapshot, chunked)
        for hashed in BY_HASH if with_history else ():
            _expand(read, snapshot, hashed)
    except (DamagedRow, zlib.error) as exc:
        raise store.damaged(what, exc) from None
    events = [e for e in store.events(run_id) if e.seq <= seq] if with_history else []
    return Checkpoint(
        run_id, at_turn, seq, at, snapshot, events, files, lambda digest: blob(store, digest)
    )


class _Reader:
    """Reads a blob's JSON once however many times a checkpoint names it: a crafted row
    that names one blob a million times costs one read."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.read: dict[str, Any] = {}

    def __call__(self, digest: str, shape: type[Any], subject: str) -> Any:
        if digest not in self.read:
            content = _blob(self.store, digest, MAX_STATE)
            self.read[digest] = parse_json(content, shape, subject=subject)
        found = self.read[digest]
        if not isinstance(found, shape):
            raise DamagedRow(f"{subject} is {json_kind(found)}")
        return found


_NEWER_PARTS: Final = frozenset({"shadow"})
"""Parts of the run state that checkpoints written before them lack."""


def _list_at(snapshot: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], str] | None:
    """The part that holds the list at ``path``, and its key; None when the part is off
    (an agent without interventions has none)."""
    *parents, key = path
    part: Any = snapshot
    for name in parents:
        if part is None:
            return None
        if not isinstance(part, dict) or name not in part:
            if part is snapshot and name in _NEWER_PARTS:
                return None
            raise DamagedRow(f"its state has no {'.'.join(path)}")
        part = part[name]
    if part is None:
        return None
    if not isinstance(part, dict) or key not in part:
        raise DamagedRow(f"its state has no {'.'.join(path)}")
    return part, key


def _unchunk(read: _Reader, snapshot: dict[str, Any], path: tuple[str, ...]) -> None:
    """Put back the list at ``path`` from its chunks and tail."""
    found = _list_at(snapshot, path)
    if found is None:
        return
    part, key = found
    kept = part[key]
    if not isinstance(kept, dict) or not isinstance(kept.get("chunks"), list):
        raise DamagedRow(f"its {'.'.join(path)} is {json_kind(kept)}, not chunks and a tail")
    tail = kept.get("tail")
    if not isinstance(tail, list) or not all(isinstance(h, str) for h in kept["chunks"]):
        raise DamagedRow(f"its {'.'.join(path)} are not chunk hashes and a tail")
    if len(tail) >= CHUNK or len(kept["chunks"]) * CHUNK > MAX_ITEMS:
        raise DamagedRow(f"its {'.'.join(path)} hold more than a checkpoint writes")
    items: list[Any] = []
    for digest in kept["chunks"]:
        chunk = read(digest, list, f"its {key} chunk {digest}")
        if len(chunk) != CHUNK:
            raise DamagedRow(f"its {key} chunk {digest} holds {len(chunk)} items, not {CHUNK}")
        items += chunk
    part[key] = items + tail


def _expand(read: _Reader, snapshot: dict[str, Any], path: tuple[str, ...]) -> None:
    """Put back the values of the list of hashes at ``path`` in ``snapshot``."""
    found = _list_at(snapshot, path)
    if found is None:
        return
    part, key = found
    hashes = part[key]
    if not isinstance(hashes, list) or not all(isinstance(h, str) for h in hashes):
        raise DamagedRow(f"its {'.'.join(path)} are not a list of hashes")
    part[key] = [read(digest, dict, f"its {key} blob {digest}") for digest in hashes]


def checkpoint_turns(store: Store, run_id: str) -> list[int]:
    """The turns of the run's checkpoints, in order."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT turn FROM checkpoints WHERE run_id = ? ORDER BY turn", (run_id,)
        ).fetchall()
    try:
        return [checked(turn, int, "turn") for (turn,) in found]
    except DamagedRow as exc:
        raise store.damaged(f"a checkpoint of run {run_id}", exc) from None


def checkpoints_by_run(store: Store) -> dict[str, tuple[int, int]]:
    """``run_id -> (checkpoints, latest turn)`` for every run that has any."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT run_id, COUNT(*), MAX(turn) FROM checkpoints GROUP BY run_id"
        ).fetchall()
    counts = {}
    for run_id, count, last in found:
        try:
            counts[run_id] = (count, checked(last, int, "turn"))
        except DamagedRow as exc:
            raise store.damaged(f"a checkpoint of run {run_id}", exc) from None
    return counts


def from_earlier_version(store: Store, run_id: str, started_at: float | None) -> bool:
    """Whether an earlier gr_notebook recorded the run: one that kept no checkpoints, or
    kept them in the format before schema 4, which this version does not read."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT applied_at FROM _migrations WHERE name = 'add_checkpoints'"
        ).fetchone()
        if found and started_at is not None and started_at < found[0] - 1:
            return True
        kept = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'old_checkpoints'"
        ).fetchone()
        return bool(
            kept
            and conn.execute(
                "SELECT 1 FROM old_checkpoints WHERE run_id = ? LIMIT 1", (run_id,)
            ).fetchone()
        )
