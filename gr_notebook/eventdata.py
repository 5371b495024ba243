"""What events keep of model text and tool inputs: shortened, so that an event stays small
whatever the model sends, and the store and the dashboard stay cheap.

Each event class knows which of its fields are free text (:mod:`gr_notebook.events.schema`);
the event log clips those, and an untyped event's data whole (:func:`clip_data`), so no
string of any event, key or value, from whichever emitter, is longer than
:data:`MAX_EVENT_TEXT`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any, Final

__all__ = ["MAX_EVENT_TEXT", "clip", "clip_data", "clip_json", "fields_json", "plain_json"]

MAX_EVENT_TEXT = 400
MAX_EVENT_ITEMS = 50
MAX_EVENT_DEPTH = 4
MAX_DATA_DEPTH = 16
"""Levels of event data :func:`clip_data` walks; emitters build shallow data, so deeper
levels are a bug, shown as ``…`` rather than walked."""


def clip(text: str, limit: int = MAX_EVENT_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_json(value: Any, depth: int = 0) -> Any:
    """Tool inputs as stored in events: strings (keys too), lists and nesting shortened, so
    an event stays small whatever the model sends."""
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_EVENT_DEPTH:
        return clip(json.dumps(value, default=str))
    if isinstance(value, Mapping):
        return {
            clip(str(k)): clip_json(v, depth + 1) for k, v in list(value.items())[:MAX_EVENT_ITEMS]
        }
    if isinstance(value, (list, tuple)):
        items = [clip_json(v, depth + 1) for v in value[:MAX_EVENT_ITEMS]]
        if len(value) > MAX_EVENT_ITEMS:
            items.append(f"… {len(value) - MAX_EVENT_ITEMS} more")
        return items
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip(repr(value))


def clip_data(value: Any, depth: int = 0) -> Any:
    """Event data with every string in it, keys included, at most :data:`MAX_EVENT_TEXT`
    characters; anything else as it is."""
    if isinstance(value, str):
        return clip(value)
    if depth >= MAX_DATA_DEPTH and isinstance(value, (Mapping, list, tuple)):
        return "…"
    if isinstance(value, Mapping):
        return {clip(str(k)): clip_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_data(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(clip_data(v, depth + 1) for v in value)
    return value


_ATOMS: Final = frozenset({str, int, float, bool, type(None)})


def plain_json(value: Any) -> Any:
    """Read-only mappings and tuples (the core keeps them so) as the dicts and lists JSON
    has; anything else as it is."""
    kind = type(value)
    if kind in _ATOMS:  # most values: no ABC check (a checkpoint per turn)
        return value
    if kind is dict or kind is MappingProxyType:  # the core's mappings: no ABC check either
        return {k if type(k) is str else str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    return value


def fields_json(value: Any) -> dict[str, Any]:
    """A dataclass of plain fields as JSON, field by field, without ``asdict``'s deep copy:
    snapshots are taken at every turn."""
    return {f.name: plain_json(getattr(value, f.name)) for f in fields(value)}
