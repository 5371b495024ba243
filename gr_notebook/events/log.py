"""The :class:`EventLog`: a run's history, in order, with synchronous subscribers.

Widgets subscribe to the log, DataFrames are built from it and the store persists it, so no
component has to reach into another to learn what happened.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar, overload

from gr_notebook.eventdata import clip_data
from gr_notebook.events.base import Event, decode
from gr_notebook.events.lifecycle import ErrorEvent
from gr_notebook.events.schema import EMPTY, schema_of

__all__ = ["EventLog", "Subscriber"]

logger = logging.getLogger("gr_notebook")

E = TypeVar("E", bound=Event)
Subscriber = Callable[[Event], object]


class EventLog(Sequence[Event]):
    """An append-only, ordered sequence of events with synchronous subscribers.

    Every subscriber sees every event in ``seq`` order, even events appended while another
    is being delivered. A subscriber that raises is reported as an ``error`` event and stays
    subscribed; it never breaks the run. A failure while delivering such a report is only
    logged, so a subscriber that always fails cannot recurse.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._events: list[Event] = []
        self._subscribers: list[Subscriber] = []
        self._clock = clock
        self._queue: deque[Event] = deque()
        self._delivering = False

    @overload
    def append(self, event: E, *, turn: int = 0, phase: int = 0) -> E: ...
    @overload
    def append(
        self, event: str, data: Mapping[str, Any] | None = None, *, turn: int = 0, phase: int = 0
    ) -> Event: ...
    def append(
        self,
        event: Event | str,
        data: Mapping[str, Any] | None = None,
        *,
        turn: int = 0,
        phase: int = 0,
    ) -> Event:
        """Record an event: a kind's class as an emitter built it, or (as before events
        were typed) a kind's name and its data, or an untyped event, decoded to the kind's
        class when the data has its layout. The log stamps the envelope and clips what is
        too long: no string in any event is longer than ``MAX_EVENT_TEXT``."""
        if isinstance(event, str):
            event = decode(event, _frozen(data))
        elif type(event) is Event:  # untyped: read as a kind's name and data are
            event = decode(event.kind, _frozen(event.data))
        elif event.seq >= 0:  # already in a log: this one records a copy
            event = dataclasses.replace(event)
        setter = object.__setattr__
        if type(event) is not Event:
            for name, value in schema_of(type(event)).clipped(event).items():
                setter(event, name, value)
        setter(event, "seq", len(self._events))
        setter(event, "turn", turn)
        setter(event, "phase", phase)
        setter(event, "time", self._clock())
        self._events.append(event)
        self._deliver(event)
        return event

    def load(self, events: Sequence[Event]) -> None:
        """Put back a run's recorded events (a snapshot's) into an empty log; subscribers
        are not told, since they saw them when they happened."""
        if self._events:
            raise ValueError("events can be loaded only into an empty log")
        self._events.extend(events)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Deliver every later event to ``callback``; returns a function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self._events if e.kind in kinds]

    def _deliver(self, event: Event) -> None:
        """Deliver in seq order: events appended during delivery wait their turn."""
        self._queue.append(event)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._queue:
                current = self._queue.popleft()
                for callback in tuple(self._subscribers):
                    try:
                        callback(current)
                    except Exception as exc:  # a subscriber must never break the run
                        self._report(callback, current, exc)
        finally:
            self._delivering = False

    def _report(self, callback: Subscriber, event: Event, exc: Exception) -> None:
        if isinstance(event, ErrorEvent) and event.source == "subscriber":
            logger.exception("subscriber %r failed while reporting an error", callback)
            return
        self.append(
            ErrorEvent(
                source="subscriber",
                subscriber=getattr(callback, "__qualname__", repr(callback)),
                error_type=type(exc).__name__,
                message=str(exc),
                event_seq=event.seq,
            ),
            turn=event.turn,
            phase=event.phase,
        )

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            return tuple(self._events[index])
        return self._events[index]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __repr__(self) -> str:
        return f"<EventLog {len(self._events)} events>"


def _frozen(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """An untyped event's data: a read-only copy with every string clipped."""
    return MappingProxyType(clip_data(dict(data))) if data else EMPTY
