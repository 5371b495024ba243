"""The recorded runs a guardrail replay reads: what ``runs`` may be (a Run, run ids with a
store, a mapping of labels, an experiment's results), each as one :class:`RecordedRun`
with its events, its checkpoints and the whole inputs of its calls."""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from gr_notebook.errors import ConfigError
from gr_notebook.eventdata import MAX_EVENT_ITEMS, MAX_EVENT_TEXT
from gr_notebook.events import Event, ToolCallEvent, as_typed
from gr_notebook.history.run_arg import RUN_SHAPES, given_run, is_run

if TYPE_CHECKING:
    from gr_notebook.history.checkpoint_store import Checkpoint
    from gr_notebook.history.store import Store, StoreLike

__all__ = [
    "MEMO_RUNS",
    "FullInputs",
    "RecordedRun",
    "RunMemo",
    "forget_runs",
    "recorded_runs",
    "run_count",
]


@dataclass
class RecordedRun:
    """One run to replay: its label in the result, its id, its events, and the store
    that holds its checkpoints (None for events given alone). What it reads from the store
    (checkpoints, files, messages) it keeps in memory (:class:`RunMemo`), so a sweep or a
    backtest that replays it many times reads each once."""

    label: str
    run_id: str
    events: list[Event]
    store: Store | None
    memo: RunMemo | None = None

    def __post_init__(self) -> None:
        if self.memo is None and self.store is not None:
            self.memo = RunMemo(self.run_id, self.store)

    def checkpoints(self) -> Callable[[int], Checkpoint | None]:
        """The run's checkpoint of a turn (its files and state, not its messages), or None."""
        memo = self.memo
        if memo is None:
            return lambda turn: None
        return memo.checkpoint

    def messages(self, turn: int) -> Iterator[Any]:
        """The conversation as the checkpoint of ``turn`` holds it, newest first (none
        without a checkpoint)."""
        if self.memo is not None:
            yield from self.memo.messages(turn)


class RunMemo:
    """What a replay reads of one stored run, read once and kept: its checkpoints (files
    and state, not their messages), the files' bytes by hash, and each turn's messages.
    ``store`` is the store open now (a memo outlives the store it was first read from, when
    the run is read again, it is read through the one open then)."""

    def __init__(self, run_id: str, store: Store) -> None:
        from gr_notebook.history.checkpoint_store import checkpoint_turns

        self.run_id, self.store = run_id, store
        self.turns = frozenset(checkpoint_turns(store, run_id))
        self._checkpoints: dict[int, Checkpoint | None] = {}
        self._blobs: dict[str, bytes] = {}
        self._messages: dict[int, list[Any]] = {}

    def checkpoint(self, turn: int) -> Checkpoint | None:
        if turn not in self.turns:
            return None
        if turn not in self._checkpoints:
            from dataclasses import replace

            from gr_notebook.history.checkpoint_store import load_checkpoint

            light = load_checkpoint(self.store, self.run_id, turn, with_history=False)
            self._checkpoints[turn] = replace(light, read=self.blob)
        return self._checkpoints[turn]

    def blob(self, digest: str) -> bytes:
        if digest not in self._blobs:
            from gr_notebook.history.checkpoint_store import blob

            self._blobs[digest] = blob(self.store, digest)
        return self._blobs[digest]

    def messages(self, turn: int) -> list[Any]:
        if turn not in self._messages:
            self._messages[turn] = list(self._read_messages(turn))
        return self._messages[turn]

    def _read_messages(self, turn: int) -> Iterator[Any]:
        light = self.checkpoint(turn)
        if light is None:
            return
        context = light.snapshot.get("context")
        kept = context.get("messages") if isinstance(context, Mapping) else None
        if not isinstance(kept, Mapping):
            return
        for digest in reversed(kept.get("tail") or []):
            yield json.loads(self.blob(digest))
        for chunk in reversed(kept.get("chunks") or []):
            for digest in reversed(json.loads(self.blob(chunk))):
                yield json.loads(self.blob(digest))


_MEMOS: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], list[Event], RunMemo]] = OrderedDict()
"""Runs read from a store lately, by (store path, run id): their events and memo, with the
stamp they were read under. A run is read again only when its stamp changed (a run still
going gained events or checkpoints, the store file was replaced)."""
MEMO_RUNS = 256
"""The most runs :data:`_MEMOS` keeps (the least recently replayed leave first)."""


def _stamp(store: Store, run_id: str) -> tuple[Any, ...]:
    """What changes when a run's record does: its events, its checkpoints, the file."""
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT (SELECT COUNT(*) FROM events WHERE run_id = ?),"
            " (SELECT MAX(seq) FROM events WHERE run_id = ?),"
            " (SELECT COUNT(*) FROM checkpoints WHERE run_id = ?),"
            " (SELECT SUM(seq) FROM checkpoints WHERE run_id = ?)",
            (run_id, run_id, run_id, run_id),
        ).fetchone()
    try:
        file = os.stat(store.path)
        where: tuple[int, ...] = (file.st_dev, file.st_ino)
    except OSError:
        where = ()
    return (*found, *where)


def forget_runs() -> None:
    """Drop every run kept in memory (the next replay reads them from their stores)."""
    _MEMOS.clear()


_RUNS_HELP = (
    f"runs takes a run ({RUN_SHAPES}), a list of them, a dict of label → run, or an "
    "experiment's results"
)


