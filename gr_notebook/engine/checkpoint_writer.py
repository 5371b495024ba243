"""Checkpoint rows written on a thread of their own, in order.

SQLite releases the GIL while it writes and commits, so a row handed over at a turn
boundary is stored while the loop goes on with the turn: the loop pays for building the
row, not for storing it. Each row is its own transaction, written in the order given; a
failure stops the writer and is kept for the loop to report. A row still queued when the
process dies is lost, and a resume starts from the one before (the journal of writes it
would have emptied is removed only once its row is stored).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.checkpoint_store import CheckpointRow
from gr_notebook.history.store import Store

__all__ = ["CheckpointWriter"]

_Job = tuple[CheckpointRow, Mapping[str, bytes], Sequence[Path]]


class CheckpointWriter:
    """One writer thread per run's checkpointer; :meth:`close` waits for the queue."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.bytes_written = 0
        self.error: Exception | None = None
        """The failure that stopped the writer, for the loop to report."""
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name=f"gr-checkpoints-{run_id}", daemon=True
        )
        self._thread.start()

    def put(self, row: CheckpointRow, blobs: Mapping[str, bytes], done: Sequence[Path]) -> None:
        """Store ``row`` and its ``blobs``, then remove the files ``done`` (the journals
        the row makes obsolete)."""
        self._queue.put((row, blobs, done))

    def close(self) -> None:
        """Write what is queued, then stop."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if self.error is not None:
                continue  # stopped: a later row must not stand on a missing one
            row, blobs, done = job
            try:
                self.bytes_written += rows.write_checkpoint(self.store, row, blobs)
            except Exception as exc:
                self.error = exc
                continue
            for path in done:
                with contextlib.suppress(OSError):
                    os.unlink(path)
