"""Every kind of event has its class, its DataFrame columns and its timeline line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

import gr_notebook as gr
from gr_notebook.display.timeline import TIMELINE_KINDS, describe, described_kinds
from gr_notebook.events import (
    CORE_EVENTS,
    EVENT_KINDS,
    Event,
    GuidanceRecord,
    as_typed,
    event_class,
)
from gr_notebook.history.analysis import FRAMES
from tests.conftest import agent_at


def test_every_kind_is_one_frozen_slotted_class_named_by_its_kind() -> None:
    assert len({cls.kind for cls in CORE_EVENTS}) == len(CORE_EVENTS) == len(EVENT_KINDS)
    for cls in CORE_EVENTS:
        assert dataclasses.is_dataclass(cls) and issubclass(cls, Event)
        assert cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        assert "__slots__" in cls.__dict__, cls
        (literal,) = get_args(get_type_hints(cls)["kind"])  # ClassVar[Literal["..."]]
        assert get_args(literal) == (cls.kind,)
        assert event_class(cls.kind) is cls


def test_event_kinds_are_the_classes_kinds_and_include_every_emitted_kind() -> None:
    assert frozenset(cls.kind for cls in CORE_EVENTS) == EVENT_KINDS
    assert {"model_retry", "request_over_budget", "error", "guidance"} <= EVENT_KINDS


def test_a_run_emits_only_typed_events_of_known_kinds(tmp_path: Path) -> None:
    agent = agent_at(
        tmp_path,
        gr.SimulatedModel("reckless"),
        policies=[gr.ReadBeforeWritePolicy()],
        task_completion_checker=gr.PlanBasedChecker(),
        max_iterations=60,
    )
    run = agent.run_sync("Keep notes.md up to date, then write report.md.")
    kinds = {e.kind for e in run.events}
    assert kinds <= EVENT_KINDS
    assert {"policy_decision", "task_assessed", "tool_call", "model_call"} <= kinds
    assert all(type(e) is not Event for e in run.events)


def test_every_kind_has_a_timeline_line() -> None:
    assert described_kinds() >= EVENT_KINDS
    assert TIMELINE_KINDS <= EVENT_KINDS
    for kind in EVENT_KINDS:
        empty = as_typed(Event(0, kind, 1, 1, 0.0))  # every field empty: "", 0, None
        line = describe(empty)
        assert line and not line.startswith(f"{kind}:"), kind


def framed(name: str) -> list[type[Event]]:
    """The core's kinds that have a row in the frame ``name``."""
    return [cls for cls in CORE_EVENTS if issubclass(cls, FRAMES[name].kinds)]


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_every_column_reads_a_field_of_the_kinds_in_its_frame(name: str) -> None:
    assert framed(name)
    for cls in framed(name):
        fields = {f.name for f in dataclasses.fields(cls)}
        hints = get_type_hints(cls)
        sample = as_typed(Event(0, cls.kind, 1, 1, 0.0))
        assert type(sample) is cls
        for column in FRAMES[name].columns:
            head, *rest = (column.path or column.name).split(".")
            derived = isinstance(getattr(cls, head, None), property)  # words from the fields
            assert head in fields or derived, f"{name}.{column.name}: {cls.__name__} has no {head}"
            if rest:
                assert hints[head] is GuidanceRecord, f"{name}.{column.name}"
                assert rest == [
                    f.name for f in dataclasses.fields(GuidanceRecord) if f.name == rest[0]
                ]
            column.read(sample)  # and it resolves on an instance


def test_the_kinds_with_a_row_in_a_dataframe() -> None:
    kinds = {cls.kind for name in FRAMES for cls in framed(name)}
    assert kinds == {
        "model_call",
        "tool_call",
        "policy_decision",
        "feedback",
        "completion_check",
        "intervention",
        "intervention_skipped",
        "guidance",
        "thinking",
    }
