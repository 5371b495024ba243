"""What the guardrails decided: policy decisions, a person's approvals, feedback, completion
checks, intervention checks, and self-regulation's assessments and confirmations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from gr_notebook.eventdata import clip_json
from gr_notebook.events.base import Event
from gr_notebook.events.schema import CLIP, key
from gr_notebook.events.turn import GuidanceRecord
from gr_notebook.wording import plural

__all__ = [
    "GUARDRAIL_KINDS",
    "AllotmentExtendedEvent",
    "ApprovalAnsweredEvent",
    "ApprovalRequestedEvent",
    "CompletionCheckEvent",
    "ConfirmationEvent",
    "FeedbackEvent",
    "InterventionCheckEvent",
    "InterventionEvent",
    "InterventionSkippedEvent",
    "PoliciesResetEvent",
    "PolicyDecisionEvent",
    "TaskAssessedEvent",
    "is_shadow",
]

GuardrailKind: TypeAlias = Literal["policy", "approval", "feedback", "checker", "intervention"]
GUARDRAIL_KINDS: tuple[GuardrailKind, ...] = (
    "policy",
    "approval",
    "feedback",
    "checker",
    "intervention",
)
"""What a guardrail decision is of, in every frame (``kind``) and trace (``gr.guardrail.kind``).
Each kind has its own verdicts, the ``verdict`` of its events: a policy ``allow``, ``deny``
or ``ask``; a person ``approve``, ``deny`` or ``edit``; feedback ``fire``; a checker
``accept``, ``refuse`` or ``bypass`` (a spent limit let the stop through unchecked); an
intervention check ``skip`` or the tier's action, ``replan``, ``rewind`` or ``stop``."""

