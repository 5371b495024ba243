"""A checkpoint at every turn boundary: what the run needs to go on from there.

:class:`Checkpointer` records, when a turn begins (before its model call), what the run
needs to go on from there, as one checkpoint of the store
(:mod:`gr_notebook.history.checkpoint_store`; those committed together share a row):

- the run state's snapshot without its history
  (:meth:`~gr_notebook.engine.state.RunState.snapshot` with ``history=False``), as what
  changed since the last checkpoint: a part that did not change is left out (the phases
  and self-regulation are not even built when their state keys did not change), a part of
  which some keys changed is stored as those keys, any other change as the whole part;
- what grows by appending, as what it gained since the last checkpoint: layer 5's messages
  (a new epoch when a message already recorded was rewritten: a compaction, a pruning, a
  prompt merged into the last message; in their row form, decision 282), the feedback's
  recent tool calls and the calls the intervention tracker has seen; the events are in the
  store already, named by the last one's seq;
- the workspace's files, as a :class:`~gr_notebook.workflow.workspace_files.FileTree`
  whose changed files are those the workspace reports written (all of them after a pause,
  when a person may have edited some).

A row is committed at most 50 ms after it is taken: with the run's next event (one commit,
not two) when the last rows went at least 50 ms ago, else with the rows of the next 50 ms,
or on its own when no event comes (a model call under way); a kill loses the rows of the
last 50 ms at most (decision 246). Before a write the path is noted in a
journal, ``.gr/writes-<run id>``, with the turn of the checkpoint it follows, so a
resume after a kill tells the run's own writes since the checkpoint it resumes from (set
aside) from changes made by hand (refused: resume on a copy).

:func:`~gr_notebook.engine.checkpoint_read.load_checkpoint` (here too) reads one back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from itertools import compress
from operator import eq, ne
from pathlib import Path
from time import monotonic
from typing import Any, Final

from gr_notebook.engine.checkpoint_read import (
    CALLS,
    CHANGED,
    NESTED,
    RESULT,
    SEEN,
    TALLIES,
    USE,
    USE_BLOCK,
    Checkpoint,
    load_checkpoint,
)
from gr_notebook.engine.context import ContextManager
from gr_notebook.engine.state import RunState
from gr_notebook.errors import StoreError, WorkspaceError
from gr_notebook.eventdata import plain_json
from gr_notebook.events import ErrorEvent
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.checkpoint_store import CheckpointRow
from gr_notebook.history.store import Store
from gr_notebook.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, block_json
from gr_notebook.workflow.workspace import SYSTEM_DIR, open_system_file, open_system_folder
from gr_notebook.workflow.workspace_files import FileTree

__all__ = ["Checkpoint", "Checkpointer", "load_checkpoint", "writes_journal", "written_since"]

FLUSH_AFTER_S: Final = 0.05
"""A checkpoint is committed at most this long after it is taken (decision 246): with the
run's next event when the last rows were committed at least this long ago, else with the
rows taken until then. A turn slower than this (any real model's) commits its own row; a
fast run commits its rows together, about 20 times a second."""
_MISSING: Final = object()
_NO_BLOBS: Final[tuple[Sequence[rows.BlobRow], int]] = ((), 0)
_ALWAYS_INLINE: Final = frozenset({"stuck_detector"})
"""A person's detector may hand back its own containers: never compared, always inline."""


def writes_journal(root: Path, run_id: str) -> Path:
    """Where a run notes each path it writes, after the turn of its latest checkpoint."""
    return root / SYSTEM_DIR / f"writes-{run_id}"


def written_since(root: Path, run_id: str, turn: int) -> set[str]:
    """The paths the run noted it wrote after its checkpoint of ``turn`` was taken (a
    ``.gr`` that is a symlink is refused: WorkspaceError)."""
    try:
        fd = open_system_file(root, writes_journal(root, run_id).name, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, encoding="utf-8") as journal:
            lines = journal.read().splitlines()
    except OSError:
        return set()
    paths = set()
    for line in lines:
        after, _, name = line.partition("\t")
        try:
            path = json.loads(name)
            if int(after) >= turn and isinstance(path, str):
                paths.add(path)
        except ValueError:
            continue  # a line cut by the kill
    return paths


def _message_row(message: Message, uses: list[ToolUseBlock]) -> tuple[str, list[Any]]:
    """A message as a row keeps it (:data:`~gr_notebook.engine.checkpoint_read.USE_BLOCK`):
    tuples for the blocks of every turn, which cost less to build and to store than the
    wire shape's objects; the tool uses go to ``uses``. A tool's input goes as it is: what
    orjson refuses in it (a read-only mapping) goes to the row's ``default``."""
    blocks: list[Any] = []
    for block in message.content:
        if type(block) is ToolResultBlock:
            blocks.append((RESULT, block.tool_use_id, block.content, block.is_error))
        elif type(block) is ToolUseBlock:
            uses.append(block)
            blocks.append((USE_BLOCK, block.id, block.name, block.input))
        elif type(block) is TextBlock:
            blocks.append(block.text)
        else:
            blocks.append(block_json(block))
    return message.role, blocks


def _may_hold_floats(row: dict[str, Any]) -> list[Any]:
    """What in a row may hold a float that is not finite: the counters, the parts, the
    tools' inputs (as plain JSON: marshal refuses a read-only mapping), the calls' params and
    times (the logs' texts, ints and flags cannot)."""
    found: list[Any] = [row["counters"], row["inline"], row.get(CHANGED), row.get(NESTED)]
    appended = row["appended"]
    messages = appended.get("messages")
    if messages is not None:
        for _, blocks in messages["items"]:
            found += [plain_json(b[3]) for b in blocks if type(b) is tuple and b[0] == USE_BLOCK]
    for record in appended.get(CALLS, ()):
        found += (record.get("params"), record["time"])
    return found


def _by_use(record: dict[str, Any], uses: list[ToolUseBlock]) -> dict[str, Any]:
    """A call's record whose params are the input of a tool use in the same row (a
    ``write_file`` carries the whole file) names that use instead of holding them twice."""
    params = record["params"]
    for use in uses:
        if use.name == record["tool"] and use.input == params:
            named = dict(record)
            del named["params"]
            named[USE] = use.id
            return named
    return record


def _delta(part: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``part`` whose values differ from ``previous``'s, which has the same
    keys in the same order: compared pairwise, in C."""
    return dict(compress(part.items(), map(ne, part.values(), previous.values())))


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} in the run state is not JSON")


class Checkpointer:
    """Takes the run's checkpoint at each turn boundary (the loop calls it)."""

    def __init__(self, store: Store, state: RunState) -> None:
        self.store = store
        self.state = state
        self.run_id = state.run_id
        self.bytes_written = 0
        """What this run's checkpoints added (or will add) to the store: rows, new blobs."""
        self.taken = 0
        self._tree = FileTree(state.workspace.root)
        self._dirty: set[str] = set()
        self._rescan = True
        self._parts: dict[str, Any] = {}
        """name -> the part at the last checkpoint (a row holds the parts that differ)."""
        self._keys: dict[str, object] = {}
        """The keys of the parts that have them (``RunState.part_keys``) at the last
        checkpoint: a part whose key did not change is not built again."""
        self._last_record: dict[str, Any] | None = None
        """The newest of the feedback's call records logged: the runner builds each once,
        so the ones after it are new (a person's ``run.restore()`` builds them all again,
        and all go to the log)."""
        self._seen = 0
        self._context: ContextManager | None = None
        self._generation = -1
        self._epoch = -1
        self._written = 0
        self._last: Message | None = None
        self._failed = False
        self._journal: int | None = None
        """The journal's file descriptor, open for appending."""
        self._turn = 0
        """The turn of the latest checkpoint: the journal's lines after it name it."""
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[tuple[CheckpointRow, Sequence[rows.BlobRow]]] = []
        """The rows taken and not committed yet."""
        self._deferred = False
        """Whether :meth:`_write` waits in the store for the next commit."""
        self._in_flight: list[tuple[CheckpointRow, Sequence[rows.BlobRow]]] = []
        """The rows written in a transaction that has not committed yet."""
        self._retried = False
        """Whether the rows in flight are a second try."""
        self._committed_at = -FLUSH_AFTER_S
        """When rows were last committed (``time.monotonic``): the first rides at once."""
        self._store_failure: Exception | None = None
        self._unwatch = state.workspace.watch(self._will_write)

    # -- between checkpoints --------------------------------------------------------------------

    def _will_write(self, path: str) -> None:
        if path in self._dirty:
            return
        self._dirty.add(path)
        try:
            if self._journal is None:  # never through a link (WorkspaceError)
                self._journal = open_system_file(
                    self.state.workspace.root,
                    writes_journal(self.state.workspace.root, self.run_id).name,
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                )
            # one write call per line: in the file (the OS's) before the path is written
            os.write(self._journal, f"{self._turn}\t{json.dumps(path)}\n".encode())
        except (OSError, WorkspaceError):
            self._rescan = True  # no journal: a resume will ask about this file

    def after_pause(self) -> None:
        """A person may have edited files while the run was paused: the next checkpoint
        looks at all of them (the loop calls this as the run resumes)."""
        self._rescan = True

    # -- the checkpoint -------------------------------------------------------------------------

    def __call__(self) -> None:
        """Record the checkpoint of the turn about to begin; a failure is recorded once as
        an ``error`` event and turns checkpoints off for the rest of the run."""
        if self._failed:
            return
        try:
            if self._store_failure is not None:
                raise self._store_failure
            self._take()
        except Exception as exc:
            self._failed = True
            self.state.emit(
                ErrorEvent(
                    source="checkpoint",
                    error_type=type(exc).__name__,
                    message=f"checkpoints are off for the rest of this run: {exc}",
                )
            )

    def _take(self) -> None:
        if self._in_flight:  # the transaction they rode with failed
            self._requeue()
            if self._store_failure is not None:
                raise self._store_failure
        state = self.state
        seq = len(state.events) - 1
        blobs: dict[str, bytes] = {}
        if self._rescan:
            self._rescan = False
            self._dirty.clear()
            blobs = self._tree.scan()
        elif self._dirty:
            dirty, self._dirty = self._dirty, set()
            blobs = self._tree.update(dirty)
        keys = state.part_keys()
        before = self._keys
        parts = self._parts
        if (
            keys == before
            and state.stuck_detector is None
            and parts.get("stuck_detector", _MISSING) is None
        ):
            snapshot: dict[str, Any] = {}  # most turns: not one part changed
            counters = state.counters()
        else:  # the keys come in one order: compared pairwise, in C (none the first time)
            unchanged = list(compress(keys, map(eq, keys.values(), before.values())))
            self._keys = keys
            snapshot = state.snapshot(history=False, unchanged=unchanged)
            counters = snapshot.pop("counters")
        logs: dict[str, Any] = {}
        uses: list[ToolUseBlock] = []
        messages = self._new_messages(uses)
        if messages is not None:
            logs["messages"] = messages
        # what moves with the calls goes with the counters, so the parts seldom change
        tallies = {"calls": state.guards.feedback.calls, "recent": self._pack_calls(logs, uses)}
        guardrails = snapshot.get("guardrails")
        if guardrails is not None:  # its key changed
            feedback = guardrails["feedback"]
            del feedback["recent"], feedback["calls"]  # in the tallies and the log
        engine = state.interventions
        if engine is not None:
            moving = engine.tracker
            tallies["step"], tallies["stuck_counter"] = moving.step, moving.stuck_counter
            tracker = snapshot.get("interventions")
            if tracker is not None:  # its key changed
                del tracker["step"], tracker["stuck_counter"]  # in the tallies
            self._pack_seen(moving.seen_order, logs)
        inline: dict[str, Any] = {}
        changed: dict[str, dict[str, Any]] = {}
        nested: dict[str, dict[str, Any]] = {}
        for name, part in snapshot.items():
            previous = parts.get(name, _MISSING)
            if previous is _MISSING or (name in _ALWAYS_INLINE and part is not None):
                inline[name] = parts[name] = part
            elif previous == part:  # most turns, now that the tallies are apart
                continue
            elif type(part) is dict and type(previous) is dict and list(part) == list(previous):
                parts[name] = part
                for key, value in _delta(part, previous).items():
                    was = previous[key]
                    if type(value) is dict and type(was) is dict and list(value) == list(was):
                        nested.setdefault(name, {})[key] = _delta(value, was)
                    else:
                        changed.setdefault(name, {})[key] = value
            else:
                inline[name] = parts[name] = part
        row: dict[str, Any] = {"counters": counters, TALLIES: tallies, "inline": inline}
        if changed:
            row[CHANGED] = changed
        if nested:
            row[NESTED] = nested
        row["appended"] = logs
        text = rows.json_bytes(row, _plain, checked=False)
        # a null is a None, or a NaN or an infinity orjson wrote as null: look closer (find,
        # not `in`: `in` tries the needle as an int first, raising and clearing a TypeError)
        if text.find(b"null") != -1 and not rows.finite(_may_hold_floats(row)):
            text = rows.json_bytes(row, _plain)
        turn = state.turn + 1
        checkpoint = CheckpointRow(self.run_id, turn, seq, state.clock(), text, self._tree.digest)
        packed, written = rows.pack_blobs(blobs) if blobs else _NO_BLOBS
        self.bytes_written += written + len(text) + len(checkpoint.files)
        self._turn = turn
        self.taken += 1
        self._pending.append((checkpoint, packed))
        if self._deferred:
            return
        if monotonic() - self._committed_at >= FLUSH_AFTER_S:  # ride with the next event
            self._deferred = True
            self.store.defer(self._write, self._committed)
        if self._timer is None:  # or go on their own, FLUSH_AFTER_S from now
            self._timer = asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self._flush)

    def _write(self, conn: sqlite3.Connection) -> None:
        """The rows taken since the last commit, in the transaction of the event they ride
        with; a failure leaves the event to be stored (SQLite undoes a failed statement,
        not its transaction) and is reported by the next checkpoint. The rows stay in
        flight until the transaction commits (:meth:`_committed`)."""
        self._requeue()
        pending, self._pending = self._pending, []
        self._deferred = False
        if self._store_failure is not None:  # a row stands on the rows before it
            return
        try:
            rows.insert_checkpoints(
                conn, [row for row, _ in pending], [b for _, blobs in pending for b in blobs]
            )
        except sqlite3.Error as exc:
            self._store_failure = StoreError(f"run store {self.store.path} failed: {exc}")
        else:
            self._in_flight = pending

    def _committed(self) -> None:
        self._in_flight = []
        self._retried = False
        self._committed_at = monotonic()

    def _requeue(self) -> None:
        """Rows handed to a transaction that did not commit (the event they rode with could
        not be stored) go back to the front of the queue, once: a second failure ends the
        run's checkpoints, since a row stands on the rows before it."""
        if not self._in_flight:
            return
        if self._retried:
            self._store_failure = StoreError(
                f"run store {self.store.path} failed to commit checkpoints twice"
            )
            return
        self._pending[:0] = self._in_flight
        self._in_flight, self._retried = [], True

    def _flush(self) -> None:
        """Commit the rows no event took along (a model call is under way, or they wait
        for the next batch): a fast run pays a timer every 50 ms, not one per turn."""
        self._timer = None
        self._requeue()
        if self._pending and not self._deferred:
            self._deferred = True
            self.store.defer(self._write, self._committed)
        try:
            self.store.flush()
        except StoreError as exc:
            self._store_failure = exc

    def _pack_calls(self, logs: dict[str, Any], uses: list[ToolUseBlock]) -> Any:
        """The feedback's recent tool calls (a rolling window, with their inputs) as the
        range of their indexes; the calls not recorded yet go to the log (the records are
        the runner's own, built once per call and never changed), their params named by
        the tool use among ``uses`` (the row's) that holds them."""
        records = self.state.guards.feedback.recent_json()
        if not records:
            return []
        newest = records[-1]
        if newest is not self._last_record:  # the calls since the last one logged
            new = []
            for record in reversed(records):
                if record is self._last_record:
                    break
                new.append(record)
            logs[CALLS] = [_by_use(record, uses) for record in reversed(new)]
            self._last_record = newest
        first, last = records[0]["call_index"], newest["call_index"]
        if last - first + 1 == len(records):
            return [first, last]
        return {"indexes": [r["call_index"] for r in records]}

    def _pack_seen(self, order: list[int], logs: dict[str, Any]) -> None:
        """The calls the intervention tracker has seen (they only grow; the part has their
        count): those it saw since the last checkpoint go to the log."""
        if len(order) > self._seen:
            logs[SEEN] = order[self._seen :]
            self._seen = len(order)

    def _new_messages(self, uses: list[ToolUseBlock]) -> dict[str, Any] | None:
        """Layer 5's messages not recorded yet, as ``{epoch, start, items}`` in their row
        form (their tool uses go to ``uses``); a new epoch from the first message when one
        already recorded changed."""
        context = self.state.context
        written = self._written
        tail = context.messages_from(max(written - 1, 0))
        if (
            context is not self._context
            or context.generation != self._generation
            or (written and (not tail or tail[0] is not self._last))
        ):
            self._context, self._generation = context, context.generation
            self._epoch += 1
            written = 0
            tail = context.messages_from(0)
        elif written:
            tail = tail[1:]
        if not tail and written:
            return None
        if tail:
            self._last = tail[-1]
        self._written = written + len(tail)
        return {
            "epoch": self._epoch,
            "start": written,
            "items": [_message_row(m, uses) for m in tail],
        }

    def close(self, *, keep_journal: bool = False) -> None:
        """Store what waits, and stop following the run; its journal goes, unless the run
        can be resumed (it tells a resume which files the run wrote last)."""
        self._unwatch()
        if self._timer is not None:
            self._timer.cancel()
        self._flush()
        if self._journal is not None:
            with contextlib.suppress(OSError):
                os.close(self._journal)
            self._journal = None
        if not keep_journal:  # never through a link (WorkspaceError)
            with contextlib.suppress(OSError, WorkspaceError):
                root = self.state.workspace.root
                folder = open_system_folder(root, create=False)
                try:
                    os.unlink(writes_journal(root, self.run_id).name, dir_fd=folder)
                finally:
                    os.close(folder)
