"""How a kind's fields become data and back: the key of each field, what a missing one
reads as, and how its text is clipped. Derived once per class from its type hints.

An event's data is the JSON object the store keeps and ``event.data`` shows: one key per
field, in field order, a nested record as an object. A field whose default is ``None`` is
left out while it is ``None`` (``ToolCallEvent.directive``, ``ErrorEvent.tool``), so the
data has exactly the keys an emitter gave.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from gr_notebook.eventdata import MAX_DATA_DEPTH, MAX_EVENT_TEXT, clip, clip_data

__all__ = ["CLIP", "EMPTY", "ENVELOPE", "KEY", "Clip", "Field", "Schema", "key", "schema_of"]

KEY: Final = "gr_notebook.event_key"
"""Field metadata: the field's key in the data, when it differs from its name (a todo
list's ``kind`` is ``todo_kind``, since ``kind`` names the event's own kind)."""
CLIP: Final = "gr_notebook.event_clip"
"""Field metadata: how the field is clipped, when its type does not say (tool inputs)."""
ENVELOPE: Final = frozenset({"seq", "turn", "phase", "time"})
EMPTY: Mapping[str, Any] = MappingProxyType({})

Clip = Callable[[Any], Any]
"""Returns its argument itself when nothing in it is too long."""


def key(name: str, **kwargs: Any) -> Any:
    """A field stored under another key: ``todo_kind: str = key("kind")``."""
    return dataclasses.field(metadata={KEY: name}, **kwargs)


def _clip_texts(value: Any) -> Any:
    """A list of free texts (todo titles, deliverables), copied only when one is long."""
    if not value or not isinstance(value, list | tuple) or not _long(value):
        return value
    return type(value)(clip(v) if isinstance(v, str) else v for v in value)


def _nested(value: Any) -> Any:
    """JSON-like data of unknown shape (a config, observations): walked, and copied only
    when something in it, a key included, is long."""
    return clip_data(value) if _long(value) else value


_SCALARS: Final = frozenset({int, float, bool, type(None)})


def _long(value: Any, depth: int = 0) -> bool:
    """Whether :func:`clip_data` would change anything in ``value`` (scalars are looked at
    in place: this runs on every event that holds nested data)."""
    if value.__class__ is str:
        return len(value) > MAX_EVENT_TEXT
    if isinstance(value, Mapping):
        if any(k.__class__ is not str or len(k) > MAX_EVENT_TEXT for k in value):
            return True
        items: Iterable[Any] = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return isinstance(value, str) and len(value) > MAX_EVENT_TEXT  # a str subclass
    if depth >= MAX_DATA_DEPTH:
        return True
    for v in items:
        if v.__class__ is str:
            if len(v) > MAX_EVENT_TEXT:
                return True
        elif v.__class__ not in _SCALARS and _long(v, depth + 1):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    key: str
    optional: bool
    """Its default is None: left out of the data while None."""
    required: bool
    """No default: data without its key is not this kind's (strict decoding refuses it)."""
    record: type | None
    """A nested record class (``GuidanceRecord``): stored as an object."""
    nullable: bool
    clip: Clip | None
    empty: Any
    """What a missing key reads as, for data of an older or foreign layout."""


