"""A checkpoint at every turn boundary: what the run needs to go on from there.

:class:`Checkpointer` records, as each turn begins (before its model call), the run state's
snapshot and the workspace's files, as one row of the store
(:mod:`gr_notebook.history.checkpoint_store` reads it back). The snapshot is whatever
:meth:`~gr_notebook.engine.state.RunState.snapshot` returns, so a field added there is
kept with no change here. What a run holds many turns over, its messages, its recent tool
calls and its files, goes by hash: the store keeps each once.

Before the run writes a file, its path is noted in a journal, ``.gr/writes-<run id>``, with
the turn of the checkpoint it follows, so a resume after a kill tells the run's own writes
since the checkpoint it resumes from (set aside) from changes made by hand (refused: resume
on a copy).
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
from pathlib import Path
from typing import Any

from gr_notebook.digests import digest_of
from gr_notebook.engine.state import RunState
from gr_notebook.errors import WorkspaceError
from gr_notebook.events import ErrorEvent
from gr_notebook.guardrails.feedback import ToolCallRecord
from gr_notebook.history.checkpoint_store import (
    CHUNKED,
    CheckpointRow,
    Chunks,
    compressed,
    json_bytes,
    write_checkpoint,
)
from gr_notebook.history.store import Store
from gr_notebook.messages import Message
from gr_notebook.workflow.workspace import SYSTEM_DIR, open_system_file, open_system_folder
from gr_notebook.workflow.workspace_files import FileTree

__all__ = ["REBASE_EVERY", "Checkpointer", "writes_journal", "written_since"]

REBASE_EVERY = 16
"""A row is compressed against the document of an earlier turn (its base), so what did not
change since costs little; every this many checkpoints, a new base."""


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


class Checkpointer:
    """Takes the run's checkpoint at each turn boundary (the loop calls it)."""

    def __init__(self, store: Store, state: RunState) -> None:
        self.store = store
        self.state = state
        self.run_id = state.run_id
        self.bytes_written = 0
        """What this run's checkpoints added to the store: rows, and new blobs."""
        self.taken = 0
        self._tree = FileTree(state.workspace.root)
        self._dirty: set[str] = set()
        self._rescan = True
        self._messages: list[Message] = []
        self._message_list: list[str] = []
        """Layer 5's messages at the last checkpoint, and their hashes."""
        self._calls: dict[int, tuple[ToolCallRecord, str]] = {}
        """id -> (call, hash) of the recent tool calls the last checkpoint named."""
        self._lists = {path: Chunks() for path in CHUNKED}
        self._base: tuple[str, bytes] = ("", b"")
        """The hash and the JSON of the document the rows are compressed against."""
        self._failed = False
        self._journal: int | None = None
        """The journal's file descriptor, open for appending."""
        self._turn = 0
        """The turn of the latest checkpoint: the journal's lines after it name it."""
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
        state = self.state
        if self._rescan:
            self._rescan = False
            self._dirty.clear()
            blobs = self._tree.scan()
        else:
            dirty, self._dirty = self._dirty, set()
            blobs = self._tree.update(dirty)
        snapshot = state.snapshot(history=False)  # the events are in the store already
        # by hash, and the lists that grow with the run in chunks (checkpoint_store.CHUNKED)
        context, feedback = snapshot["context"], snapshot["guardrails"]["feedback"]
        context["messages"] = self._message_hashes(blobs)
        feedback["recent"] = self._call_hashes(blobs)
        for path, chunks in self._lists.items():
            *parents, key = path
            part: Any = snapshot
            for name in parents:
                part = part and part[name]
            if part:  # None while the part is off (no interventions, no shadows)
                part[key] = chunks.store(part[key], blobs)
        document = json_bytes({"state": snapshot, "files": self._tree.listing()})
        if self.taken % REBASE_EVERY == 0:  # this document is the next rows' base
            self._base = (digest_of(document), document)
            blobs[self._base[0]] = document
        turn = state.turn + 1
        row = CheckpointRow(
            self.run_id,
            turn,
            len(state.events) - 1,
            state.clock(),
            compressed(document, self._base[1]),
            self._base[0],
        )
        self.bytes_written += write_checkpoint(self.store, row, blobs)
        self._turn = turn
        self.taken += 1

    def _message_hashes(self, blobs: dict[str, bytes]) -> list[str]:
        """The hashes of layer 5's messages, each message's JSON a blob. While the list only
        grew since the last checkpoint, only the new messages are encoded."""
        messages, before = self.state.context.messages, self._messages
        if len(messages) >= len(before) and all(map(operator.is_, messages, before)):
            hashes = self._message_list + [
                self._new(m.to_json(), blobs) for m in messages[len(before) :]
            ]
        else:  # compacted, pruned or restored: the messages kept keep their hashes
            known = {id(m): h for m, h in zip(before, self._message_list, strict=True)}
            hashes = [known.get(id(m)) or self._new(m.to_json(), blobs) for m in messages]
        self._messages, self._message_list = list(messages), hashes
        return hashes

    def _call_hashes(self, blobs: dict[str, bytes]) -> list[str]:
        """The hashes of the feedback's recent tool calls, each call's JSON a blob: a call
        the last checkpoint named is not encoded again."""
        known, self._calls = self._calls, {}
        for call in self.state.guards.feedback.recent:
            entry = known.get(id(call))
            if entry is None or entry[0] is not call:
                entry = (call, self._new(call.to_json(), blobs))
            self._calls[id(call)] = entry
        return [digest for _, digest in self._calls.values()]

    @staticmethod
    def _new(value: object, blobs: dict[str, bytes]) -> str:
        data = json_bytes(value)
        digest = digest_of(data)
        blobs[digest] = data
        return digest

    def close(self, *, keep_journal: bool = False) -> None:
        """Stop following the run; its journal goes, unless the run can be resumed (it
        tells a resume which files the run wrote last)."""
        self._unwatch()
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
