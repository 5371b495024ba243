"""A run's life: start, pause, resume, end, failures, and what happens to its conversation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from gr_notebook.events.base import Event
from gr_notebook.events.schema import key
from gr_notebook.limits import SpentLimit

__all__ = [
    "CompactionEvent",
    "ConversationPrunedEvent",
    "ConversationReleasedEvent",
    "ErrorEvent",
    "ParentCallsEvent",
    "RunFinishedEvent",
    "RunPausedEvent",
    "RunResumedEvent",
    "RunStartedEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunStartedEvent(Event):
    kind: ClassVar[Literal["run_started"]] = "run_started"
    run_id: str
    model: str
    workspace: str
    instructions: str
    config: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunPausedEvent(Event):
    kind: ClassVar[Literal["run_paused"]] = "run_paused"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunUnpausedEvent(Event):
    """A paused run goes on (``run.unpause()``)."""

    kind: ClassVar[Literal["run_unpaused"]] = "run_unpaused"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunResumedEvent(Event):
    """A run starts from another run's checkpoint (``parent_run_id``): its resume after an
    interruption, or a fork under another agent."""

    kind: ClassVar[Literal["run_resumed"]] = "run_resumed"
    parent_run_id: str | None = None
    parent_turn: int | None = None
    """The turn whose checkpoint it starts from: that turn is played again."""
    relation: str | None = None
    """``resume`` or ``fork``."""
    kept_aside: Sequence[str] | None = None
    """Files the interrupted run wrote after its checkpoint, moved into ``aside``."""
    aside: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ParentCallsEvent(Event):
    """A fork's parent went on past the fork's turn and made ``once`` calls there (an email
    sent, a ticket opened): they happened in the world, whatever the fork does. Each is
    ``{"tool", "tool_use_id", "turn", "key", "done"}``; ``done`` is False for a call the
    parent began and never saw end. The fork's same call (same turn, place, tool and input)
    carries the same idempotency key, so a service that honours keys refuses it."""

    kind: ClassVar[Literal["parent_calls"]] = "parent_calls"
    parent_run_id: str
    calls: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunFinishedEvent(Event):
    kind: ClassVar[Literal["run_finished"]] = "run_finished"
    status: str
    reason: str | None
    turns: int
    input_tokens: int
    output_tokens: int
    tokens_used: int
    limit: SpentLimit | None = None
    """The limit that ended the run (``budget_exhausted``), as a value."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ErrorEvent(Event):
    """Something failed and was recorded instead of breaking the run. ``source`` says
    what (``tool``, ``model``, ``policy``, ``feedback``, ``completion_checker``,
    ``subscriber``, ``todos``, ``run``, ``budget`` (a call the cost limit cannot price), or
    ``hook``: a Claude Agent SDK hook's input that
    could not be read); the fields that name the culprit are present only for the sources
    that have one."""

    kind: ClassVar[Literal["error"]] = "error"
    source: str
    subscriber: str | None = None
    policy: str | None = None
    tool: str | None = None
    provider: str | None = None
    error_type: str | None = None
    message: str
    event_seq: int | None = None
    """For a failing subscriber: the event it failed on."""
    traceback: Sequence[str] | None = None
    """The last lines of the traceback, where an extension (a policy, a feedback provider,
    a checker) raised: the timeline keeps its one line, and a person reads this."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class CompactionEvent(Event):
    """After a phase transition, the conversation was folded into a recap."""

    kind: ClassVar[Literal["compaction"]] = "compaction"
    messages_removed: int
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ConversationPrunedEvent(Event):
    """After summarize_progress: the conversation was cut to the summary and the last
    messages."""

    kind: ClassVar[Literal["conversation_pruned"]] = "conversation_pruned"
    messages_removed: int
    tokens_before: int
    tokens_after: int
    key_findings: Sequence[str]
    files_examined: Sequence[str]
    next_steps: Sequence[str]
    summary_turn: int = key("turn")
    """The turn the summary was written."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ConversationReleasedEvent(Event):
    """A finished run's in-memory conversation was freed."""

    kind: ClassVar[Literal["conversation_released"]] = "conversation_released"
    messages: int
