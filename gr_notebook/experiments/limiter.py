"""One rate limit for every model-bound run of an experiment.

The runs share one event loop and, usually, one API key: a 429 that one run meets is the
provider saying the whole experiment goes too fast. So every run's model calls pass one
:class:`RateLimiter`. A 429 pauses every new call until the retry's delay has passed and
halves how many calls may be in flight; each run of ``recover_after`` calls without one
lets one more in again, up to ``max_concurrency`` (additive increase, multiplicative
decrease, as TCP does).

The limiter learns of a 429 from the adapter's own retry report (a ``model_retry`` event
with status 429): :class:`GatedModel` wraps the call's context, so no
adapter changes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from gr_notebook.events import Event, ModelRetryEvent
from gr_notebook.models.base import Model, ModelRequest, ModelResponse, TokenCounter
from gr_notebook.models.call_context import calling, current_call
from gr_notebook.validation import whole_number

__all__ = ["GatedModel", "RateLimiter", "gated"]

RATE_LIMITED = 429


class RateLimiter:
    def __init__(
        self,
        max_concurrency: int,
        *,
        recover_after: int = 10,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.max_concurrency = whole_number(max_concurrency, "max_concurrency")
        self.limit = self.max_concurrency
        """How many model calls may be in flight now."""
        self.in_flight = 0
        self.paused_until = 0.0
        self.rate_limits = 0
        """How many 429s the experiment met."""
        self.recover_after = recover_after
        self._clock = clock
        self._sleep = sleep
        self._streak = 0
        self._changed: asyncio.Condition | None = None

    @asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        """Hold one of the calls allowed in flight, after any pause is over."""
        changed = self._condition()
        while True:
            wait = self.paused_until - self._clock()
            if wait > 0:
                await self._sleep(wait)
                continue
            async with changed:
                if self.in_flight < self.limit:
                    self.in_flight += 1
                    break
                await changed.wait()
        try:
            yield
        finally:
            async with changed:
                self.in_flight -= 1
                changed.notify_all()

    def rate_limited(self, delay_s: float) -> None:
        """A 429: every new call waits ``delay_s``, and half as many go at once."""
        self.rate_limits += 1
        self.paused_until = max(self.paused_until, self._clock() + max(delay_s, 0.0))
        self.limit = max(1, self.limit // 2)
        self._streak = 0

    def succeeded(self) -> None:
        self._streak += 1
        if self._streak >= self.recover_after and self.limit < self.max_concurrency:
            self.limit += 1
            self._streak = 0
            if self._changed is not None:
                asyncio.get_running_loop().create_task(self._wake())

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _wake(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def __repr__(self) -> str:
        return (
            f"RateLimiter({self.in_flight}/{self.limit} in flight, max {self.max_concurrency}, "
            f"{self.rate_limits} rate limits)"
        )


class GatedModel:
    """``model``, with each call passing the experiment's :class:`RateLimiter`."""

    def __init__(self, model: Model, limiter: RateLimiter) -> None:
        self.model = model
        self.limiter = limiter

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def context_window(self) -> object:
        return getattr(self.model, "context_window", None)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        context = current_call()
        async with self.limiter.call():
            if context is None:
                response = await self.model.complete(request)
            else:
                with calling(replace(context, emit=self._watching(context.emit))):
                    response = await self.model.complete(request)
        self.limiter.succeeded()
        return response

    def _watching(self, emit: Callable[[Event], object]) -> Callable[[Event], object]:
        def watch(event: Event) -> object:
            if isinstance(event, ModelRetryEvent) and event.status == RATE_LIMITED:
                self.limiter.rate_limited(event.delay_s)
            return emit(event)

        return watch

    def __repr__(self) -> str:
        return f"GatedModel({self.model!r})"


class _GatedCounter(GatedModel):
    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        counter: TokenCounter = self.model  # type: ignore[assignment]
        return await counter.count_input_tokens(request)


def gated(model: Model, limiter: RateLimiter) -> GatedModel:
    """A model that can count its requests stays one that can."""
    return (_GatedCounter if isinstance(model, TokenCounter) else GatedModel)(model, limiter)
