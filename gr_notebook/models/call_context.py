"""What a model may know about the run that calls it, without the Model protocol changing.

The loop sets a :class:`CallContext` around each ``model.complete(request)`` (and around
the count before it). A model that retries reports each retry through it, so a retry is an
event like any other; a model that counted the request finds its count there. A context
variable keeps concurrent runs sharing one model object apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from gr_notebook.events import Event, decode

__all__ = ["CallContext", "calling", "current_call", "report"]


@dataclass(frozen=True, slots=True)
class CallContext:
    emit: Callable[[Event], object]
    tokens_remaining: int | None = None
    """Tokens left under the run's hard limit; None when it has none."""
    input_tokens: int | None = None
    """The request's input tokens as the model counted them before sending, if it did."""


_CURRENT: ContextVar[CallContext | None] = ContextVar("gr_notebook_model_call", default=None)


def current_call() -> CallContext | None:
    return _CURRENT.get()


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
