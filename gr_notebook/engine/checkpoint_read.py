"""Reading a checkpoint back: the rows of a run up to a turn, replayed.

A row (:mod:`gr_notebook.engine.checkpoint` writes it) holds the counters, the tallies (what
moves at every tool call), the parts of the run state that changed since the previous row
(``inline`` whole, ``changed`` as the keys that changed, ``nested`` as the keys that changed
inside a key holding an object) and what the run's logs gained (``appended``: layer 5's
messages, the feedback's call records, the calls the intervention tracker has seen). A part
is the one the latest row holding it gives. Rows written before decision 274 also named
unchanged parts by blob (``named``, in each row) and kept changed folders in the row
(``folders``); they read as they did; rows written before the tallies keep them in the parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gr_notebook.errors import RunError
from gr_notebook.events import Event
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.cells import DamagedRow, json_kind, parse_json
from gr_notebook.history.checkpoint_store import CheckpointRow
from gr_notebook.history.store import Store

__all__ = [
    "CALLS",
    "CHANGED",
    "FOLDERS",
    "MAX_ENTRIES",
    "NESTED",
    "RESULT",
    "SEEN",
    "TALLIES",
    "USE",
    "USE_BLOCK",
    "Checkpoint",
    "load_checkpoint",
]

CALLS: Final = "calls"
"""The log of the feedback's recent tool calls: the part keeps only their indexes."""
FOLDERS: Final = "folders"
"""Rows written before decision 274 kept the folders that changed in the row, by hash."""
CHANGED: Final = "changed"
"""The parts of which only some keys changed: those keys, to lay over the part as it was."""
NESTED: Final = "nested"
"""The parts of which a key holding an object changed only in some of its keys: those
keys, to lay over that object as it was (the feedback's count of calls, in the
guardrails)."""
RESULT: Final = "r"
USE_BLOCK: Final = "u"
"""In a row, a message is ``[role, blocks]`` (rows written before decision 282 keep the wire
shape, ``{"role", "content"}``); a block is a text block's text, ``["u", id, name, input]``
for a tool use, ``["r", tool_use_id, content, is_error]`` for a tool result, or any other
kind in the wire shape (an object)."""
USE: Final = "params_of"
"""In a call's record: the id of the tool use, in the same row, whose input its params are."""
TALLIES: Final = "tallies"
"""What moves with the tool calls, kept with the counters in every row rather than in the
parts: the feedback's count of calls and window of recent calls, the tracker's step and
stuck counter (rows written before decision 284 keep the stuck counter in the part)."""
SEEN: Final = "seen"
"""The log of the calls the intervention tracker has seen: the part keeps their count."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint read back: the snapshot for ``RunState.restore`` with the events it
    stands on, and the workspace's files as ``{path: hash}``."""

    row: CheckpointRow
    snapshot: dict[str, Any]
    events: list[Event]
    files: dict[str, str]
    read: Callable[[str], bytes]
    """Reads a blob (a file's bytes) from the store by its hash."""

    @property
    def turn(self) -> int:
        return self.row.turn


def load_checkpoint(store: Store, run_id: str, turn: int | None = None) -> Checkpoint:
    """The checkpoint of ``turn`` (the latest when None): RunError when there is none,
    StoreError when the store lacks what it names, or a row of it is not what it should be
    (a crafted one): the error names the turn and what is wrong."""
    row = rows.checkpoint(store, run_id, turn)
    if row is None:
        raise RunError(f"run {run_id} has no checkpoint of turn {turn}")

    def read(digest: str) -> bytes:
        return rows.blob(store, digest)

    try:
        snapshot = _snapshot(store, row, read)
        files = _files(row.files, snapshot.pop(FOLDERS), read)
    except DamagedRow as exc:
        raise store.damaged(f"the checkpoint of turn {row.turn} of run {run_id}", exc) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a part of the wrong shape
        raise store.damaged(
            f"the checkpoint of turn {row.turn} of run {run_id}", f"{type(exc).__name__}: {exc}"
        ) from None
    events = [e for e in store.events(run_id) if e.seq <= row.seq]
    return Checkpoint(row, snapshot, events, files, read)


