"""Runs bound by the model share one event loop, and a 429 slows them all."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.events import ModelRetryEvent
from gr_notebook.experiments import RateLimiter
from gr_notebook.experiments.limiter import gated
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.call_context import report
from tests.experiments.helpers import JOB


class Sleeps:
    """A fake ``sleep`` that advances a fake clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def test_a_429_pauses_every_new_call_and_halves_the_calls_in_flight() -> None:
    fake = Sleeps()
    limiter = RateLimiter(4, recover_after=3, clock=fake.clock, sleep=fake.sleep)
    async with limiter.call():
        assert limiter.in_flight == 1
    limiter.rate_limited(2.5)
    assert limiter.limit == 2 and limiter.rate_limits == 1
    async with limiter.call():
        pass
    assert fake.slept == [2.5]  # the next call, from any run, waited out the pause
    for _ in range(3):
        limiter.succeeded()
    assert limiter.limit == 3  # recovers one at a time
    for _ in range(30):
        limiter.succeeded()
    assert limiter.limit == 4  # up to max_concurrency, no further


async def test_calls_beyond_the_limit_wait_for_one_to_end() -> None:
    limiter = RateLimiter(2)
    peak = 0

    async def one() -> None:
        nonlocal peak
        async with limiter.call():
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(one() for _ in range(7)))
    assert peak == 2 and limiter.in_flight == 0


async def test_gated_model_keeps_the_name_window_and_token_counting() -> None:
    class Counting:
        name = "counting"
        context_window = 1234

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return gr.text("ok")

        async def count_input_tokens(self, request: ModelRequest) -> int | None:
            return 7

    model = gated(Counting(), RateLimiter(1))
    assert model.name == "counting" and model.context_window == 1234
    assert await model.count_input_tokens(None) == 7  # type: ignore[attr-defined,arg-type]
    assert not hasattr(
        gated(gr.FunctionModel(Counting().complete), RateLimiter(1)), "count_input_tokens"
    )


def test_a_429_met_by_one_run_slows_every_run_of_the_experiment(tmp_path: Path) -> None:
    """The first call of the experiment meets a 429 (reported as the adapters report a
    retry); no other run's call starts until the delay has passed."""
    starts: list[tuple[float, int]] = []
    t0: list[float] = []
    delay = 0.4

    async def model(request: ModelRequest) -> ModelResponse:
        starts.append((time.monotonic(), request.turn))
        if not t0:
            t0.append(time.monotonic())
            report(
                ModelRetryEvent(
                    attempt=1,
                    max_retries=4,
                    operation="messages.create",
                    error_type="RateLimitError",
                    status=429,
                    retry_after=delay,
                    delay_s=delay,
                    message="429 rate_limit_error",
                )
            )
            await asyncio.sleep(delay)  # the adapter waits before its retry
        if request.turn < 3:
            return gr.tool_call("read_file", path="instructions.md")
        return gr.text("done")

    exp = gr.Experiment(
        {"api": gr.Agent(gr.FunctionModel(model), max_iterations=10)},
        {"x": JOB},
        repeats=4,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    results = exp.run(max_concurrency=4, progress=False)
    assert len(results) == 4
    assert exp.limiter is not None and exp.limiter.rate_limits == 1
    assert exp.limiter.limit < 4  # halved, recovering
    paused = [t for t, _ in starts if t0[0] < t < t0[0] + delay * 0.9]
    assert paused == []
    assert sum(t >= t0[0] + delay * 0.9 for t, _ in starts) >= 8  # the rest came after
    events = results.events(0) + results.events(1) + results.events(2) + results.events(3)
    assert sum(e.kind == "model_retry" for e in events) == 1


def test_model_bound_runs_overlap_on_one_loop_up_to_max_concurrency(tmp_path: Path) -> None:
    live = peak = 0

    async def model(request: ModelRequest) -> ModelResponse:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.05)
        live -= 1
        return gr.text("done")

    exp = gr.Experiment(
        {"api": gr.Agent(gr.FunctionModel(model))},
        {"x": JOB},
        repeats=9,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    results = exp.run(max_concurrency=3, progress=False)
    assert len(results) == 9 and peak == 3  # they overlapped, three at a time and no more


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_concurrency_is_checked(bad: object) -> None:
    with pytest.raises(gr.ConfigError, match="max_concurrency must be a whole number"):
        RateLimiter(bad)  # type: ignore[arg-type]


def test_a_429_from_the_messages_api_slows_every_run(tmp_path: Path) -> None:
    """The real Anthropic adapter against the local Messages API server: once one run's
    request is answered 429 (retry-after 0.5 s), no run sends another request until the
    delay has passed; only requests already in flight are served meanwhile."""
    from gr_notebook.models.anthropic_model import AnthropicModel
    from gr_notebook.models.retry import RetryPolicy
    from gr_notebook.testing import Fault, MessagesServer

    delay = 0.5
    served: list[float] = []
    limited: list[float] = []

    def rate_limited(body: dict[str, object]) -> Fault:
        limited.append(time.monotonic())
        return Fault.rate_limited(delay)

    def answer(body: dict[str, object]) -> ModelResponse:
        served.append(time.monotonic())
        if len(body["messages"]) < 5:  # type: ignore[arg-type]
            return gr.tool_call("read_file", path="instructions.md")
        return gr.text("done")

    with MessagesServer([rate_limited, *[answer] * 20]) as server:
        model = AnthropicModel(
            "claude-sonnet-4-6",
            api_key="sk-ant-test",
            base_url=server.url,
            retry=RetryPolicy(max_retries=3, base_s=0.01, max_s=0.05),
        )
        exp = gr.Experiment(
            {"claude": gr.Agent(model, max_iterations=10)},
            {"x": JOB},
            repeats=3,
            root=tmp_path / "exp",
            store=tmp_path / "store.sqlite",
        )
        results = exp.run(max_concurrency=3, progress=False)
    assert [r.status for r in results.records] == ["ended"] * 3
    assert exp.limiter is not None and exp.limiter.rate_limits == 1
    (t429,) = limited
    # while the pause lasts, only the other runs' requests sent before the 429 came back are
    # served (without the pause, every run goes on turning: a request every few ms)
    assert len([t for t in served if t429 <= t < t429 + delay * 0.9]) <= 2
    assert len([t for t in served if t >= t429 + delay * 0.9]) >= 6
