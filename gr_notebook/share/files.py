"""A run's files turn by turn, for a shared page: the files as each turn began (its
checkpoint), which of them the turn changed, and the files as the run left them.

A checkpoint is taken as a turn begins, so the turn changed what differs between its own
checkpoint and the next one (the last turn: between its checkpoint and the workspace as it
is now, or the last checkpoint when the workspace is gone).

The workspace is read only when it is one gr's loop ran in (it holds ``.gr/``): a store names
its run's workspace by path, and a store sent by someone else could name any folder of this
machine, whose files the page would then carry to whoever it is sent to."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gr_notebook.errors import GrNotebookError
from gr_notebook.history.checkpoint_store import blob, checkpoint_turns, load_checkpoint
from gr_notebook.history.store import Store
from gr_notebook.share.page import embedded_json
from gr_notebook.share.texts import FILE_CHARS, FILES_BYTES, Texts, cut, decoded
from gr_notebook.workflow.workspace import SYSTEM_DIR
from gr_notebook.workflow.workspace_files import FileTree

__all__ = ["FileHistory", "FileTexts", "file_history"]


@dataclass(frozen=True, slots=True)
class FileHistory:
    at_turn: Mapping[int, Mapping[str, str]]
    """``{turn: {path: hash}}``: the files as each checkpointed turn began."""
    final: Mapping[str, str]
    """``{path: hash}``: the files as the run left them."""
    read: Callable[[str], bytes]
    """A content by its hash."""
    final_from: str
    """Where :attr:`final` was read: ``workspace`` or ``checkpoint``."""

    def changed(self, turn: int) -> list[str]:
        """The paths turn ``turn`` wrote, made or removed, sorted; [] for a turn without a
        checkpoint of its own."""
        before = self.at_turn.get(turn)
        if before is None:
            return []
        after = self.after(turn)
        return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))

    def after(self, turn: int) -> Mapping[str, str]:
        """The files as turn ``turn`` ended."""
        turns = list(self.at_turn)  # in order: checkpoint_turns reads them so
        later = bisect.bisect_right(turns, turn)
        return self.at_turn[turns[later]] if later < len(turns) else self.final


def file_history(store: Store | None, run_id: str, workspace: Path | None) -> FileHistory | None:
    """The run's checkpointed files; None when it has no checkpoints (a run without a store,
    a hosted session, one killed before its first turn ended)."""
    turns = checkpoint_turns(store, run_id) if store is not None else []
    if store is None or not turns:
        return None
    at_turn = {t: load_checkpoint(store, run_id, t, with_history=False).files for t in turns}
    on_disk: dict[str, bytes] = {}
    final: Mapping[str, str] = at_turn[turns[-1]]
    final_from = "checkpoint"
    if workspace is not None and (workspace / SYSTEM_DIR).is_dir():
        tree = FileTree(workspace)
        on_disk = tree.scan()
        final, final_from = tree.listing(), "workspace"

    def read(digest: str) -> bytes:
        if digest in on_disk:
            return on_disk[digest]
        try:
            return blob(store, digest)
        except GrNotebookError:
            return b"(this version is not in the store)"

    return FileHistory(at_turn, final, read, final_from)


class FileTexts:
    """The texts of a run's files on its page, within one room (:data:`FILES_BYTES`),
    counted in the bytes the page writes them in, so that no run's files, of markup or of
    emoji, take its page past 2 MB. The files the run changed, as it left them, are kept
    first, then each turn's versions in order, then the files no turn changed: what a
    reader looks for first is what the run made. A version the page holds already costs
    nothing; past the room a version is named without its text."""

    def __init__(self, texts: Texts, files: FileHistory) -> None:
        self.texts = texts
        self.history = files
        self.left = FILES_BYTES
        self.held: dict[str, int | None] = {}
        """A version's text by its content's hash (None: no room), so each is read once."""
        self.changes: dict[str, list[int]] = {}
        """The turns that changed each path, in order."""
        for turn in files.at_turn:
            for path in files.changed(turn):
                self.changes.setdefault(path, []).append(turn)
        for path in sorted(self.changes):
            if path in files.final:
                self.text(files.final[path])

    def text(self, digest: str) -> int | None:
        """The index of version ``digest``'s text; None when the room is spent."""
        if digest not in self.held:
            self.held[digest] = self._kept(digest)
        return self.held[digest]

    def _kept(self, digest: str) -> int | None:
        if self.left <= 0:
            return None  # spent: nothing more is read
        data = self.history.read(digest)
        text = decoded(data)
        binary = f"(a binary file of {len(data):,} bytes)"
        shown = cut(text, FILE_CHARS, "file") if text is not None else binary
        found = self.texts.find(shown)
        if found is not None:
            return found
        size = len(embedded_json(shown).encode("utf-8"))
        if size > self.left:
            self.left = 0  # the first version that does not fit closes the room
            return None
        self.left -= size
        return self.texts.add(shown)
