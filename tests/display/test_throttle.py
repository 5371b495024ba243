"""The redraw throttle: at most one render per interval, and the last change always shows."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from gr_notebook.display.throttle import Throttle


class FakeLoop:
    """A clock and a call_later queue, advanced by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def schedule(self, delay: float, callback: Callable[[], None]) -> bool:
        self.pending.append((self.now + delay, callback))
        return True

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [p for p in self.pending if p[0] <= self.now]
        self.pending = [p for p in self.pending if p[0] > self.now]
        for _, callback in sorted(due, key=lambda p: p[0]):
            callback()


def make(loop: FakeLoop, renders: list[float], interval: float = 0.1) -> Throttle:
    return Throttle(
        lambda: renders.append(loop.now),
        interval=interval,
        clock=loop.clock,
        scheduler=loop.schedule,
    )


def test_a_burst_of_events_renders_once() -> None:
    loop, renders = FakeLoop(), []
    throttle = make(loop, renders)
    for _ in range(1000):
        throttle.poke()
    assert renders == []  # events never render inline: the loop is not kept waiting
    loop.advance(0.0)
    assert renders == [0.0] and len(loop.pending) == 0


def test_events_over_two_seconds_render_at_most_ten_times_a_second() -> None:
    loop, renders = FakeLoop(), []
    throttle = make(loop, renders)
    for _ in range(2000):  # an event every millisecond for two seconds
        throttle.poke()
        loop.advance(0.001)
    loop.advance(1.0)
    assert 19 <= len(renders) <= 21
    gaps = [b - a for a, b in itertools.pairwise(renders)]
    assert min(gaps) >= 0.1 - 1e-9


def test_the_last_change_is_drawn_after_a_quiet_spell() -> None:
    loop, renders = FakeLoop(), []
    throttle = make(loop, renders)
    throttle.poke()
    loop.advance(0.0)
    loop.advance(0.05)
    throttle.poke()  # within the interval: deferred, not dropped
    assert len(renders) == 1
    loop.advance(0.05)
    assert renders == [0.0, pytest.approx(0.1)]


def test_flush_draws_stale_state_now_and_only_then() -> None:
    loop, renders = FakeLoop(), []
    throttle = make(loop, renders)
    throttle.flush()
    assert renders == []
    throttle.poke()
    throttle.flush()
    assert renders == [0.0]
    loop.advance(1.0)  # the scheduled call finds nothing stale
    assert renders == [0.0]


def test_without_an_event_loop_it_renders_inline_but_still_rate_limited() -> None:
    now = [0.0]
    renders: list[float] = []
    throttle = Throttle(
        lambda: renders.append(now[0]), clock=lambda: now[0], scheduler=lambda d, c: False
    )
    throttle.poke()
    throttle.poke()
    now[0] = 0.05
    throttle.poke()
    assert renders == [0.0] and throttle.stale
    now[0] = 0.2
    throttle.poke()
    assert renders == [0.0, 0.2]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Throttle(lambda: None, interval=0)


def test_a_failing_render_goes_to_on_error_and_the_next_one_still_runs() -> None:
    loop, errors = FakeLoop(), []
    calls = iter([RuntimeError("bad html"), None])

    def render() -> None:
        failure = next(calls)
        if failure:
            raise failure

    throttle = Throttle(render, clock=loop.clock, scheduler=loop.schedule, on_error=errors.append)
    throttle.poke()
    loop.advance(0.0)
    throttle.poke()
    loop.advance(0.2)
    assert [str(e) for e in errors] == ["bad html"] and throttle.renders == 2