Mode: TypeAlias = Literal["shadow"] | None
"""A decision's ``mode``: ``"shadow"`` when a shadow guardrail decided (recorded, and nothing
reached the run); None when the decision was live."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PolicyDecisionEvent(Event):
    """The policies that govern a tool answered: allowed, denied by ``policy``, or (with
    ``needs_approval``) held by ``policy`` for a person's approval."""

    kind: ClassVar[Literal["policy_decision"]] = "policy_decision"
    tool: str
    allowed: bool
    policy: str | None
    reason: str | None
    policies: Sequence[str]
    tool_use_id: str | None = None
    """The call decided on; None in events recorded before it was kept."""
    mode: Mode = None
    needs_approval: bool | None = None
    """True when no policy denied and one asked: the call waits for a person (see the
    approval events that follow); None otherwise."""
    traceback: Sequence[str] | None = None
    """When ``policy`` raised while checking (and so denied): the last lines of its
    traceback, for a person (``run.policy_df()``'s ``traceback``); the model reads only
    the one-line ``reason``."""

    @property
    def verdict(self) -> Literal["allow", "deny", "ask"]:
        if self.allowed:
            return "allow"
        return "ask" if self.needs_approval else "deny"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ApprovalRequestedEvent(Event):
    """A tool call waits for a person: who was asked (``desk``: the dashboard or code
    through ``run.approvals``; ``confirmer``: the agent's ``confirm=``; ``nobody``), and
    ``problem`` when the person's last edit was refused and they are asked again."""

    kind: ClassVar[Literal["approval_requested"]] = "approval_requested"
    request_id: str
    tool: str
    tool_use_id: str | None
    input: Mapping[str, Any] = field(metadata={CLIP: clip_json})
    reason: str
    policies: Sequence[str]
    asked: Literal["desk", "confirmer", "nobody"]
    timeout_s: float | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ApprovalAnsweredEvent(Event):
    """The answer to one request: ``approve``, ``deny`` (``reason`` is what the model reads)
    or ``edit`` (``input`` is the edited input; ``problem`` when the tool's schema refused
    it, and the person is asked again). ``by`` is who answered: ``dashboard`` (a click),
    ``code`` (``run.approvals``), ``confirmer`` (the agent's ``confirm=``), or for a denial
    nobody gave ``nobody``, ``timeout``, ``deadline`` or ``stop``. Stores written before
    said ``desk`` for the first two."""

    kind: ClassVar[Literal["approval_answered"]] = "approval_answered"
    request_id: str
    tool: str
    tool_use_id: str | None
    decision: Literal["approve", "deny", "edit"]
    by: str
    waited_s: float
    reason: str | None = None
    input: Mapping[str, Any] | None = field(default=None, metadata={CLIP: clip_json})
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PoliciesResetEvent(Event):
    kind: ClassVar[Literal["policies_reset"]] = "policies_reset"
    source: str
    policies: Sequence[str]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class FeedbackEvent(Event):
    """A feedback block delivered: its fields, its ``text`` as the model read it, the tool
    call that triggered it and the provider configuration's index (None for the system's
    own feedback)."""

    kind: ClassVar[Literal["feedback"]] = "feedback"
    provider: str
    summary: str
    severity: str
    observations: Sequence[Mapping[str, Any]]
    suggestions: Sequence[str]
    call_index: int
    timestamp: float | None
    prompt_name: str
    text: str
    tool: str
    config: int | None
    directive: GuidanceRecord | None = None
    """The block as an order; the run state adds it as the event is recorded."""
    mode: Mode = None

    @property
    def verdict(self) -> Literal["fire"]:
        """A block is recorded only when its provider fired (``skip`` is never an event)."""
        return "fire"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class CompletionCheckEvent(Event):
    """An attempt to stop, judged: ``complete``, or refused with ``feedback``, or let
    through unchecked because a limit is ``bypassed`` (then ``complete`` is None and there
    is no ``give_up``)."""

    kind: ClassVar[Literal["completion_check"]] = "completion_check"
    stop: str
    checker: str
    complete: bool | None
    bypassed: str | None
    feedback: str | None
    refusals: int
    give_up: bool | None = None
    mode: Mode = None

    @property
    def verdict(self) -> Literal["accept", "refuse", "bypass"]:
        if self.bypassed:
            return "bypass"
        return "refuse" if self.complete is False else "accept"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class InterventionCheckEvent(Event):
    """A check for a stuck agent and the tracker's figures it decided on: the fields of both
    ``intervention`` (it fired) and ``intervention_skipped`` (a safeguard held it off).
    ``step`` counts the run's tool calls so far, not its turns."""

    step: int
    fired: bool
    tier: int
    action: str | None
    skip_reason: str | None
    stuck_counter: int
    steps_since_reset: int | None
    steps_since_progress: int
    recent_edits: int
    recent_tools: Sequence[str]
    threshold: int | None = None
    """The setting the deciding safeguard compared against (the minimum tool calls, the
    grace period, the edits that count as busy, the checks that count as stuck); None in
    events recorded before it was kept."""
    mode: Mode = None

    @property
    def verdict(self) -> str:
        """The tier's action (``replan``, ``rewind``, ``stop``) when it fired, else ``skip``."""
        return (self.action or "replan") if self.fired else "skip"

    @property
    def why(self) -> str:
        """Why the check decided as it did, in a reader's words (``skip_reason`` is the
        code to filter on)."""
        limit = self.threshold
        if self.fired:
            return f"no progress in the last {plural(self.steps_since_progress, 'tool call')}"
        reason = self.skip_reason
        if reason == "min_steps":
            if limit is None:
                return f"too early ({plural(self.step, 'tool call')} so far)"
            return f"too early (fewer than {limit} tool calls so far)"
        if reason == "grace_period":
            since = self.steps_since_reset or 0
            calls = f"{since} of {limit} tool calls" if limit else plural(since, "tool call")
            return f"grace period after a rewind or a start-over ({calls} since)"
        if reason == "actively_implementing":
            edits = plural(self.recent_edits, "file edit")
            return f"the agent is busy editing ({edits} since the previous check)"
        if reason == "not_stuck":
            if not self.stuck_counter:
                return "the agent made progress since the previous check"
            counted = f"{plural(self.stuck_counter, 'check')} in a row without progress"
            take = f"; {limit} count as stuck" if limit is not None else ""
            return f"not stuck yet ({counted}{take})"
        return str(reason or "a safeguard held it off").replace("_", " ")


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class InterventionEvent(InterventionCheckEvent):
    kind: ClassVar[Literal["intervention"]] = "intervention"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class InterventionSkippedEvent(InterventionCheckEvent):
    kind: ClassVar[Literal["intervention_skipped"]] = "intervention_skipped"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TaskAssessedEvent(Event):
    """What assess_task allocated, and whether it stands (a large one needs a yes)."""

    kind: ClassVar[Literal["task_assessed"]] = "task_assessed"
    task_type: str
    estimated_files: int
    estimated_iterations: int
    strategy: str
    multiplier: float
    token_budget: int
    max_iterations: int
    guidance: str
    assessed_turn: int = key("turn")
    narrow: bool
    assessed_phase: int = key("phase")
    """The phase the allotment covers."""
    scope: str
    tokens_at: int
    iterations_at: int
    approved: bool


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class AllotmentExtendedEvent(Event):
    """A phase outgrew its assessed allotment while the hard limits had room, so the
    allotment grew; the model is told in a plain line of its own."""

    kind: ClassVar[Literal["allotment_extended"]] = "allotment_extended"
    scope: str
    assessed_phase: int = key("phase")
    token_budget: int
    max_iterations: int
    """The allotment now, counted from the assessment."""
    previous_token_budget: int
    previous_max_iterations: int
    tokens_used: int
    iterations_used: int
    """Used of the allotment when it grew."""
    limits_percentage_used: float


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ConfirmationEvent(Event):
    """A person (or the headless default) was asked to approve a large operation."""

    kind: ClassVar[Literal["confirmation"]] = "confirmation"
    operation: str
    estimated_tokens: int
    threshold: int
    description: str
    approved: bool
    by: str


def is_shadow(event: Event) -> bool:
    """A shadow guardrail's decision (``mode="shadow"``) or failure (an ``error`` whose
    source starts ``shadow:``): recorded, and nothing acted on it. Reads untyped events
    too, so whatever counts decisions or acts on them skips these alike."""
    if getattr(event, "mode", None) == "shadow":
        return True
    data = event.data if type(event) is Event else None
    if data is not None and data.get("mode") == "shadow":
        return True
    source = getattr(event, "source", None) if data is None else data.get("source")
    return event.kind == "error" and isinstance(source, str) and source.startswith("shadow:")
