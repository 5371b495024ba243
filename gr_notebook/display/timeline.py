"""One line per event for the dashboard's timeline: what it says, and how loudly.

Every kind of event has a describer: a small function of its typed fields, registered with
:func:`_line`. :data:`TIMELINE_KINDS` are the kinds the dashboard shows; the others are
described for whoever asks (a log, a test). Each describer takes O(1): the dashboard calls
them on every event of a live run.

A line is read by someone who knows the notebook, not the code: no internal codes (a skip
reason, a task type, a status are put in words), and counts name what they count (tool
calls, turns), so a line never contradicts the turn it sits on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias, TypeVar

from gr_notebook.eventdata import clip
from gr_notebook.events import (
    AllotmentExtendedEvent,
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompactionEvent,
    CompletionCheckEvent,
    ConfirmationEvent,
    ConversationPrunedEvent,
    ConversationReleasedEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    GuidanceEvent,
    InterventionEvent,
    InterventionSkippedEvent,
    JobCompleteEvent,
    ModelCallEvent,
    ModelRetryEvent,
    ParentCallsEvent,
    PhaseStartedEvent,
    PhaseTransitionEvent,
    PlanUpdatedEvent,
    PoliciesResetEvent,
    PolicyDecisionEvent,
    ProgressCheckEvent,
    PromptInjectedEvent,
    RequestOverBudgetEvent,
    RewindEvent,
    RunFinishedEvent,
    RunPausedEvent,
    RunResumedEvent,
    RunStartedEvent,
    RunUnpausedEvent,
    TaskAssessedEvent,
    ThinkingEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
    ToolIntentEvent,
    ToolRecoveredEvent,
    WorkspaceSummaryEvent,
    as_typed,
    kinds,
)
from gr_notebook.wording import plural

__all__ = [
    "TIMELINE_KINDS",
    "Tone",
    "describe",
    "describe_held_off",
    "described_kinds",
    "tone_of",
    "worth_a_line",
]

Tone: TypeAlias = Literal["plain", "muted", "notice", "alert"]
"""How loudly a timeline line speaks: a skipped check is muted, a tier-3 stop is an alert."""

MAX_TEXT = 160
F = TypeVar("F", bound=Callable[..., str])

_DESCRIBERS: dict[type[Event], Callable[[Any], str]] = {}


def _line(cls: type[Event]) -> Callable[[F], F]:
    """Register the describer of one kind: a function of an event of ``cls``."""

    def register(describer: F) -> F:
        _DESCRIBERS[cls] = describer
        return describer

    return register


#: The kinds whose line is their fields put into a template (``e`` is the event).
_TEMPLATES: dict[type[Event], str] = {
    RunPausedEvent: "Paused",
    RunUnpausedEvent: "Unpaused",
    PromptInjectedEvent: "Prompt: {e.text}",
    GuidanceEvent: "Order from {e.directive.source}: {e.directive.text}",
    ProgressCheckEvent: "Progress check: todo list unchanged for many turns; the model is "
    "asked to take stock",
    WorkspaceSummaryEvent: "Workspace summary written to {e.file}: {e.chars:,} characters",
    JobCompleteEvent: "Job complete: {e.summary}",
    FeedbackEvent: "Feedback from {e.provider} ({e.severity}): {e.summary}",
}


def _filled(template: str) -> Callable[[Any], str]:
    return lambda e: template.format(e=e)


_DESCRIBERS.update({cls: _filled(template) for cls, template in _TEMPLATES.items()})


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return clip(" ".join(str(text).split()), limit)


def _list_name(kind: str, number: object, name: str) -> str:
    if kind == "bootstrap":
        return "Bootstrap"
    if kind == "job_completion":
        return "Job completion"
    return f"Phase {number}" + (f" '{name}'" if name else "")


# -- the run -------------------------------------------------------------------------------------


@_line(RunStartedEvent)
def _run_started(e: RunStartedEvent) -> str:
    return f"Run started on {e.model or 'a model'}"


@_line(RunResumedEvent)
def _resumed(e: RunResumedEvent) -> str:
    if e.parent_run_id is None:  # an unpause, as stores recorded it before run_unpaused
        return "Unpaused"
    verb = "Forked from" if e.relation == "fork" else "Resumed after an interruption of"
    aside = f"; {plural(len(e.kept_aside), 'later file')} kept aside" if e.kept_aside else ""
    return f"{verb} run {e.parent_run_id} at turn {e.parent_turn}{aside}"


@_line(RunFinishedEvent)
def _run_finished(e: RunFinishedEvent) -> str:
    reason = f" ({e.reason})" if e.reason else ""
    status = _words(e.status or "finished")
    return f"Run {status}{reason} after {plural(e.turns, 'turn')}"


@_line(ErrorEvent)
def _error(e: ErrorEvent) -> str:
    where = e.tool or e.source or "run"
    if e.source.startswith("shadow:"):  # a shadow guardrail's own failure
        name = e.policy or e.provider
        where = f"a shadow {_words(e.source.removeprefix('shadow:'))}"
        where += f" ({name})" if name else ""
    kind = f"{e.error_type}: " if e.error_type else ""
    return f"Error in {where}: {kind}{e.message}"


@_line(CompactionEvent)
def _compaction(e: CompactionEvent) -> str:
    return (
        f"Compacted: {e.messages_removed} messages folded into a recap, "
        f"conversation {e.tokens_before:,} → {e.tokens_after:,} tokens"
    )


@_line(ConversationPrunedEvent)
def _pruned(e: ConversationPrunedEvent) -> str:
    """The files the model listed in its summary are those it read and need not read
    again; a summary that lists none says nothing about them."""
    read = len(e.files_examined)
    files = f"; the model's summary lists {plural(read, 'file')} it already read" if read else ""
    return (
        f"Pruned after summarize_progress: {plural(e.messages_removed, 'message')} "
        f"removed, conversation {e.tokens_before:,} → {e.tokens_after:,} tokens{files}"
    )


@_line(ConversationReleasedEvent)
def _released(e: ConversationReleasedEvent) -> str:
    return f"Conversation released: {plural(e.messages, 'message')} freed"


# -- a turn --------------------------------------------------------------------------------------


@_line(ModelCallEvent)
def _model_call(e: ModelCallEvent) -> str:
    return (
        f"Model call: {e.input_tokens:,} tokens in, {e.output_tokens:,} out, "
        f"{plural(e.tool_calls, 'tool call')}"
    )


@_line(ThinkingEvent)
def _thinking(e: ThinkingEvent) -> str:
    redacted = f", {e.redacted} redacted" if e.redacted else ""
    if not e.chars:
        return f"Thought: {plural(e.blocks, 'block')} with no text shown{redacted}"
    return f"Thought ({e.chars:,} characters{redacted}): {e.text}"


@_line(ModelRetryEvent)
def _model_retry(e: ModelRetryEvent) -> str:
    what = f"{e.status} {e.error_type}" if e.status else e.error_type
    wait = f"{e.delay_s:.2g} s" + (" (retry-after)" if e.retry_after else "")
    return f"Model retry {e.attempt}/{e.max_retries} after {what}, in {wait}"


@_line(RequestOverBudgetEvent)
def _over_budget(e: RequestOverBudgetEvent) -> str:
    if e.limit is not None and e.limit.kind == "cost":
        return f"Request not sent: {e.limit.reason}"
    return f"Request not sent: it needs {e.needed:,} tokens, {e.remaining:,} remain"


@_line(ToolCallEvent)
def _tool_call(e: ToolCallEvent) -> str:
    return f"{e.tool} {'failed' if e.is_error else 'ran'}: {e.result}"


@_line(ToolIntentEvent)
def _tool_intent(e: ToolIntentEvent) -> str:
    return f"{e.tool or 'A tool'} about to run ({e.effect}; key {e.key or 'none'})"


_RECOVERED = {
    "rerun": "run again after the interruption",
    "recorded": "had ended before the interruption: its recorded result stands",
    "happened": "took effect before the interruption (its probe says so): not run again",
    "unverified": "UNVERIFIED: outcome unknown after the interruption; not run again, and the "
    "agent was told to check",
}


@_line(ToolRecoveredEvent)
def _tool_recovered(e: ToolRecoveredEvent) -> str:
    what = _RECOVERED.get(e.verdict, "judged on resume")
    why = f" ({e.reason})" if e.reason and e.verdict != "recorded" else ""
    return f"{e.tool or 'A tool'} {what}{why}"


@_line(ParentCallsEvent)
def _parent_calls(e: ParentCallsEvent) -> str:
    calls = [c for c in e.calls if isinstance(c, Mapping)]
    names = ", ".join(sorted({str(c.get("tool", "")) for c in calls})) or "none"
    unknown = sum(1 for c in calls if not c.get("done"))
    open_ = f"; {unknown} of them never ended (outcome unknown)" if unknown else ""
    return (
        f"The parent run {e.parent_run_id or ''} made {plural(len(calls), 'once call')} after "
        f"this turn, which happened whatever this fork does: {names}{open_}"
    )


# -- the workflow --------------------------------------------------------------------------------


@_line(TodosWrittenEvent)
def _todos_written(e: TodosWrittenEvent) -> str:
    what = _list_name(e.todo_kind, e.phase_number, e.name)
    if e.source == "person" and e.titles:  # a person's %todo add appends one task
        return f"A person added task {len(e.titles)} '{e.titles[-1]}' to {what}"
    return f"Todo list of {what} written by the {e.source}: {plural(len(e.titles), 'task')}"


@_line(TodoCompletedEvent)
def _todo_completed(e: TodoCompletedEvent) -> str:
    who = " by a person" if e.source == "person" else ""
    return f"Task {e.index} '{e.title}' done{who}, {e.remaining} left"


@_line(PhaseStartedEvent)
def _phase_started(e: PhaseStartedEvent) -> str:
    return f"{_list_name(e.todo_kind, e.phase_number, e.name)} started"


@_line(PhaseTransitionEvent)
def _phase_transition(e: PhaseTransitionEvent) -> str:
    what = _list_name(e.todo_kind, e.from_phase, e.name)
    text = f"{what} {e.outcome or 'ended'}: {e.done}/{e.tasks} tasks"
    return text + (f" → {e.archive}" if e.archive else "")


@_line(RewindEvent)
def _rewind(e: RewindEvent) -> str:
    return f"Rewind by the {e.source or 'model'}: {e.issue}"


@_line(PlanUpdatedEvent)
def _plan(e: PlanUpdatedEvent) -> str:
    warnings = f", {plural(len(e.warnings), 'warning')}" if e.warnings else ""
    return f"Plan updated by the {e.source}: {e.complete}/{e.phases} phases complete{warnings}"


# -- the guardrails ------------------------------------------------------------------------------


@_line(PolicyDecisionEvent)
def _policy_decision(e: PolicyDecisionEvent) -> str:
    if e.allowed:
        return f"{e.tool or 'A tool call'} allowed by the policies {', '.join(e.policies)}"
    policy = f"the policy {e.policy}" if e.policy else "a policy"
    return f"{e.tool or 'A tool call'} denied by {policy}: {e.reason or ''}"


#: Who answered an approval (``by``), as the timeline says it after "approved".
_ANSWERED_BY = {
    "dashboard": "on the dashboard",
    "code": "in code (run.approvals)",
    "confirmer": "by confirm=",
    "desk": "on the dashboard or in code",  # stores written before the two were told apart
}
#: Why a denial nobody gave came about.
_UNANSWERED = {
    "nobody": "nobody to ask",
    "timeout": "no answer in time",
    "deadline": "the run's time limit",
    "stop": "the run was stopped",
}


@_line(ApprovalRequestedEvent)
def _approval_requested(e: ApprovalRequestedEvent) -> str:
    who = {"desk": "the dashboard or run.approvals", "confirmer": "confirm=", "nobody": "nobody"}
    again = f" again (the edit was refused: {e.problem})" if e.problem else ""
    return f"{e.tool} waits for a person{again}: {e.reason}; asked {who.get(e.asked, e.asked)}"


@_line(ApprovalAnsweredEvent)
def _approval_answered(e: ApprovalAnsweredEvent) -> str:
    waited = f" after {e.waited_s:.1f} s" if e.waited_s > 0.05 else ""
    who = _ANSWERED_BY.get(e.by, f"by {e.by}")
    if e.decision == "approve":
        return f"{e.tool} approved {who}{waited}"
    if e.decision == "edit":
        refused = f", refused by its schema: {e.problem}" if e.problem else ""
        return f"{e.tool} edited {who}{waited}{refused}"
    why = f": {e.reason}" if e.reason else ""
    if e.by in _UNANSWERED:
        return f"{e.tool} not approved ({_UNANSWERED[e.by]}){waited}{why}"
    return f"{e.tool} denied {who}{waited}{why}"


@_line(PoliciesResetEvent)
def _policies_reset(e: PoliciesResetEvent) -> str:
    return f"Policy memory reset by the {e.source or 'model'}"


@_line(CompletionCheckEvent)
def _completion_check(e: CompletionCheckEvent) -> str:
    stop = "calling job_complete" if e.stop == "job_complete" else "a final reply"
    if e.bypassed:
        return f"Stop by {stop} allowed without the completion check: {e.bypassed}"
    if e.complete:
        return f"Stop by {stop} allowed: the job is complete"
    feedback = str(e.feedback or "").replace("<blocker>", "").replace("</blocker>", "")
    ending = "; the run ends incomplete" if e.give_up else ""
    return f"Stop by {stop} refused ({e.refusals} in a row{ending}): {_sentences(feedback)}"


def _sentences(text: str) -> str:
    """A checker's lines on one timeline line: each ends as a sentence, so the break between
    "… missing: RELEASE.md" and "Create it before you stop." still reads."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(line if line[-1] in ".!?:;" else f"{line}." for line in lines)