def recorded_runs(runs: object, store: StoreLike | None, call: str) -> Iterator[RecordedRun]:
    """Each run ``runs`` names, read as it is reached; a store opened here (from a path,
    or the default one) is closed when the last one is done. ``call`` names the function
    in errors."""
    from gr_notebook.history.store import reading

    results = _results(runs)
    if results is not None:
        where, ids = results
        with reading(where) as merged:
            for run_id in ids:
                yield _stored(run_id, run_id, merged)
        return
    items = _labelled(runs, call)
    with contextlib.ExitStack() as stack:
        opened: Store | None = None
        if any(isinstance(run, str) for _, run in items):
            opened = stack.enter_context(reading(store))
        for label, run in items:
            yield _recorded(label, run, opened, call)


def run_count(runs: object, call: str) -> int:
    """How many runs :func:`recorded_runs` gives for ``runs``, counted without reading one."""
    results = _results(runs)
    return len(results[1]) if results is not None else len(_labelled(runs, call))


def _results(runs: object) -> tuple[str | Path, list[str]] | None:
    """An experiment's results as its merged store and its run ids, or None."""
    where = getattr(runs, "store", None)
    if not hasattr(runs, "records") or not isinstance(where, (str, Path)):
        return None
    return where, [r.run_id for r in runs.records if r.run_id is not None]


def _labelled(runs: object, call: str) -> list[tuple[str | None, object]]:
    """The runs as (label or None, run) pairs; a run is a Run, a run id or its events."""
    if is_run(runs) or isinstance(runs, str):
        items: list[tuple[str | None, object]] = [(None, runs)]
    elif isinstance(runs, Mapping):
        items = [(str(label), run) for label, run in runs.items()]
    elif isinstance(runs, Iterable) and not isinstance(runs, bytes):
        items = [(None, run) for run in runs]
        if items and all(isinstance(e, Event) for _, e in items):
            items = [(None, [e for _, e in items])]  # one run's events
    else:
        raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(runs).__name__}")
    if not items:
        raise ConfigError(f"{call}: no runs given; {_RUNS_HELP}")
    return items


def _recorded(label: str | None, run: object, store: Store | None, call: str) -> RecordedRun:
    """One run, from a run id in ``store``, a live or stored Run, or a list of its events."""
    if not isinstance(run, str) and not is_run(run) and isinstance(run, (bytes, Mapping)):
        raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(run).__name__}")
    try:
        given = given_run(run, None, call)
    except ConfigError:
        raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(run).__name__}") from None
    if given.events is None and given.run is None:
        assert store is not None
        return _stored(label or given.run_id, given.run_id, store)
    if given.run is not None:
        events = [as_typed(e) for e in given.run.events]  # type: ignore[attr-defined]
        kept = given.store if _is_store(given.store) else None
        return RecordedRun(label or given.run_id, given.run_id, events, kept)
    events = list(given.events or ())
    if not events:
        raise ConfigError(f"{call}: {_RUNS_HELP}; got a list that holds no events")
    return RecordedRun(label or given.run_id or "run", given.run_id, events, None)


def _is_store(value: object) -> TypeGuard[Store]:
    from gr_notebook.history.store import Store

    return isinstance(value, Store)


def _stored(label: str, run_id: str, store: Store) -> RecordedRun:
    key = (str(store.path), run_id)
    stamp = _stamp(store, run_id)
    kept = _MEMOS.get(key)
    if kept is not None and kept[0] == stamp:
        _MEMOS.move_to_end(key)
        _, events, memo = kept
        memo.store = store
        return RecordedRun(label, run_id, events, store, memo)
    events = [as_typed(e) for e in store.events(run_id)]
    if events:
        found = RecordedRun(label, run_id, events, store)
        assert found.memo is not None
        _MEMOS[key] = (stamp, events, found.memo)
        while len(_MEMOS) > MEMO_RUNS:
            _MEMOS.popitem(last=False)
        return found
    if not events:
        known = store.run_ids()[:5]
        raise ConfigError(
            f"no run {run_id!r} in {store.path}; its runs include: {', '.join(known) or 'none'}"
            " (gr.runs_df(store) lists them)"
        )
    return RecordedRun(label, run_id, events, store)


class FullInputs:
    """The calls' whole inputs: the events clip long ones, so a clipped input is read from
    the messages of the checkpoint after its turn."""

    def __init__(self, source: RecordedRun) -> None:
        self.source = source
        self.by_id: dict[str, Mapping[str, Any]] = {}
        self.read: set[int] = set()
        """The turns whose checkpoint was searched."""

    def of(self, event: ToolCallEvent) -> tuple[Mapping[str, Any], bool]:
        recorded = event.input or {}
        if not _clipped(recorded):
            return recorded, True
        if event.tool_use_id not in self.by_id and event.turn + 1 not in self.read:
            self.read.add(event.turn + 1)
            self._learn(self.source.messages(event.turn + 1), event.tool_use_id)
        whole = self.by_id.get(event.tool_use_id)
        return (whole, True) if whole is not None else (recorded, False)

    def _learn(self, messages: Iterable[Any], wanted: str) -> None:
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    found = block.get("input")
                    if isinstance(found, Mapping):
                        self.by_id[str(block.get("id"))] = found
            if wanted in self.by_id:
                return


def _clipped(value: object) -> bool:
    if isinstance(value, str):
        return len(value) >= MAX_EVENT_TEXT and value.endswith("…")
    if isinstance(value, Mapping):
        return any(_clipped(k) or _clipped(v) for k, v in value.items())
    if isinstance(value, list):
        return len(value) > MAX_EVENT_ITEMS or any(_clipped(v) for v in value)
    return False
