"""Typed events: built by emitters, stamped by the log, read as fields or as data."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

import gr_notebook as gr
from gr_notebook.eventdata import MAX_EVENT_TEXT
from gr_notebook.events import (
    ErrorEvent,
    Event,
    EventLog,
    GuidanceEvent,
    GuidanceRecord,
    ModelRetryEvent,
    RewindEvent,
    RunStartedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
    as_typed,
    decode,
    event_class,
)
from gr_notebook.history.store import Store
from gr_notebook.models.call_context import CallContext, calling, report


@pytest.fixture
def log() -> EventLog:
    ticks: Iterator[float] = iter(float(t) for t in range(100, 10_000))
    return EventLog(lambda: next(ticks))


def tool_call(**changes: Any) -> ToolCallEvent:
    fields: dict[str, Any] = {
        "tool": "read_file",
        "tool_use_id": "toolu_1",
        "input": {"path": "notes.md"},
        "is_error": False,
        "result": "text",
        "duration_s": 0.5,
    }
    return ToolCallEvent(**(fields | changes))


def record(**changes: Any) -> GuidanceRecord:
    fields: dict[str, Any] = {
        "source": "todo_layer",
        "action": "work_on_task",
        "text": "Complete task 1",
        "reads": ("plan.md",),
        "avoid_reads": (),
        "from_limits": False,
        "phase_name": "Survey",
        "phase_kind": "phase",
        "tasks_left": 3,
        "phases_left": 2,
        "job_done": False,
        "tokens_pct": None,
        "iterations_pct": 10.0,
        "deadline_pct": None,
        "limits_pct": 10.0,
    }
    return GuidanceRecord(**(fields | changes))


# -- the log stamps what the emitter built --------------------------------------------------------


def test_the_log_stamps_the_envelope_on_the_event_it_was_given(log: EventLog) -> None:
    event = tool_call()
    assert event.seq == -1
    logged = log.append(event, turn=4, phase=2)
    assert logged is event
    assert (event.seq, event.turn, event.phase, event.time) == (0, 4, 2, 100.0)
    assert event.kind == "tool_call" and log[0] is event


def test_an_event_already_in_a_log_is_recorded_as_a_copy(log: EventLog) -> None:
    first = log.append(tool_call(), turn=1)
    other = EventLog(lambda: 7.0)
    second = other.append(first, turn=9)
    assert second is not first and second.seq == 0 and second.turn == 9
    assert (first.seq, first.turn) == (0, 1)
    assert second.tool == first.tool


def test_events_are_frozen(log: EventLog) -> None:
    event = log.append(tool_call())
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.tool = "write_file"  # type: ignore[misc]


def test_short_fields_are_kept_as_given(log: EventLog) -> None:
    config = {"name": "agent", "tools": ["read_file"]}
    event = log.append(
        RunStartedEvent(run_id="r", model="m", workspace="w", instructions="i", config=config)
    )
    assert event.config is config  # nothing to clip: nothing copied


def test_each_class_clips_its_free_text(log: EventLog) -> None:
    huge = "x" * 5_000
    event = log.append(
        tool_call(
            tool=huge,
            input={huge: [huge], "n": 1},
            result=huge,
            directive=record(text=huge, reads=(huge, "plan.md")),
        )
    )
    assert len(event.tool) == MAX_EVENT_TEXT and event.tool.endswith("…")
    assert len(event.result) == MAX_EVENT_TEXT
    assert event.directive is not None and len(event.directive.text) == MAX_EVENT_TEXT
    assert [len(r) for r in event.directive.reads] == [MAX_EVENT_TEXT, len("plan.md")]
    [(key, value)] = [(k, v) for k, v in event.input.items() if k != "n"]
    assert len(key) == MAX_EVENT_TEXT and len(value[0]) == MAX_EVENT_TEXT
    assert event.input["n"] == 1


def test_a_subscriber_that_fails_is_reported_as_a_typed_error(log: EventLog) -> None:
    def broken(event: Event) -> None:
        if event.kind == "rewind":
            raise ValueError("no")

    log.subscribe(broken)
    log.append(RewindEvent(issue="wrong", source="person", archive=None), turn=2)
    error = log[1]
    assert isinstance(error, ErrorEvent)
    assert (error.source, error.error_type, error.event_seq, error.turn) == (
        "subscriber",
        "ValueError",
        0,
        2,
    )
    assert dict(error.data) == {
        "source": "subscriber",
        "subscriber": broken.__qualname__,
        "error_type": "ValueError",
        "message": "no",
        "event_seq": 0,
    }


# -- data: the dict-shaped view ----------------------------------------------------------------


def test_data_is_a_read_only_view_of_the_fields_under_their_keys(log: EventLog) -> None:
    event = log.append(
        TodosWrittenEvent(
            source="model", phase_number=2, name="Write", todo_kind="phase", titles=["a", "b"]
        ),
        phase=2,
    )
    assert dict(event.data) == {
        "source": "model",
        "phase": 2,
        "name": "Write",
        "kind": "phase",
        "titles": ["a", "b"],
    }
    assert (
        list(event.data) == list(event.to_data()) == ["source", "phase", "name", "kind", "titles"]
    )
    assert event["kind"] == "phase" and event.kind == "todos_written"
    assert event.data.get("missing", "x") == "x"
    with pytest.raises(KeyError):
        event["todo_kind"]
    with pytest.raises(TypeError):
        event.data["name"] = "other"  # type: ignore[index]


def test_a_field_that_defaults_to_none_is_absent_while_none(log: EventLog) -> None:
    plain = log.append(tool_call())
    assert "directive" not in plain.data and plain.data.get("directive") is None
    assert len(plain.data) == 6
    ordered = log.append(tool_call(directive=record()))
    assert ordered["directive"]["source"] == "todo_layer"
    assert ordered["directive"]["reads"] == ("plan.md",)
    error = log.append(ErrorEvent(source="todos", message="bad list"))
    assert dict(error.data) == {"source": "todos", "message": "bad list"}


def test_repr_is_short(log: EventLog) -> None:
    event = log.append(tool_call(), turn=3, phase=1)
    assert repr(event) == (
        "<Event #0 tool_call turn=3 phase=1 {tool, tool_use_id, input, is_error, …}>"
    )


# -- decoding: a kind's name and data --------------------------------------------------------


def test_data_of_a_kinds_layout_decodes_to_its_class() -> None:
    data = tool_call(directive=record()).to_data()
    event = decode("tool_call", data, seq=3, turn=2, phase=1, time=9.0)
    assert isinstance(event, ToolCallEvent) and isinstance(event.directive, GuidanceRecord)
    assert (event.seq, event.turn, event.phase, event.time) == (3, 2, 1, 9.0)
    assert event.to_data() == data


@pytest.mark.parametrize(
    "data",
    [
        {"tool": "read_file"},  # a required field missing
        {**tool_call().to_data(), "new_field": 1},  # a key this version does not know
        {**tool_call().to_data(), "directive": {"source": "x"}},  # a record of another layout
        {**tool_call().to_data(), "directive": "an order"},
    ],
)
def test_data_of_another_layout_stays_untyped_and_whole(data: dict[str, Any]) -> None:
    event = decode("tool_call", data)
    assert type(event) is Event and event.kind == "tool_call"
    assert dict(event.data) == data


def test_an_unknown_kind_stays_untyped() -> None:
    assert event_class("my_kind") is None
    event = decode("my_kind", {"n": 1})
    assert type(event) is Event and event["n"] == 1
    assert as_typed(event) is event


def test_an_untyped_event_of_a_known_kind_reads_leniently() -> None:
    event = Event(5, "rewind", 2, 1, 3.0, {"issue": "try again", "extra": True})
    typed = as_typed(event)
    assert isinstance(typed, RewindEvent)
    assert (typed.issue, typed.source, typed.archive) == ("try again", "", None)
    assert (typed.seq, typed.turn, typed.phase, typed.time) == (5, 2, 1, 3.0)
    guidance = as_typed(Event(0, "guidance", 0, 0, 0.0, {}))
    assert isinstance(guidance, GuidanceEvent) and guidance.directive.source == ""


def test_appending_a_kinds_name_and_data_still_works(log: EventLog) -> None:
    typed = log.append("rewind", {"issue": "wrong", "source": "person", "archive": None}, turn=2)
    assert isinstance(typed, RewindEvent) and typed.issue == "wrong" and typed.turn == 2
    untyped = log.append("rewind", {"issue": "x" * 1000})
    assert type(untyped) is Event and len(untyped["issue"]) == MAX_EVENT_TEXT
    data = {"issue": "again", "source": "model", "archive": "archive/phase_01.json"}
    again = log.append(Event(7, "rewind", 0, 0, 0.0, data))
    assert isinstance(again, RewindEvent) and again.seq == 2 and again.to_data() == data


def test_event_keeps_its_old_constructor() -> None:
    event = Event(0, "custom", 1, 2, 3.0, {"n": 1})
    assert (event.seq, event.kind, event.turn, event.phase, event.time) == (0, "custom", 1, 2, 3.0)
    assert event["n"] == 1 and event.data == {"n": 1}
    assert event == Event(0, "custom", 1, 2, 3.0, {"n": 1})
    assert event != Event(0, "custom", 1, 2, 3.0, {"n": 2})
    assert dict(Event(0, "x", 0, 0, 0.0).data) == {}


def test_a_model_reports_through_the_call_context_either_way() -> None:
    seen: list[Event] = []
    retry = ModelRetryEvent(
        attempt=1,
        max_retries=3,
        operation="messages.create",
        error_type="InternalServerError",
        status=529,
        retry_after=None,
        delay_s=0.5,
        message="overloaded",
    )
    with calling(CallContext(seen.append)):
        report(retry)
        report("model_retry", retry.to_data())
        report("custom_note", {"n": 1})
    assert seen[0] is retry
    assert seen[1] == retry and isinstance(seen[1], ModelRetryEvent)
    assert type(seen[2]) is Event and seen[2]["n"] == 1


# -- a kind declared by a user --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class DeployEvent(Event):
    kind: ClassVar[Literal["test_deploy"]] = "test_deploy"
    target: str
    attempts: int


def test_a_users_kind_registers_itself_and_round_trips_through_the_store(
    tmp_path: Path, log: EventLog
) -> None:
    assert event_class("test_deploy") is DeployEvent
    event = log.append(DeployEvent(target="staging", attempts=2), turn=1)
    with Store(tmp_path / "s.sqlite") as store:
        store.record_run_started(
            "r", started_at=0.0, model="m", workspace="", instructions="", config={}
        )
        store.record_event("r", event)
        (read,) = store.events("r")
    assert read == event and isinstance(read, DeployEvent)


def test_a_feedback_blocks_event_data_names_its_provider_tool_and_config() -> None:
    block = gr.Feedback(provider_name="Static", summary="Remember the tests")
    data = block.event("read_file", 0).to_data()
    assert (data["provider"], data["tool"], data["config"]) == ("Static", "read_file", 0)
    assert "directive" not in data