#: What each tier of intervention does, in the reader's words.
_DOING = {
    "replan": "the agent is told to rethink its approach",
    "rewind": "the todo list is rewound",
    "second_strategy_check": "a second strategy check: the agent is told to start over another way",
    "stop": "the run is stopped",
}


@_line(InterventionEvent)
def _intervention(e: InterventionEvent) -> str:
    doing = _DOING.get(str(e.action), _words(str(e.action)))
    return (
        f"Intervention {e.tier} of 3, after {plural(e.step, 'tool call')} with no progress "
        f"in the last {e.steps_since_progress:,}: {doing}"
    )


@_line(InterventionSkippedEvent)
def describe_held_off(
    e: InterventionSkippedEvent, *, first_step: object = None, count: int = 1
) -> str:
    """A check for a stuck agent that a safeguard held off; ``count`` such checks in a row,
    for one reason and starting ``first_step`` tool calls in, share one line. Checks count
    tool calls, which the turn column does not: the line says so rather than "step"."""
    if count > 1:
        span = (
            f", from {first_step:,} to {e.step:,} tool calls" if isinstance(first_step, int) else ""
        )
        return f"No intervention at {count:,} checks{span}: {e.why}"
    return f"No intervention after {plural(e.step, 'tool call')}: {e.why}"