class Schema:
    """One class's fields, as data."""

    __slots__ = ("by_key", "clips", "cls", "fields", "required", "texts")

    def __init__(self, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        self.cls = cls
        self.fields = tuple(
            _field(f, hints[f.name]) for f in dataclasses.fields(cls) if f.name not in ENVELOPE
        )
        self.by_key = {f.key: f for f in self.fields}
        self.required = frozenset(f.key for f in self.fields if f.required)
        self.texts = tuple(f.name for f in self.fields if f.clip is _clip_text)
        """The free-text fields: clipped inline, the commonest case."""
        self.clips = tuple(
            (f.name, f.clip) for f in self.fields if f.clip is not None and f.clip is not _clip_text
        )

    def to_data(self, obj: object) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self.fields:
            value = getattr(obj, f.name)
            if value is None:
                if f.optional:
                    continue
            elif f.record is not None:
                value = schema_of(f.record).to_data(value)
            out[f.key] = value
        return out

    def value(self, obj: object, name: str) -> Any:
        """One key's value, as :meth:`to_data` has it; KeyError when it has none."""
        f = self.by_key[name]
        value = getattr(obj, f.name)
        if value is None:
            if f.optional:
                raise KeyError(name)
            return None
        return value if f.record is None else schema_of(f.record).to_data(value)

    def keys(self, obj: object) -> list[str]:
        return [f.key for f in self.fields if not f.optional or getattr(obj, f.name) is not None]

    def strict(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """Constructor arguments from data of exactly this layout, else None: every key
        known, none required missing, every nested record of its own layout."""
        by_key = self.by_key
        if not self.required <= data.keys() or any(k not in by_key for k in data):
            return None
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            f = by_key[name]
            if f.record is not None and value is not None:
                if not isinstance(value, Mapping):
                    return None
                inner = schema_of(f.record).strict(value)
                if inner is None:
                    return None
                value = f.record(**inner)
            kwargs[f.name] = value
        return kwargs

    def lenient(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Constructor arguments from data of any layout: what is missing reads as empty
        (``""``, 0, None, ()), keys this version does not know are ignored."""
        kwargs: dict[str, Any] = {}
        for f in self.fields:
            value = data.get(f.key, f.empty)
            if f.record is not None:
                if isinstance(value, Mapping):
                    value = f.record(**schema_of(f.record).lenient(value))
                elif value is not None or not f.nullable:
                    value = None if f.nullable else f.record(**schema_of(f.record).lenient({}))
            kwargs[f.name] = value
        return kwargs

    def clipped(self, obj: Any) -> dict[str, Any]:
        """The fields that are too long, clipped; empty when none is."""
        changes: dict[str, Any] = {}
        for name in self.texts:
            value = getattr(obj, name)
            if value.__class__ is str and len(value) > MAX_EVENT_TEXT:
                changes[name] = clip(value)
        for name, fn in self.clips:
            value = getattr(obj, name)
            short = fn(value)
            if short is not value:
                changes[name] = short
        return changes


_SCHEMAS: dict[type, Schema] = {}


def schema_of(cls: type) -> Schema:
    schema = _SCHEMAS.get(cls)
    if schema is None:
        schema = _SCHEMAS[cls] = Schema(cls)
    return schema


def _field(f: dataclasses.Field[Any], hint: Any) -> Field:
    has_default = f.default is not dataclasses.MISSING or (
        f.default_factory is not dataclasses.MISSING
    )
    record = _record(hint)
    return Field(
        name=f.name,
        key=f.metadata.get(KEY, f.name),
        optional=has_default and f.default is None,
        required=not has_default,
        record=record,
        nullable=_nullable(hint),
        clip=f.metadata.get(CLIP, _clip_for(hint, record)),
        empty=f.default if f.default is not dataclasses.MISSING else _empty(hint),
    )


def _args(hint: Any) -> tuple[Any, ...]:
    """The members of a union (``str | None``), or the hint alone."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(hint) if a is not type(None))
    return (hint,)


def _record(hint: Any) -> type | None:
    for arg in _args(hint):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _clip_for(hint: Any, record: type | None) -> Clip | None:
    """Free text is clipped; a number, a flag or a fixed vocabulary (a Literal) is not."""
    if record is not None:
        return lambda value: _record_clipped(value)
    args = _args(hint)
    if all(a in (int, float, bool) or typing.get_origin(a) is Literal for a in args):
        return None
    if args == (str,):
        return _clip_text
    origin = typing.get_origin(args[0]) if len(args) == 1 else None
    if origin in (Sequence, list, tuple) and typing.get_args(args[0])[:1] == (str,):
        return _clip_texts
    return _nested


def _clip_text(value: Any) -> Any:
    return clip(value) if isinstance(value, str) and len(value) > MAX_EVENT_TEXT else value


def _record_clipped(value: Any) -> Any:
    if value is None:
        return None
    changes = schema_of(type(value)).clipped(value)
    return dataclasses.replace(value, **changes) if changes else value


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in (
        typing.get_args(hint)
    )


def _empty(hint: Any) -> Any:
    if _nullable(hint):
        return None
    base = typing.get_origin(hint) or hint
    if base is str:
        return ""
    if base in (int, float, bool):
        return base()
    if base is Literal:
        return typing.get_args(hint)[0]
    if isinstance(base, type) and issubclass(base, Mapping):
        return EMPTY
    if isinstance(base, type) and issubclass(base, Sequence):
        return ()
    return None
