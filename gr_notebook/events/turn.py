"""What one turn records: the model call, its tool calls, and the orders the model was given.

An order's record (:class:`GuidanceRecord`) rides on the event that delivered it: a
``tool_call`` (a denial's result), a ``prompt_injected``, a ``feedback``; the todo layer and
the kickoff, which no other event delivers, get a ``guidance`` event of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from gr_notebook.eventdata import clip_json
from gr_notebook.events.base import Event, as_typed
from gr_notebook.events.schema import CLIP, schema_of
from gr_notebook.limits import SpentLimit
from gr_notebook.messages import ContentBlock, RedactedThinkingBlock, ThinkingBlock

__all__ = [
    "GuidanceEvent",
    "GuidanceRecord",
    "ModelCallEvent",
    "ModelRetryEvent",
    "ProgressCheckEvent",
    "PromptInjectedEvent",
    "RequestOverBudgetEvent",
    "ThinkingEvent",
    "ToolCallEvent",
    "ToolIntentEvent",
    "ToolRecoveredEvent",
    "directive_of",
    "thinking_event",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GuidanceRecord:
    """An order to the model and the state of the job when it was given (see
    :mod:`gr_notebook.guidance`); :mod:`gr_notebook.review.lint` reads these back."""

    source: str
    action: str | None
    text: str
    reads: Sequence[str]
    avoid_reads: Sequence[str]
    from_limits: bool
    phase_name: str
    phase_kind: str
    tasks_left: int
    phases_left: int | None
    job_done: bool
    tokens_pct: float | None
    iterations_pct: float | None
    deadline_pct: float | None
    limits_pct: float | None
    cost_pct: float | None = None
    """Percent of the cost limit spent; None without one (and in records made before it)."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ModelCallEvent(Event):
    """One model call: its tokens by context layer, and the budget it was measured against
    (the assessed allotment once there is one)."""

    kind: ClassVar[Literal["model_call"]] = "model_call"
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    context_tokens: int
    layer1_tokens: int
    layer2_tokens: int
    layer3_tokens: int
    layer4_tokens: int
    layer5_tokens: int
    messages: int
    stop_reason: str
    tool_calls: int
    text: str
    duration_s: float
    model: str
    cost_usd: float | None
    tokens_used: int
    iterations_used: int
    tokens_budget: int | None
    iterations_max: int
    budget_tokens_used: int
    budget_iterations_used: int
    budget_scope: str


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ThinkingEvent(Event):
    """The model's thinking in one reply, after its ``model_call``: the text clipped like
    any event's (the blocks stay whole in the conversation), redacted blocks only counted."""

    kind: ClassVar[Literal["thinking"]] = "thinking"
    text: str
    blocks: int
    redacted: int
    chars: int
    """The whole text's length, before clipping."""


