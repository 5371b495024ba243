"""The phase workflow: todo lists, phases, rewinds, the plan and the job.

A todo list's ``phase`` and ``kind`` keep their names in the data; as fields they are
``phase_number`` and ``todo_kind``, since ``phase`` and ``kind`` name the event's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from gr_notebook.events.base import Event
from gr_notebook.events.schema import key

__all__ = [
    "JobCompleteEvent",
    "PhaseStartedEvent",
    "PhaseTransitionEvent",
    "PlanUpdatedEvent",
    "RewindEvent",
    "TodoCompletedEvent",
    "TodosWrittenEvent",
    "WorkspaceSummaryEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TodosWrittenEvent(Event):
    kind: ClassVar[Literal["todos_written"]] = "todos_written"
    source: str
    phase_number: int = key("phase")
    name: str
    todo_kind: str = key("kind")
    titles: Sequence[str]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TodoCompletedEvent(Event):
    kind: ClassVar[Literal["todo_completed"]] = "todo_completed"
    index: int
    title: str
    remaining: int
    source: str


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PhaseStartedEvent(Event):
    """A todo list began: the bootstrap, a phase of the plan, or the job's completion."""

    kind: ClassVar[Literal["phase_started"]] = "phase_started"
    phase_number: int = key("phase")
    name: str
    todo_kind: str = key("kind")
    total: int
    tasks: int


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PhaseTransitionEvent(Event):
    """A todo list ended: ``outcome`` is complete, rewound, reset, replaced or superseded."""

    kind: ClassVar[Literal["phase_transition"]] = "phase_transition"
    from_phase: int
    name: str
    todo_kind: str = key("kind")
    outcome: str
    tasks: int
    done: int
    archive: str | None
    issue: str | None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RewindEvent(Event):
    kind: ClassVar[Literal["rewind"]] = "rewind"
    issue: str
    source: str
    archive: str | None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class WorkspaceSummaryEvent(Event):
    kind: ClassVar[Literal["workspace_summary"]] = "workspace_summary"
    file: str
    chars: int


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PlanUpdatedEvent(Event):
    kind: ClassVar[Literal["plan_updated"]] = "plan_updated"
    phases: int
    complete: int
    warnings: Sequence[str]
    source: str


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class JobCompleteEvent(Event):
    kind: ClassVar[Literal["job_complete"]] = "job_complete"
    summary: str
    deliverables: Sequence[str]
    confidence: float | None
    notes: str | None
    source: str
