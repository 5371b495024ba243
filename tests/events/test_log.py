"""Tests for the EventLog: ordering, subscribers, and subscribers that fail."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.eventdata import MAX_EVENT_TEXT
from gr_notebook.events import EVENT_KINDS, Event, EventLog
from gr_notebook.messages import ToolUseBlock
from gr_notebook.models import ModelResponse
from tests.conftest import agent_at


@pytest.fixture
def clock() -> Iterator[float]:
    return iter(float(t) for t in range(100, 10_000))


@pytest.fixture
def log(clock: Iterator[float]) -> EventLog:
    return EventLog(lambda: next(clock))


class Boom(RuntimeError):
    pass


def always_raises(event: Event) -> None:
    raise Boom(f"cannot handle {event.kind}")


# ── append and sequence ──────────────────────────────────────────────────────


def test_append_numbers_events_from_zero(log: EventLog) -> None:
    events = [log.append("run_started"), log.append("model_call"), log.append("tool_call")]
    assert [e.seq for e in events] == [0, 1, 2]
    assert [e.kind for e in log] == ["run_started", "model_call", "tool_call"]
    assert len(log) == 3


def test_append_records_turn_phase_time_and_data(log: EventLog) -> None:
    event = log.append("tool_call", {"name": "read_file"}, turn=4, phase=2)
    assert (event.turn, event.phase, event.time) == (4, 2, 100.0)
    assert event["name"] == "read_file"
    assert log.append("x").time == 101.0


def test_event_data_is_a_read_only_copy(log: EventLog) -> None:
    data = {"titles": "a"}
    event = log.append("todos_written", data)
    data["titles"] = "changed"
    assert event["titles"] == "a"
    with pytest.raises(TypeError):
        event.data["titles"] = "b"  # type: ignore[index]


def test_event_without_data_has_empty_mapping(log: EventLog) -> None:
    event = log.append("run_finished")
    assert dict(event.data) == {}
    with pytest.raises(KeyError):
        event["anything"]


def test_indexing_and_slicing(log: EventLog) -> None:
    for kind in ("a", "b", "c"):
        log.append(kind)
    assert log[1].kind == "b"
    assert log[-1].kind == "c"
    sliced = log[1:]
    assert isinstance(sliced, tuple)
    assert [e.kind for e in sliced] == ["b", "c"]


def test_of_kind_filters(log: EventLog) -> None:
    for kind in ("tool_call", "model_call", "tool_call", "error"):
        log.append(kind)
    assert [e.seq for e in log.of_kind("tool_call")] == [0, 2]
    assert [e.seq for e in log.of_kind("model_call", "error")] == [1, 3]


def test_event_kinds_include_error_and_core_kinds() -> None:
    assert {"error", "todo_completed", "phase_transition", "job_complete"} <= EVENT_KINDS


# ── subscribers ──────────────────────────────────────────────────────────────


def test_subscriber_receives_only_later_events(log: EventLog) -> None:
    log.append("before")
    seen: list[Event] = []
    log.subscribe(seen.append)
    log.append("after", {"n": 1})
    assert [e.kind for e in seen] == ["after"]
    assert seen[0] is log[1]


def test_unsubscribe_stops_delivery(log: EventLog) -> None:
    seen: list[str] = []
    unsubscribe = log.subscribe(lambda e: seen.append(e.kind))
    log.append("one")
    unsubscribe()
    log.append("two")
    assert seen == ["one"]


def test_unsubscribe_twice_is_harmless(log: EventLog) -> None:
    unsubscribe = log.subscribe(lambda e: None)
    unsubscribe()
    unsubscribe()
    log.append("x")
    assert len(log) == 1


def test_unsubscribe_removes_only_its_subscriber(log: EventLog) -> None:
    first: list[str] = []
    second: list[str] = []
    stop_first = log.subscribe(lambda e: first.append(e.kind))
    log.subscribe(lambda e: second.append(e.kind))
    stop_first()
    log.append("x")
    assert (first, second) == ([], ["x"])


def test_subscribers_are_called_in_subscription_order(log: EventLog) -> None:
    calls: list[str] = []
    log.subscribe(lambda e: calls.append("first"))
    log.subscribe(lambda e: calls.append("second"))
    log.append("x")
    assert calls == ["first", "second"]


def test_subscriber_may_unsubscribe_itself_during_delivery(log: EventLog) -> None:
    seen: list[str] = []
    others: list[str] = []

    def once(event: Event) -> None:
        seen.append(event.kind)
        stop()

    stop = log.subscribe(once)
    log.subscribe(lambda e: others.append(e.kind))
    log.append("one")
    log.append("two")
    assert seen == ["one"]
    assert others == ["one", "two"]


# ── failing subscribers ──────────────────────────────────────────────────────


def test_raising_subscriber_is_reported_as_error_event(log: EventLog) -> None:
    calls: list[int] = []

    def fails_once(event: Event) -> None:
        calls.append(event.seq)
        if event.kind == "tool_call":
            raise ValueError("widget broke")

    log.subscribe(fails_once)
    event = log.append("tool_call", turn=3, phase=2)
    assert event.seq == 0
    assert [e.kind for e in log] == ["tool_call", "error"]
    error = log[1]
    assert error["source"] == "subscriber"
    assert error["error_type"] == "ValueError"
    assert error["message"] == "widget broke"
    assert error["event_seq"] == 0
    assert "fails_once" in error["subscriber"]
    assert (error.turn, error.phase) == (3, 2)


def test_raising_subscriber_does_not_break_append_or_other_subscribers(log: EventLog) -> None:
    seen: list[str] = []
    log.subscribe(lambda e: None if e.kind == "error" else always_raises(e))
    log.subscribe(lambda e: seen.append(e.kind))
    returned = log.append("tool_call")
    assert returned.kind == "tool_call"
    assert sorted(seen) == ["error", "tool_call"]


def test_raising_subscriber_stays_subscribed(log: EventLog) -> None:
    calls: list[str] = []

    def flaky(event: Event) -> None:
        calls.append(event.kind)
        if event.kind == "a":
            raise ValueError("a fails")

    log.subscribe(flaky)
    log.append("a")
    log.append("b")
    assert calls == ["a", "error", "b"]
    assert [e.kind for e in log] == ["a", "error", "b"]


def test_subscriber_raising_on_every_event_does_not_recurse(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    log.subscribe(always_raises)
    with caplog.at_level(logging.ERROR, logger="gr_notebook"):
        log.append("tool_call")
        log.append("model_call")
    assert [e.kind for e in log] == ["tool_call", "error", "model_call", "error"]
    assert [e["event_seq"] for e in log.of_kind("error")] == [0, 2]
    assert any("failed while reporting an error" in r.getMessage() for r in caplog.records)


def test_two_always_failing_subscribers_each_report_once(log: EventLog) -> None:
    def also_raises(event: Event) -> None:
        raise Boom("again")

    log.subscribe(always_raises)
    log.subscribe(also_raises)
    log.append("x")
    errors = log.of_kind("error")
    assert [e["subscriber"] for e in errors] == ["always_raises", also_raises.__qualname__]
    assert all(e["event_seq"] == 0 for e in errors)
    assert len(log) == 3


def test_base_exception_from_subscriber_is_not_swallowed(log: EventLog) -> None:
    def interrupt(event: Event) -> None:
        raise KeyboardInterrupt

    log.subscribe(interrupt)
    with pytest.raises(KeyboardInterrupt):
        log.append("x")


def test_other_subscribers_see_events_in_seq_order_when_one_raises(log: EventLog) -> None:
    seen: list[int] = []
    log.subscribe(lambda e: None if e.kind == "error" else always_raises(e))
    log.subscribe(lambda e: seen.append(e.seq))
    log.append("tool_call")
    log.append("model_call")
    assert seen == sorted(seen)
    assert seen == [0, 1, 2, 3]


def _strings(value: Any) -> Iterator[str]:
    """Every string in an event's data, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def test_every_string_of_every_event_is_clipped(tmp_path: Path) -> None:
    """Decision 23, for every field: tool names, tool-use ids, argument keys, todo titles,
    rewind issues and job summaries included. A model that sends huge values cannot make an
    event big."""
    huge = "x" * 200_000
    model = gr.ScriptedModel(
        [
            ModelResponse((ToolUseBlock(huge, "list_files", {}),), "tool_use"),
            gr.tool_call(huge),
            gr.tool_call("list_files", **{huge: 1}),
            gr.tool_call("todo_write", todos=[huge, "y" * 100_000]),
            gr.tool_call("todo_rewind", issue=huge),
            gr.tool_call("job_complete", summary=huge, confidence=0.5, notes=huge),
        ]
    )
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "completed", run.error
    kinds = {e.kind for e in run.events}
    assert {"tool_call", "rewind", "job_complete"} <= kinds
    for event in run.events:
        longest = max((len(s) for s in _strings(dict(event.data))), default=0)
        assert longest <= MAX_EVENT_TEXT, f"{event.kind} keeps a string of {longest} characters"
        assert len(json.dumps(dict(event.data), default=str)) < 50_000, event.kind


def test_the_log_clips_what_any_emitter_appends(log: EventLog) -> None:
    event = log.append("custom", {"k" * 1000: ["v" * 1000, {"n": "w" * 1000}], "n": 3})
    assert all(len(s) <= MAX_EVENT_TEXT for s in _strings(dict(event.data)))
    assert event["n"] == 3
