"""What a tool call asks of the run beyond its result: its effects, as values.

A handler returns them in :attr:`ToolOutput.effects`; the tool-execution step applies the
ones that belong to the call (the job's result, a reset of the policies' memory) and hands
the rest to the loop as the turn's effects (a pruning, a compaction). The loop acts on
effects, never on tool names, so a tool a person writes takes part like a built-in one.
Effects of a call that failed (``is_error``) are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from gr_notebook.workflow.phases import JobResult

__all__ = [
    "CompactContext",
    "CompleteJob",
    "PruneConversation",
    "ResetPolicies",
    "Rewound",
    "ToolEffect",
]


@dataclass(frozen=True, slots=True)
class CompleteJob:
    """The job is done: the run ends (``completed``) after this turn's calls. The result is
    recorded as the call's, unless the handler recorded it already
    (``ctx.phases.complete_job``, as the built-in ``job_complete`` does)."""

    result: JobResult


@dataclass(frozen=True, slots=True)
class PruneConversation:
    """After this turn, keep ``summary`` and the last 5 messages of the conversation.

    The lists and the turn the summary was written at are recorded on the
    ``conversation_pruned`` event (``turn`` defaults to the turn of the pruning)."""

    summary: str
    key_findings: Sequence[str] = ()
    files_examined: Sequence[str] = ()
    next_steps: Sequence[str] = ()
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class CompactContext:
    """After this turn, compact the conversation into a recap (when compaction is on)."""


@dataclass(frozen=True, slots=True)
class ResetPolicies:
    """Forget what the tool policies remember, right after this call."""


@dataclass(frozen=True, slots=True)
class Rewound:
    """The todo list was rewound (the rewind workflow already ran, and queued its prompt):
    informational, listed in the turn's effects."""

    issue: str


ToolEffect: TypeAlias = CompleteJob | PruneConversation | CompactContext | ResetPolicies | Rewound
