"""Every state change of a run is an :class:`Event`; the :class:`EventLog` is its history.

Each kind the core emits is one frozen class with a ``kind`` Literal as its discriminator
(:data:`CORE_EVENTS`; :data:`CoreEvent` is their union, for ``match``). Kinds a user or a
later layer adds are either their own subclasses of :class:`Event`, which register
themselves, or untyped events: ``log.append("my_kind", {...})``.
"""

from __future__ import annotations

from typing import Final, TypeAlias, get_args

from gr_notebook.events.base import Event, EventData, as_typed, decode, event_class, kinds
from gr_notebook.events.guardrails import (
    GUARDRAIL_KINDS,
    AllotmentExtendedEvent,
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompletionCheckEvent,
    ConfirmationEvent,
    FeedbackEvent,
    InterventionCheckEvent,
    InterventionEvent,
    InterventionSkippedEvent,
    PoliciesResetEvent,
    PolicyDecisionEvent,
    TaskAssessedEvent,
    is_shadow,
)
from gr_notebook.events.lifecycle import (
    CompactionEvent,
    ConversationPrunedEvent,
    ConversationReleasedEvent,
    ErrorEvent,
    ParentCallsEvent,
    RunFinishedEvent,
    RunPausedEvent,
    RunResumedEvent,
    RunStartedEvent,
    RunUnpausedEvent,
)
from gr_notebook.events.log import EventLog, Subscriber
from gr_notebook.events.turn import (
    GuidanceEvent,
    GuidanceRecord,
    ModelCallEvent,
    ModelRetryEvent,
    ProgressCheckEvent,
    PromptInjectedEvent,
    RequestOverBudgetEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolIntentEvent,
    ToolRecoveredEvent,
    directive_of,
    thinking_event,
)
from gr_notebook.events.workflow import (
    JobCompleteEvent,
    PhaseStartedEvent,
    PhaseTransitionEvent,
    PlanUpdatedEvent,
    RewindEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    WorkspaceSummaryEvent,
)

__all__ = [
    "CORE_EVENTS",
    "EVENT_KINDS",
    "GUARDRAIL_KINDS",
    "AllotmentExtendedEvent",
    "ApprovalAnsweredEvent",
    "ApprovalRequestedEvent",
    "CompactionEvent",
    "CompletionCheckEvent",
    "ConfirmationEvent",
    "ConversationPrunedEvent",
    "ConversationReleasedEvent",
    "CoreEvent",
    "ErrorEvent",
    "Event",
    "EventData",
    "EventLog",
    "FeedbackEvent",
    "GuidanceEvent",
    "GuidanceRecord",
    "InterventionCheckEvent",
    "InterventionEvent",
    "InterventionSkippedEvent",
    "JobCompleteEvent",
    "ModelCallEvent",
    "ModelRetryEvent",
    "ParentCallsEvent",
    "PhaseStartedEvent",
    "PhaseTransitionEvent",
    "PlanUpdatedEvent",
    "PoliciesResetEvent",
    "PolicyDecisionEvent",
    "ProgressCheckEvent",
    "PromptInjectedEvent",
    "RequestOverBudgetEvent",
    "RewindEvent",
    "RunFinishedEvent",
    "RunPausedEvent",
    "RunResumedEvent",
    "RunStartedEvent",
    "RunUnpausedEvent",
    "Subscriber",
    "TaskAssessedEvent",
    "ThinkingEvent",
    "TodoCompletedEvent",
    "TodosWrittenEvent",
    "ToolCallEvent",
    "ToolIntentEvent",
    "ToolRecoveredEvent",
    "WorkspaceSummaryEvent",
    "as_typed",
    "decode",
    "directive_of",
    "event_class",
    "is_shadow",
    "kinds",
    "thinking_event",
]

CoreEvent: TypeAlias = (
    RunStartedEvent
    | ModelCallEvent
    | ThinkingEvent
    | ModelRetryEvent
    | RequestOverBudgetEvent
    | ToolIntentEvent
    | ToolCallEvent
    | ToolRecoveredEvent
    | GuidanceEvent
    | PromptInjectedEvent
    | ProgressCheckEvent
    | TodosWrittenEvent
    | TodoCompletedEvent
    | PhaseStartedEvent
    | PhaseTransitionEvent
    | RewindEvent
    | WorkspaceSummaryEvent
    | PlanUpdatedEvent
    | JobCompleteEvent
    | RunPausedEvent
    | RunResumedEvent
    | ParentCallsEvent
    | RunUnpausedEvent
    | PolicyDecisionEvent
    | ApprovalRequestedEvent
    | ApprovalAnsweredEvent
    | PoliciesResetEvent
    | FeedbackEvent
    | CompletionCheckEvent
    | InterventionEvent
    | InterventionSkippedEvent
    | TaskAssessedEvent
    | AllotmentExtendedEvent
    | ConfirmationEvent
    | CompactionEvent
    | ConversationPrunedEvent
    | ConversationReleasedEvent
    | RunFinishedEvent
    | ErrorEvent
)
"""Every kind the core emits, as a union discriminated by ``kind``."""

CORE_EVENTS: Final[tuple[type[Event], ...]] = get_args(CoreEvent)
"""The core's kinds' classes, in the order of :data:`CoreEvent`."""

#: The kinds the core emits, one per class. Later layers add their own.
EVENT_KINDS: Final = frozenset(cls.kind for cls in CORE_EVENTS)