def thinking_event(content: Sequence[ContentBlock]) -> ThinkingEvent | None:
    """The event of a reply's thinking; None when it has none."""
    thoughts = [b.thinking for b in content if isinstance(b, ThinkingBlock)]
    redacted = sum(isinstance(b, RedactedThinkingBlock) for b in content)
    if not thoughts and not redacted:
        return None
    text = "\n\n".join(t for t in thoughts if t)
    return ThinkingEvent(text=text, blocks=len(thoughts), redacted=redacted, chars=len(text))


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ModelRetryEvent(Event):
    """A model adapter retried a failed request (reported through the call context)."""

    kind: ClassVar[Literal["model_retry"]] = "model_retry"
    attempt: int
    max_retries: int
    operation: str
    error_type: str
    status: int | None
    retry_after: float | None
    delay_s: float
    message: str


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RequestOverBudgetEvent(Event):
    """A request, counted before sending, would have gone over the token limit, or could
    have cost more than the cost limit has left (``limit.kind == "cost"``; then
    ``remaining`` is 0 and ``limit`` holds the dollars)."""

    kind: ClassVar[Literal["request_over_budget"]] = "request_over_budget"
    needed: int
    remaining: int
    limit: SpentLimit | None = None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ToolCallEvent(Event):
    """One tool call and its result; ``directive`` when the result is an order (a denial,
    a refused stop)."""

    kind: ClassVar[Literal["tool_call"]] = "tool_call"
    tool: str
    tool_use_id: str
    input: Mapping[str, Any] = dataclasses.field(metadata={CLIP: clip_json})
    is_error: bool
    result: str
    duration_s: float
    directive: GuidanceRecord | None = None
    result_digest: str | None = None
    """The blob that holds the whole result of a ``once`` call whose ``result`` is clipped:
    what a resume gives the model instead of running the call again."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ToolIntentEvent(Event):
    """A tool call about to run, recorded before its handler starts: with the
    ``tool_call`` that completes it, what a resume reads to know whether the call ran
    (:mod:`gr_notebook.engine.side_effects`)."""

    kind: ClassVar[Literal["tool_intent"]] = "tool_intent"
    tool: str
    tool_use_id: str
    input: Mapping[str, Any] = dataclasses.field(metadata={CLIP: clip_json})
    input_hash: str
    """The hash of the whole input that runs (canonical JSON)."""
    key: str
    """The call's idempotency key (``ToolContext.key``)."""
    effect: Literal["read", "idempotent", "once"]
    index: int
    """The call's place among the model's calls of its turn."""
    approved_under: str | None = None
    """When a person approved the call: the fingerprint of the policies that governed it
    then; a resume trusts that approval only under the same policies."""
    edited: bool = False
    """The input that runs is a person's edit, kept whole as the blob ``input_hash``."""
    reply: str | None = None
    """The blob holding the model's reply that made the call (gr's loop with a store)."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ToolRecoveredEvent(Event):
    """What a resume did about a call the killed run had made in the turn it resumes:
    ``rerun`` (run again), ``recorded`` (it had ended: its recorded result, not run again),
    ``happened`` (the tool's probe found its effect: not run again) or ``unverified`` (the
    outcome is unknown: not run again, and the model was told so). ``by`` is what decided:
    ``effect`` (its class), ``record``, ``probe`` or ``person``."""

    kind: ClassVar[Literal["tool_recovered"]] = "tool_recovered"
    tool: str
    tool_use_id: str
    key: str
    effect: Literal["read", "idempotent", "once"]
    verdict: Literal["rerun", "recorded", "happened", "unverified"]
    by: Literal["effect", "record", "probe", "person"]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class GuidanceEvent(Event):
    """An order no other event delivers: the todo layer's INSTRUCTION line, the kickoff."""

    kind: ClassVar[Literal["guidance"]] = "guidance"
    directive: GuidanceRecord


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PromptInjectedEvent(Event):
    """A workflow prompt, a refusal or a check, sent to the model as a user message."""

    kind: ClassVar[Literal["prompt_injected"]] = "prompt_injected"
    text: str
    marker: str
    directive: GuidanceRecord


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ProgressCheckEvent(Event):
    """Seed 000's progress check: the todo list has not changed for too long."""

    kind: ClassVar[Literal["progress_check"]] = "progress_check"
    prompt: str


def directive_of(event: Event) -> GuidanceRecord | None:
    """The order an event delivered, if any; read leniently from an untyped event that
    carries one under ``directive``. A shadow guardrail's feedback delivered nothing: its
    order (kept on the event, for the lint) is not one."""
    event = as_typed(event)
    if type(event) is Event:
        if event.data.get("mode") == "shadow":
            return None
        raw = event.data.get("directive")
        if not isinstance(raw, Mapping):
            return None
        return GuidanceRecord(**schema_of(GuidanceRecord).lenient(raw))
    directive = getattr(event, "directive", None)
    if getattr(event, "mode", None) == "shadow":
        return None
    return directive if isinstance(directive, GuidanceRecord) else None
