"""The recorded runs a guardrail replay reads: what ``runs`` may be (a Run, run ids with a
store, a mapping of labels, an experiment's results), each as one :class:`RecordedRun`
with its events, its checkpoints and the whole inputs of its calls."""

from __future__ import annotations

import contextlib
import json
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

__all__ = ["FullInputs", "RecordedRun", "recorded_runs", "run_count"]


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
