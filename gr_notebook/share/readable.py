"""A run's events as a shared page reads them: each as its kind's class, with every field of
the type the class declares.

The store decodes an event by its keys alone (decision 128), so a crafted or damaged row can
hold text where a number belongs, a list where a text does, or a payload that is not JSON at
all. Such an event is left out of the page and named at the run's head, rather than ending
the export with a raw ``TypeError`` or being drawn as an empty call.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any, Final, Literal

from gr_notebook.events import Event, as_typed
from gr_notebook.events.schema import ENVELOPE

__all__ = ["readable"]

NAMED: Final = 5
"""The most left-out events a run's head names one by one; past them it counts."""


def readable(events: Iterable[Event]) -> tuple[list[Event], list[str]]:
    """The events a page can draw, typed, and a note for those it must leave out."""
    kept: list[Event] = []
    problems: list[str] = []
    for event in events:
        typed = as_typed(event)
        problem = _undecoded(event) or _mistyped(typed)
        if problem is None:
            kept.append(typed)
        else:
            problems.append(f"event {event.seq} ({event.kind}): {problem}")
    if not problems:
        return kept, []
    more = len(problems) - NAMED
    named = "; ".join(problems[:NAMED]) + (f"; and {more} more" if more > 0 else "")
    return kept, [f"{len(problems)} of its events could not be read and are left out: {named}."]


def _undecoded(event: Event) -> str | None:
    """Why the store could not decode ``event``'s row (see ``history.store``), if it could
    not."""
    if type(event) is Event and "unreadable" in event.data:
        return str(event.data["unreadable"])
    return None


def _mistyped(record: object) -> str | None:
    """The first field of ``record`` (an event, or a record in one) whose value is not of
    its declared type, said in words; None when every field is."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return None
    for name, hint in _hints(type(record)).items():
        value = getattr(record, name)
        if not _fits(value, hint):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return f"its {name} is {shown}, of the wrong type"
    return None


@cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in ENVELOPE}


def _fits(value: object, hint: Any) -> bool:
    """Whether ``value`` is a ``hint``, as JSON can hold one: an int passes as a float, a
    bool as neither, a list as a sequence (never a text), any mapping as a mapping."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is Literal:
        return any(type(value) is type(arg) for arg in typing.get_args(hint))
    if hint in (int, float):
        kinds = (int,) if hint is int else (int, float)
        return isinstance(value, kinds) and not isinstance(value, bool)
    if origin in (list, tuple, Sequence):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis] or [Any]
        return isinstance(value, list | tuple) and all(_fits(v, args[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return isinstance(value, hint) and _mistyped(value) is None
    return not isinstance(hint, type) or isinstance(value, hint)
