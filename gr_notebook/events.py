"""Every state change of a run is an :class:`Event`; the :class:`EventLog` is its history.

Widgets subscribe to the log, DataFrames are built from it and the store persists it, so no
component has to reach into another to learn what happened.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, overload

from gr_notebook.eventdata import clip_data

__all__ = ["EVENT_KINDS", "Event", "EventLog", "Subscriber"]

logger = logging.getLogger("gr_notebook")

#: The kinds the core emits. Later layers add their own; a kind is just a string.
EVENT_KINDS: Final = frozenset(
    {
        "run_started",
        "model_call",
        "tool_call",
        "todos_written",
        "todo_completed",
        "phase_started",
        "phase_transition",
        "prompt_injected",
        "compaction",
        "rewind",
        "workspace_summary",
        "plan_updated",
        "stuck_checkpoint",
        "job_complete",
        "run_paused",
        "run_resumed",
        "policy_decision",
        "policies_reset",
        "feedback",
        "guidance",
        "completion_check",
        "intervention",
        "intervention_skipped",
        "task_assessed",
        "confirmation",
        "conversation_pruned",
        "conversation_released",
        "run_finished",
        "error",
    }
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. ``data`` holds JSON-serialisable values only."""

    seq: int
    kind: str
    turn: int
    phase: int
    time: float
    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __repr__(self) -> str:
        keys = ", ".join(list(self.data)[:4]) + (", …" if len(self.data) > 4 else "")
        return f"<Event #{self.seq} {self.kind} turn={self.turn} phase={self.phase} {{{keys}}}>"


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

    def append(
        self, kind: str, data: Mapping[str, Any] | None = None, *, turn: int = 0, phase: int = 0
    ) -> Event:
        event = Event(
            seq=len(self._events),
            kind=kind,
            turn=turn,
            phase=phase,
            time=self._clock(),
            data=MappingProxyType(clip_data(dict(data))) if data else _EMPTY,
        )
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
        if event.kind == "error" and event.data.get("source") == "subscriber":
            logger.exception("subscriber %r failed while reporting an error", callback)
            return
        self.append(
            "error",
            {
                "source": "subscriber",
                "subscriber": getattr(callback, "__qualname__", repr(callback)),
                "error_type": type(exc).__name__,
                "message": str(exc),
                "event_seq": event.seq,
            },
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
