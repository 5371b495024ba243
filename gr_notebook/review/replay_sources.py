"""The recorded runs a guardrail replay reads: what ``runs`` may be (a Run, run ids with a
store, a mapping of labels, an experiment's results), each as one :class:`RecordedRun`
with its events, its checkpoints and the whole inputs of its calls."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.eventdata import MAX_EVENT_ITEMS, MAX_EVENT_TEXT
from gr_notebook.events import Event, RunStartedEvent, ToolCallEvent, as_typed

if TYPE_CHECKING:
    from gr_notebook.history.checkpoint_store import Checkpoint
    from gr_notebook.history.store import Store

__all__ = ["FullInputs", "RecordedRun", "recorded_runs"]


@dataclass
class RecordedRun:
    """One run to replay: its label in the result, its id, its events, and the store
    that holds its checkpoints (None for events given alone)."""

    label: str
    run_id: str
    events: list[Event]
    store: Store | None

    def checkpoints(self) -> Callable[[int], Checkpoint | None]:
        """The run's checkpoint of a turn (its files and state, not its messages), or None."""
        store = self.store
        if store is None:
            return lambda turn: None
        from gr_notebook.history.checkpoint_store import checkpoint_turns, load_checkpoint

        turns = set(checkpoint_turns(store, self.run_id))
        cache: dict[int, Checkpoint | None] = {}

        def at(turn: int) -> Checkpoint | None:
            if turn not in turns:
                return None
            if turn not in cache:
                for old in [t for t in cache if t < turn - 1]:
                    del cache[old]
                cache[turn] = load_checkpoint(store, self.run_id, turn, with_history=False)
            return cache[turn]

        return at

    def messages(self, turn: int) -> Iterator[Any]:
        """The conversation as the checkpoint of ``turn`` holds it, newest first, each
        message read from the store only when asked for (none without a checkpoint)."""
        if self.store is None:
            return
        from gr_notebook.history.checkpoint_store import blob, checkpoint_turns, load_checkpoint

        store = self.store
        if turn not in checkpoint_turns(store, self.run_id):
            return
        light = load_checkpoint(store, self.run_id, turn, with_history=False)
        context = light.snapshot.get("context")
        kept = context.get("messages") if isinstance(context, Mapping) else None
        if not isinstance(kept, Mapping):
            return
        for digest in reversed(kept.get("tail") or []):
            yield json.loads(blob(store, digest))
        for chunk in reversed(kept.get("chunks") or []):
            for digest in reversed(json.loads(blob(store, chunk))):
                yield json.loads(blob(store, digest))


_RUNS_HELP = (
    "runs takes a Run, a list of runs, run ids with store=..., a dict of label → run, or "
    "an experiment's results"
)


def recorded_runs(runs: object, store: object, call: str) -> Iterator[RecordedRun]:
    """Each run ``runs`` names, read as it is reached; a store opened here (from a path)
    is closed when the last one is done. ``call`` names the function in errors."""
    from gr_notebook.history.store import reading

    results_store = getattr(runs, "store", None)
    if hasattr(runs, "records") and isinstance(results_store, (str, Path)):
        ids = [r.run_id for r in runs.records if r.run_id is not None]
        with reading(results_store) as opened:
            for run_id in ids:
                yield _stored(run_id, run_id, opened)
        return
    items = _labelled(runs, call)
    ids = [run for _, run in items if isinstance(run, str)]
    if ids and store is None:
        raise ConfigError(
            f"{call}: run ids need the store that holds them: {call}([{ids[0]!r}, ...], "
            "store='gr_runs/store.sqlite')"
        )
    opened_store = None
    try:
        if ids:
            opened_store = _open(store)
        for label, run in items:
            yield _recorded(label, run, opened_store, call)
    finally:
        if opened_store is not None and not _is_store(store):
            opened_store.close()


def _labelled(runs: object, call: str) -> list[tuple[str | None, object]]:
    """The runs as (label or None, run) pairs; a run is a Run, a run id or its events."""
    if _is_run(runs) or isinstance(runs, str):
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
    if isinstance(run, str):
        assert store is not None
        return _stored(label or run, run, store)
    if _is_run(run):
        run_id = str(run.run_id)  # type: ignore[attr-defined]
        events = [as_typed(e) for e in run.events]  # type: ignore[attr-defined]
        return RecordedRun(label or run_id, run_id, events, getattr(run, "store", None))
    if isinstance(run, Iterable) and not isinstance(run, (str, bytes, Mapping)):
        events = [as_typed(e) for e in run]
        if not events or not all(isinstance(e, Event) for e in events):
            raise ConfigError(f"{call}: {_RUNS_HELP}; got a list that holds no events")
        started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
        run_id = started.run_id if started is not None else ""
        return RecordedRun(label or run_id or "run", run_id, events, None)
    raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(run).__name__}")


def _is_run(value: object) -> bool:
    return hasattr(value, "run_id") and hasattr(value, "events") and hasattr(value, "fork")


def _is_store(value: object) -> bool:
    from gr_notebook.history.store import Store

    return isinstance(value, Store)


def _open(store: object) -> Store:
    from gr_notebook.history.store import Store

    if isinstance(store, Store):
        return store
    if not isinstance(store, (str, Path)):
        raise ConfigError(f"store takes a Store or the path of one, not {type(store).__name__}")
    return Store(store, create=False)


def _stored(label: str, run_id: str, store: Store) -> RecordedRun:
    events = [as_typed(e) for e in store.events(run_id)]
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