MAX_ENTRIES: Final = 1_000_000
"""The most files and folders a checkpoint's workspace may name. Folders are named by hash,
so a crafted one can name the same folder twice, and so on down: 40 small blobs would name
2**40 files. No workspace holds this many."""
MAX_PATH: Final = 4096
"""The longest path a checkpoint's folders may make, the OS's own limit: a crafted folder
that names itself would otherwise be walked a million levels deep."""


def _files(root: str, kept: dict[str, Any], read: Callable[[str], bytes]) -> dict[str, str]:
    """``{path: hash}`` of every file under the folder blob ``root``: each folder read once
    and checked (:func:`_folder`), at most :data:`MAX_ENTRIES` entries in all, no path
    longer than :data:`MAX_PATH`. ``kept``: the
    folders rows written before decision 274 held."""
    read_folders: dict[str, dict[str, str]] = {}
    files: dict[str, str] = {}
    pending = [("", root)]
    named = 0
    while pending:
        prefix, digest = pending.pop()
        entries = read_folders.get(digest)
        if entries is None:
            entries = read_folders[digest] = _folder(digest, kept, read)
        named += len(entries)
        if named > MAX_ENTRIES:
            raise DamagedRow(
                f"its folders name more than {MAX_ENTRIES:,} files and folders (folder "
                f"{digest} is named again and again)"
            )
        for name, child in entries.items():
            if name.endswith("/"):
                if len(prefix) + len(name) > MAX_PATH:
                    raise DamagedRow(
                        f"its folders nest deeper than any file path can (folder {digest} "
                        "names itself, or a folder above it)"
                    )
                pending.append((prefix + name, child))
            else:
                files[prefix + name] = child
    return files


def _folder(digest: str, kept: dict[str, Any], read: Callable[[str], bytes]) -> dict[str, str]:
    """A folder's entries, ``{name or 'name/': hash}``, checked: a name is one file or
    folder name (no ``/`` inside, no NUL, not ``.`` or ``..``), a hash is text."""
    subject = f"its folder blob {digest}"
    entries = kept.get(digest) if digest in kept else parse_json(read(digest), subject=subject)
    if not isinstance(entries, dict):
        raise DamagedRow(f"{subject} is {json_kind(entries)}, not an object")
    for name, child in entries.items():
        bare = name[:-1] if name.endswith("/") else name
        if "\x00" in name:
            raise DamagedRow(f"{subject} names {name!r}, with a NUL in it")
        if bare in ("", ".", "..") or "/" in bare:
            raise DamagedRow(f"{subject} names {name!r}, which is not a file name")
        if not isinstance(child, str):
            raise DamagedRow(f"{subject} gives {name!r} {json_kind(child)}, not a hash")
    return entries


