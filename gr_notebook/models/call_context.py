"""What a model may know about the run that calls it, without the Model protocol changing.

The loop sets a :class:`CallContext` around each ``model.complete(request)`` (and around
the count before it). A model that retries reports each retry through it, so a retry is an
event like any other; a model that counted the request finds its count there. A model that
streams passes the pieces of its turn, as they arrive, to whoever watches the run
(:class:`DeltaFeed`): they are not events, and nothing is built when nobody watches. A
context variable keeps concurrent runs sharing one model object apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from gr_notebook.events import Event, decode

__all__ = [
    "CallContext",
    "DeltaFeed",
    "DeltaKind",
    "ModelDelta",
    "TurnStream",
    "calling",
    "current_call",
    "report",
    "turn_stream",
]

logger = logging.getLogger("gr_notebook")

DeltaKind: TypeAlias = Literal["text", "thinking", "redacted_thinking", "tool_use", "restart"]
"""``text`` and ``thinking`` carry a piece of a block; ``tool_use`` names the tool a block
calls; ``redacted_thinking`` marks a block whose thinking is encrypted; ``restart`` says the
request is being sent again (a retry), so what was shown of this turn is void."""


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """A piece of a model turn as it streams in: for a person watching, never stored."""

    turn: int
    kind: DeltaKind
    text: str = ""


class DeltaFeed:
    """A run's watchers of its model turns as they stream (a dashboard's live view).

    A watcher that raises is dropped, with one log line: a delta comes many times a second,
    and a broken view must neither stop the model call nor flood the run's events."""

    __slots__ = ("_watchers",)

    def __init__(self) -> None:
        self._watchers: list[Callable[[ModelDelta], object]] = []

    @property
    def watched(self) -> bool:
        return bool(self._watchers)

    def subscribe(self, callback: Callable[[ModelDelta], object]) -> Callable[[], None]:
        """Deliver each later delta to ``callback``; returns a function that unsubscribes."""
        self._watchers.append(callback)

        def unsubscribe() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)

        return unsubscribe

    def send(self, delta: ModelDelta) -> None:
        for watcher in tuple(self._watchers):
            try:
                watcher(delta)
            except Exception:
                logger.exception("a watcher of the model's stream failed; it is dropped")
                if watcher in self._watchers:
                    self._watchers.remove(watcher)


@dataclass(frozen=True, slots=True)
class CallContext:
    emit: Callable[[Event], object]
    tokens_remaining: int | None = None
    """Tokens left under the run's hard limit; None when it has none."""
    input_tokens: int | None = None
    """The request's input tokens as the model counted them before sending, if it did."""
    deltas: DeltaFeed | None = None
    """Where a streaming model sends the pieces of this turn; None outside a run."""
    turn: int = 0
    """The run's turn this call is for."""


class TurnStream:
    """One turn's deltas as an adapter sends them. :attr:`active` is false while nobody
    watches, so the adapter builds nothing then; :meth:`attempt` starts each try of the
    request, and voids what an earlier, failed try showed."""

    __slots__ = ("_feed", "_shown", "_turn")

    def __init__(self, feed: DeltaFeed, turn: int) -> None:
        self._feed, self._turn, self._shown = feed, turn, False

    @property
    def active(self) -> bool:
        return self._feed.watched

    def send(self, kind: DeltaKind, text: str = "") -> None:
        self._shown = True
        self._feed.send(ModelDelta(self._turn, kind, text))

    def attempt(self) -> None:
        """A try of the request begins: a retry tells the watchers to start the turn over."""
        if self._shown:
            self._shown = False
            self._feed.send(ModelDelta(self._turn, "restart"))

    def keep(self) -> None:
        """What was shown stands (a segment of the turn arrived whole)."""
        self._shown = False


_CURRENT: ContextVar[CallContext | None] = ContextVar("gr_notebook_model_call", default=None)


def current_call() -> CallContext | None:
    return _CURRENT.get()


def turn_stream() -> TurnStream | None:
    """This call's :class:`TurnStream`, or None outside a run."""
    context = _CURRENT.get()
    if context is None or context.deltas is None:
        return None
    return TurnStream(context.deltas, context.turn)


@contextmanager
def calling(context: CallContext) -> Iterator[CallContext]:
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def report(event: Event | str, data: Mapping[str, Any] | None = None) -> None:
    """Emit an event for the run this call belongs to; outside a run, nothing happens.

    ``event`` is a kind's class (``ModelRetryEvent(...)``), or, as before events were
    typed, a kind's name and its data."""
    context = _CURRENT.get()
    if context is not None:
        context.emit(decode(event, data or {}) if isinstance(event, str) else event)