@_line(TaskAssessedEvent)
def _assessed(e: TaskAssessedEvent) -> str:
    """The task type is the row of the budget table the model picked for the work ahead:
    the line says so, as the reader may never have seen the table."""
    scope = e.scope or "the work ahead"
    kind = _words(e.task_type) if e.task_type else "unknown"
    return (
        f"Model assessed {scope} as '{kind}' work (a task type of the budget table): "
        f"{e.token_budget:,} tokens and {plural(e.max_iterations, 'turn')} allotted"
    )


@_line(AllotmentExtendedEvent)
def _extended(e: AllotmentExtendedEvent) -> str:
    return (
        f"Allotment for {e.scope or 'the phase'} extended from "
        f"{plural(e.previous_max_iterations, 'turn')} to {e.max_iterations:,} and from "
        f"{e.previous_token_budget:,} to {e.token_budget:,} tokens, as the phase needed more "
        f"(the run's hard limits are {e.limits_percentage_used:.0f}% used)"
    )


@_line(ConfirmationEvent)
def _confirmation(e: ConfirmationEvent) -> str:
    verdict = "approved" if e.approved else "denied"
    what = _words(e.operation) if e.operation else "an operation"
    return (
        f"Request for {e.estimated_tokens:,} tokens by {what} {verdict} "
        f"(a person confirms anything over {e.threshold:,}): {e.by or 'not confirmed'}"
    )


