"""What a "run" argument may be, read one way wherever one is taken (``gr.resume``,
``gr.fork``, ``gr.compare``, ``gr.replay_guardrails``, ``gr.lint_guidance``, ``export_run``):
a ``gr.Run``, a run id found in ``store=``, or a run's events.

``store=`` is where run ids are looked up: a :class:`~gr_notebook.history.store.Store` or
its path, by default ``gr_runs/store.sqlite``. A Run brings its own store (``store=`` only
stands in when it has none), and events bring none."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gr_notebook.errors import ConfigError
from gr_notebook.events import Event, RunStartedEvent, as_typed

if TYPE_CHECKING:
    from gr_notebook.history.store import Store, StoreLike

__all__ = ["RUN_SHAPES", "GivenRun", "ReadRun", "given_run", "is_run", "read_run"]

RUN_SHAPES = (
    "a gr.Run, a run id (with store=, a gr.Store or its path; default gr_runs/store.sqlite), "
    "or a run's events (run.events, store.events(run_id))"
)


@dataclass(frozen=True, slots=True)
class GivenRun:
    """A run argument, told apart but not yet read: a run id's events are in ``store``."""

    run_id: str
    """Empty for events that never say (no ``run_started`` among them)."""
    store: StoreLike | None
    """Where the run's record and checkpoints are: a Run's own, else ``store=``."""
    events: tuple[Event, ...] | None
    """The events given, or a Run's; None for a run id, whose events are in the store."""
    run: object = None
    """The ``gr.Run`` given, if one was."""


@dataclass(frozen=True, slots=True)
class ReadRun:
    """A run argument with its events read and its store open (None for events alone)."""

    run_id: str
    events: list[Event]
    store: Store | None
    run: object = None


def is_run(value: object) -> bool:
    """A ``gr.Run`` (told by what it has: this layer sits below the run handle)."""
    return hasattr(value, "run_id") and hasattr(value, "events") and hasattr(value, "fork")


def given_run(run: object, store: StoreLike | None, call: str) -> GivenRun:
    """``run`` told apart; ConfigError naming the shapes for anything else. ``call`` names
    the function taking it, for the message."""
    if isinstance(run, str):
        if not run.strip():
            raise ConfigError(f"{call} takes {RUN_SHAPES}; got an empty run id")
        return GivenRun(run, store, None)
    if is_run(run):
        own = getattr(run, "store", None)
        return GivenRun(str(run.run_id), own or store, None, run)  # type: ignore[attr-defined]
    if isinstance(run, bytes) or not hasattr(run, "__iter__"):
        raise ConfigError(f"{call} takes {RUN_SHAPES}; got {type(run).__name__}")
    events = [as_typed(e) for e in run]
    stray = next((e for e in events if not isinstance(e, Event)), None)
    if stray is not None:
        what = f"a sequence holding {type(stray).__name__}"
        raise ConfigError(f"{call} takes {RUN_SHAPES}; got {what}")
    started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
    return GivenRun(started.run_id if started else "", None, tuple(events))


@contextmanager
def read_run(run: object, store: StoreLike | None, call: str) -> Iterator[ReadRun]:
    """``run`` with its events, and its store open while the block runs: a store opened
    here from a path is closed after, one given is left open."""
    from gr_notebook.history.store import reading

    given = given_run(run, store, call)
    if given.events is not None:
        yield ReadRun(given.run_id, list(given.events), None)
        return
    if given.run is not None and given.store is None:  # a run that kept no store
        events = [as_typed(e) for e in given.run.events]  # type: ignore[attr-defined]
        yield ReadRun(given.run_id, events, None, given.run)
        return
    with reading(given.store) as opened:
        if given.run is not None:
            events = [as_typed(e) for e in given.run.events]  # type: ignore[attr-defined]
        else:
            events = opened.events(given.run_id)
            if not events:
                known = ", ".join(opened.run_ids()[:5]) or "none"
                raise ConfigError(
                    f"{call}: no run {given.run_id!r} in {opened.path}; its runs include: "
                    f"{known} (gr.runs_df(store) lists them)"
                )
        yield ReadRun(given.run_id, events, opened, given.run)
