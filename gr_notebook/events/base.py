"""The event envelope, the kinds' registry, and the dict-shaped view every event keeps.

Each kind is a frozen dataclass that subclasses :class:`Event` and names itself with a
``kind`` class variable (a Literal): the discriminator. An emitter builds the kind's class;
the :class:`~gr_notebook.events.log.EventLog` stamps the envelope (``seq``, ``turn``,
``phase``, ``time``) on it, so nothing is copied on the way.

``Event`` itself, instantiated directly (``Event(seq, kind, turn, phase, time, data)``, the
signature it always had), is an event of a kind this version has no class for: a user's
own, or one from a newer store. It carries ``kind`` and ``data`` as given. :func:`as_typed`
reads one of a known kind as its class, for code that reads typed fields.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gr_notebook.events.schema import EMPTY, Schema, schema_of

__all__ = ["Event", "EventData", "as_typed", "decode", "event_class", "kinds"]

_KINDS: dict[str, type[Event]] = {}
_RENAMED: Final = {"stuck_checkpoint": "progress_check"}
"""Kinds renamed since a store recorded them, old name to new: an old row reads as the new
kind's event."""


class _Untyped:
    """The two slots only an untyped event fills: its kind and its data."""

    __slots__ = ("_data", "_kind")
    _kind: str
    _data: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return self._kind


@dataclass(frozen=True, slots=True, kw_only=True, init=False, eq=False, repr=False)
class Event(_Untyped):
    """One thing that happened: the base of every kind, and the class of an untyped event.

    ``data`` (and ``event["key"]``) is the event as a read-only mapping of JSON values,
    built from the fields on demand: what the store keeps and what code written before
    events were typed reads.
    """

    seq: int = -1
    """Its place in the run's log; -1 until a log takes it."""
    turn: int = 0
    phase: int = 0
    time: float = 0.0

    def __init__(
        self,
        seq: int,
        kind: str,
        turn: int,
        phase: int,
        time: float,
        data: Mapping[str, Any] = EMPTY,
    ) -> None:
        setter = object.__setattr__
        setter(self, "seq", seq)
        setter(self, "_kind", kind)
        setter(self, "turn", turn)
        setter(self, "phase", phase)
        setter(self, "time", time)
        setter(self, "_data", data)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that names its ``kind`` is that kind's class (the latest wins, so the
        slotted class a dataclass makes replaces the one it was made from)."""
        kind = cls.__dict__.get("kind")
        if isinstance(kind, str):
            _KINDS[kind] = cls

    @property
    def data(self) -> Mapping[str, Any]:
        if type(self) is Event:
            return self._data
        return EventData(self, schema_of(type(self)))

    def to_data(self) -> dict[str, Any]:
        """The data as a new dict: what the store writes."""
        if type(self) is Event:
            return dict(self._data)
        return schema_of(type(self)).to_data(self)

    def __getitem__(self, key: str) -> Any:
        if type(self) is Event:
            return self._data[key]
        return schema_of(type(self)).value(self, key)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Event or type(self) is not Event:
            return NotImplemented
        return (self.seq, self._kind, self.turn, self.phase, self.time, self._data) == (
            other.seq,
            other._kind,
            other.turn,
            other.phase,
            other.time,
            other._data,
        )

    __hash__ = None  # type: ignore[assignment]  # data is a mapping

    def __repr__(self) -> str:
        keys = list(self.data)
        shown = ", ".join(keys[:4]) + (", …" if len(keys) > 4 else "")
        return f"<Event #{self.seq} {self.kind} turn={self.turn} phase={self.phase} {{{shown}}}>"


class EventData(Mapping[str, Any]):
    """A typed event's fields as a read-only mapping of JSON values, read on demand."""

    __slots__ = ("_event", "_schema")

    def __init__(self, event: Event, schema: Schema) -> None:
        self._event, self._schema = event, schema

    def __getitem__(self, key: str) -> Any:
        return self._schema.value(self._event, key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self._schema.value(self._event, key)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._schema.keys(self._event))

    def __len__(self) -> int:
        return len(self._schema.keys(self._event))

    def __repr__(self) -> str:
        return repr(self._schema.to_data(self._event))


def kinds() -> Mapping[str, type[Event]]:
    """Every kind with a class, the core's and any a user declared, by name."""
    return _KINDS


def event_class(kind: str) -> type[Event] | None:
    return _KINDS.get(kind)


def decode(
    kind: str,
    data: Mapping[str, Any],
    *,
    seq: int = -1,
    turn: int = 0,
    phase: int = 0,
    time: float = 0.0,
) -> Event:
    """The event that ``data`` records: its kind's class when the data has exactly that
    class's layout, else an untyped event that keeps the data as it is (a user's kind, a
    newer or older layout, a damaged row), so nothing is lost. A renamed kind reads as its
    new name."""
    kind = _RENAMED.get(kind, kind)
    cls = _KINDS.get(kind)
    if cls is not None:
        fields = schema_of(cls).strict(data)
        if fields is not None:
            return cls(seq=seq, turn=turn, phase=phase, time=time, **fields)
    return Event(seq, kind, turn, phase, time, data)


def as_typed(event: Event) -> Event:
    """The event as its kind's class, for code that reads typed fields. An untyped event of
    a known kind is read leniently: a missing key reads as empty (``""``, 0, None), an
    unknown one is ignored. Any other event is returned as it is."""
    if type(event) is not Event:
        return event
    cls = _KINDS.get(event.kind)
    if cls is None:
        return event
    fields = schema_of(cls).lenient(event.data)
    return cls(seq=event.seq, turn=event.turn, phase=event.phase, time=event.time, **fields)