def _words(code: str) -> str:
    """A code (``budget_exhausted``, ``multi_file_refactor``) as words."""
    return code.replace("_", " ")


#: Kinds with a line that the dashboard's timeline leaves out: each model and tool call and
#: every order would drown the rest, feedback and the plan have panels of their own, and a
#: summary written or a conversation freed is housekeeping.
_OFF_TIMELINE = frozenset(
    {
        "model_call",
        "thinking",
        "tool_call",
        "tool_intent",
        "guidance",
        "prompt_injected",
        "feedback",
        "plan_updated",
        "workspace_summary",
        "conversation_released",
    }
)
#: Kinds that reach the timeline only sometimes: a denial, not every allowed call; a refused
#: or bypassed stop, not one that was simply allowed; an assessment that stands (a denied one
#: already has its confirmation line); a person's edit of the todo list, not the model's own
#: (its phases have lines of their own).
_NOTEWORTHY: dict[type[Event], Callable[[Any], bool]] = {
    TodosWrittenEvent: lambda e: e.source == "person",
    TodoCompletedEvent: lambda e: e.source == "person",
    PolicyDecisionEvent: lambda e: e.allowed is False and not e.needs_approval,
    CompletionCheckEvent: lambda e: e.complete is not True,
    ConfirmationEvent: lambda e: e.approved is not True,
    TaskAssessedEvent: lambda e: e.approved is True,
}