def _snapshot(store: Store, row: CheckpointRow, read: Callable[[str], bytes]) -> dict[str, Any]:
    """The snapshot :meth:`RunState.restore` takes, from ``row`` and the rows before it: a
    part is the latest row's that holds it inline (a row holds the parts that changed), or
    the blob ``row`` names (rows written before decision 274 named the unchanged parts)."""
    snapshot: dict[str, Any] = {}
    messages: list[Any] = []
    calls: dict[int, Any] = {}
    seen: set[int] = set()
    folders: dict[str, Any] = {}
    state: dict[str, Any] = {}
    for state in rows.states_upto(store, row):
        snapshot.update(_object(state, "inline"))
        for name, delta in _object(state, CHANGED, {}).items():
            snapshot[name] = {**snapshot[name], **delta}
        for name, deltas in _object(state, NESTED, {}).items():
            part = snapshot[name] = {**snapshot[name]}
            for key, delta in deltas.items():
                part[key] = {**part[key], **delta}
        appended = _object(state, "appended")
        gained = appended.get("messages")
        inputs: dict[str, Any] = {}
        if gained is not None:
            if gained["start"] == 0:
                messages = []
            if gained["start"] != len(messages):
                raise ValueError(f"messages from {gained['start']} follow {len(messages)}")
            items = [_wire(m) for m in gained["items"]]
            messages.extend(items)
            inputs = {
                b["id"]: b["input"] for m in items for b in m["content"] if b["type"] == "tool_use"
            }
        for record in appended.get(CALLS, ()):
            if USE in record:  # its params are a tool use's input in this row
                record = {**record, "params": inputs[record[USE]]}
                del record[USE]
            calls[record["call_index"]] = record
        seen.update(appended.get(SEEN, ()))
        folders.update(_object(appended, FOLDERS, {}))
    for name, digest in _object(state, "named", {}).items():
        snapshot[name] = parse_json(read(digest), subject=f"the blob {digest} of its {name!r}")
    snapshot["counters"] = _object(state, "counters")
    snapshot["context"] = {**snapshot["context"], "messages": messages}
    tallies = state.get(TALLIES)
    if tallies is not None:  # apart from the parts since decision 274's tallies
        guardrails = snapshot["guardrails"]
        feedback = {
            **guardrails["feedback"],
            "calls": tallies["calls"],
            "recent": tallies["recent"],
        }
        snapshot["guardrails"] = {**guardrails, "feedback": feedback}
        if "step" in tallies:  # and the stuck counter, since decision 284
            moved = {key: tallies[key] for key in ("step", "stuck_counter") if key in tallies}
            snapshot["interventions"] = {**snapshot["interventions"], **moved}
    feedback = snapshot["guardrails"].get("feedback")
    if isinstance(feedback, dict) and "recent" in feedback:
        window = feedback["recent"]
        indexes = window["indexes"] if isinstance(window, dict) else window
        if not isinstance(window, dict) and window:
            indexes = list(range(window[0], window[1] + 1))
        snapshot["guardrails"] = {
            **snapshot["guardrails"],
            "feedback": {**feedback, "recent": [calls[i] for i in indexes]},
        }
    tracker = snapshot["interventions"]
    if isinstance(tracker, dict) and isinstance(tracker.get("seen"), int):
        if tracker["seen"] != len(seen):
            raise ValueError(f"{tracker['seen']} calls seen, {len(seen)} in the log")
        snapshot["interventions"] = {**tracker, "seen": sorted(seen)}
    snapshot[FOLDERS] = folders
    return snapshot


_REQUIRED: Final = object()


def _object(state: dict[str, Any], key: str, default: Any = _REQUIRED) -> dict[str, Any]:
    """``state[key]``, which must be a JSON object (``default`` when it is missing and one
    is given): :class:`DamagedRow` saying which key is not."""
    if key not in state and default is not _REQUIRED:
        return default  # type: ignore[no-any-return]
    if key not in state:
        raise DamagedRow(f"its state has no {key!r}")
    value = state[key]
    if not isinstance(value, dict):
        raise DamagedRow(f"its {key!r} is {json_kind(value)}, not an object")
    return value


def _wire(message: Any) -> dict[str, Any]:
    """A message of a row (:data:`USE_BLOCK`) in the wire shape ``Message.from_json`` reads."""
    if isinstance(message, dict):  # written before decision 282
        return message
    role, blocks = message
    return {"role": role, "content": [_wire_block(b) for b in blocks]}


def _wire_block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if isinstance(block, dict):
        return block
    kind, first, second, third = block
    if kind == USE_BLOCK:
        return {"type": "tool_use", "id": first, "name": second, "input": third}
    if kind == RESULT:
        return {"type": "tool_result", "tool_use_id": first, "content": second, "is_error": third}
    raise ValueError(f"unknown block {kind!r} in a checkpoint's message")