#: Kinds whose lines stand out (or step back) from the rest of the timeline.
_TONES: dict[type[Event], Callable[[Any], Tone]] = {
    InterventionEvent: lambda e: "alert" if e.action == "stop" else "notice",
    InterventionSkippedEvent: lambda e: "muted",
    ConfirmationEvent: lambda e: "notice",
    ApprovalRequestedEvent: lambda e: "notice",
    ModelRetryEvent: lambda e: "notice",
    RequestOverBudgetEvent: lambda e: "alert",
    ToolRecoveredEvent: lambda e: "alert" if e.verdict == "unverified" else "notice",
    ParentCallsEvent: lambda e: "notice",
}


def described_kinds() -> frozenset[str]:
    """The kinds that have a line of their own."""
    return frozenset(kind for kind, cls in kinds().items() if cls in _DESCRIBERS)


#: The kinds the dashboard's timeline shows: every other kind with a line. Later layers add
#: theirs to a tracker's ``kinds``.
TIMELINE_KINDS = described_kinds() - _OFF_TIMELINE


def describe(event: Event) -> str:
    """One line for the timeline; kinds without a class fall back to the kind and its data."""
    event = as_typed(event)
    describer = _DESCRIBERS.get(type(event))
    if describer is not None:
        return _clip(describer(event))
    return _clip(f"{event.kind}: {dict(event.data)}")


def worth_a_line(event: Event) -> bool:
    """Whether an event of a timeline kind earns a line (a denial does, an allowed call not)."""
    event = as_typed(event)
    check = _NOTEWORTHY.get(type(event))
    return check is None or check(event)


def tone_of(event: Event) -> Tone:
    event = as_typed(event)
    tone = _TONES.get(type(event))
    return "plain" if tone is None else tone(event)
