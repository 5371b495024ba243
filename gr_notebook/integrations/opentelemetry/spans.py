"""A run's events, one at a time, become its spans: one for the run, one per model call and
one per tool call, with every guardrail decision as a span event.

The same builder serves a live run (fed as each event is recorded) and a recorded one (fed
its events in order), so both give the same spans; every time comes from the events. A tool
call's span opens at its first decision (the policies) and ends after what followed it (the
intervention check, the feedback it triggered), when the next step of the run begins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gr_notebook.events import (
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    GuidanceEvent,
    InterventionCheckEvent,
    ModelCallEvent,
    ModelRetryEvent,
    PolicyDecisionEvent,
    PromptInjectedEvent,
    RequestOverBudgetEvent,
    RunFinishedEvent,
    RunResumedEvent,
    RunStartedEvent,
    ToolCallEvent,
    as_typed,
)
from gr_notebook.integrations.opentelemetry import names as n
from gr_notebook.integrations.opentelemetry.names import GR

__all__ = ["SpanDraft", "SpanEvent", "SpanSink", "TraceBuilder", "own_events", "provider_of"]

Value = str | bool | int | float | Sequence[str]

_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "claude-agent-sdk": "anthropic"}
OWN_MODELS = "gr_notebook"
"""The provider of gr's own offline models (simulated, scripted, function models)."""

_AFTER_CALL = (FeedbackEvent, InterventionCheckEvent, ErrorEvent)
"""What follows a tool call and belongs to it: it does not end the call's span."""
_ENDS_RUN = frozenset({"run", "model", "budget"})
"""The sources of an error that ends the run: it is the run's, not the last call's."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time: float
    attributes: Mapping[str, Value]


@dataclass(slots=True)
class SpanDraft:
    """A span as it is being built; ``error`` is its ``error.type`` when it failed."""

    name: str
    kind: Literal["internal", "client"]
    start: float
    end: float
    attributes: dict[str, Value]
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    done: bool = False
    """A tool call's span has seen its ``tool_call`` event."""

    def add(self, name: str, event: Event, attributes: Mapping[str, Value | None]) -> None:
        self.events.append(SpanEvent(name, event.time, _clean(attributes)))
        self.start = min(self.start, event.time)
        self.end = max(self.end, event.time)


class SpanSink(Protocol):
    """Where the spans go: the run's span opens first, its children follow, then it ends."""

    def start_run(self, draft: SpanDraft) -> None: ...
    def child(self, draft: SpanDraft) -> None: ...
    def end_run(self, draft: SpanDraft) -> None: ...


def provider_of(model: str) -> tuple[str, str | None]:
    """``gen_ai.provider.name`` and the vendor's own model name of a gr model name:
    ``anthropic:claude-x`` is Anthropic's ``claude-x``; gr's offline models are its own."""
    prefix, _, rest = model.partition(":")
    provider = _PROVIDERS.get(prefix)
    if provider is None:
        return OWN_MODELS, model or None
    return provider, rest or None


def own_events(events: Sequence[Event]) -> Sequence[Event]:
    """The events of the run itself: a run resumed or forked from a checkpoint carries its
    parent's events up to it, and its own begin at its ``run_resumed``."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.kind == "run_resumed" and event.data.get("parent_run_id"):
            return events[index:]
    return events


class TraceBuilder:
    """Turns one run's events into span drafts for ``sink``; ``config`` is the run's agent
    configuration when the events do not start with ``run_started`` (a resumed run)."""

    def __init__(
        self,
        sink: SpanSink,
        *,
        run_id: str | None,
        config: Mapping[str, Any] | None = None,
        capture_content: bool = False,
    ) -> None:
        self.sink, self.run_id, self.content = sink, run_id, capture_content
        self.config: Mapping[str, Any] = config or {}
        self.run: SpanDraft | None = None
        self.finished = False
        self.provider, self.model = provider_of(str(self.config.get("model", "")))
        self._tools: dict[str, SpanDraft] = {}
        """Tool calls' spans by tool use id, from their first decision until they end."""
        self._last: SpanDraft | None = None
        """The span of the latest tool call, still taking what follows it."""
        self._retries: list[tuple[str, Event, dict[str, Value | None]]] = []
        self._asking: dict[str, str] = {}
        """The policies that asked, by approval request id: the answer's guardrail."""
        self._failure: str | None = None
        """The class of the latest error that ends a run: a failed run's ``error.type``."""

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        if self.finished:
            return
        event = as_typed(event)
        if isinstance(event, RunStartedEvent):
            self._start(event, event.config, event.run_id, event.model)
            if self.content and self.run is not None and event.instructions:
                self.run.attributes[n.INPUT_MESSAGES] = _messages("user", event.instructions)
            return
        if isinstance(event, RunResumedEvent) and event.parent_run_id:
            self._start(event, self.config, self.run_id, str(self.config.get("model", "")))
            assert self.run is not None
            self.run.attributes.update(
                _clean({GR.PARENT_RUN: event.parent_run_id, GR.RELATION: event.relation})
            )
            return
        if self.run is None:
            return  # nothing of this run has begun (a log read from its middle)
        if not isinstance(event, _AFTER_CALL) or _ends_run(event):
            self._close_last()
        if isinstance(event, ModelCallEvent):
            self._model_call(event)
        elif isinstance(event, ModelRetryEvent):
            self._retries.append((GR.MODEL_RETRY, event, _retry(event)))
        elif isinstance(event, PolicyDecisionEvent):
            self._tool(event.tool_use_id, event.tool, event).add(
                GR.POLICY_DECISION, event, _policy(event)
            )
        elif isinstance(event, ApprovalRequestedEvent):
            self._tool(event.tool_use_id, event.tool, event).add(
                GR.APPROVAL_REQUESTED, event, self._requested(event)
            )
        elif isinstance(event, ApprovalAnsweredEvent):
            self._tool(event.tool_use_id, event.tool, event).add(
                GR.APPROVAL_ANSWERED, event, self._answered(event)
            )
        elif isinstance(event, ToolCallEvent):
            self._tool_call(event)
        elif isinstance(event, CompletionCheckEvent):
            self._stop_span(event).add(GR.COMPLETION_CHECK, event, _completion(event))
        elif isinstance(event, FeedbackEvent):
            (self._last or self.run).add(GR.FEEDBACK, event, self._feedback(event))
        elif isinstance(event, InterventionCheckEvent):
            (self._last or self.run).add(GR.INTERVENTION_CHECK, event, _intervention(event))
        elif isinstance(event, PromptInjectedEvent | GuidanceEvent):
            self.run.add(GR.ORDER, event, self._order(event))
        elif isinstance(event, RequestOverBudgetEvent):
            self.run.add(GR.REQUEST_OVER_BUDGET, event, _over_budget(event))
        elif isinstance(event, ErrorEvent):
            self._error(event)
        elif isinstance(event, RunFinishedEvent):
            self._finish(event)

    def close(self, at: float | None = None) -> None:
        """End what is still open: a run whose record stops before ``run_finished``."""
        if self.finished or self.run is None:
            return
        self._close_last()
        for draft in list(self._tools.values()):
            self._emit(draft)
        self._tools.clear()
        self.run.attributes[GR.STATUS] = "unfinished"
        self.run.end = max(self.run.end, at if at is not None else self.run.end)
        self.finished = True
        self.sink.end_run(self.run)

    # -- the run ---------------------------------------------------------------------------

    def _start(
        self, event: Event, config: Mapping[str, Any], run_id: str | None, model: str
    ) -> None:
        if self.run is not None:
            return
        self.config = config
        self.provider, self.model = provider_of(model)
        self.run_id = run_id or self.run_id
        name = config.get("name")
        self.run = SpanDraft(
            f"{n.INVOKE_AGENT} {name}" if name else n.INVOKE_AGENT,
            "internal",
            event.time,
            event.time,
            _clean(
                {
                    n.OPERATION: n.INVOKE_AGENT,
                    n.PROVIDER: self.provider,
                    n.AGENT_NAME: name if isinstance(name, str) else None,
                    n.REQUEST_MODEL: self.model,
                    n.CONVERSATION_ID: self.run_id,
                    GR.HARNESS: str(config.get("harness", "gr")),
                }
            ),
        )
        self.sink.start_run(self.run)

    def _finish(self, event: RunFinishedEvent) -> None:
        run = self.run
        assert run is not None
        for draft in list(self._tools.values()):  # decided on, never run: the run ended
            self._emit(draft)
        self._tools.clear()
        run.end = max(run.end, event.time)
        limit = event.limit
        run.attributes.update(
            _clean(
                {
                    GR.STATUS: event.status,
                    GR.RUN_REASON: event.reason,
                    GR.TURNS: event.turns,
                    n.INPUT_TOKENS: event.input_tokens,
                    n.OUTPUT_TOKENS: event.output_tokens,
                    GR.LIMIT_KIND: None if limit is None else limit.kind,
                    GR.LIMIT_USED: None if limit is None else float(limit.used),
                    GR.LIMIT: None if limit is None else float(limit.limit),
                }
            )
        )
        if event.status == "failed":
            run.error = self._failure or "_OTHER"
        self.finished = True
        self.sink.end_run(run)

    # -- model calls -----------------------------------------------------------------------

    def _model_call(self, event: ModelCallEvent) -> None:
        _, answered = provider_of(event.model)
        if self.provider != OWN_MODELS and ":" not in event.model:
            answered = event.model or None  # a vendor's own name (a Claude Agent SDK reply)
        model = self.model or answered
        draft = SpanDraft(
            f"{n.CHAT} {model}" if model else n.CHAT,
            "client",
            event.time - event.duration_s,
            event.time,
            _clean(
                {
                    n.OPERATION: n.CHAT,
                    n.PROVIDER: self.provider,
                    n.REQUEST_MODEL: self.model,
                    n.RESPONSE_MODEL: answered,
                    n.CONVERSATION_ID: self.run_id,
                    n.INPUT_TOKENS: event.input_tokens,
                    n.OUTPUT_TOKENS: event.output_tokens,
                    n.CACHE_READ_TOKENS: event.cache_read_tokens,
                    n.CACHE_WRITE_TOKENS: event.cache_write_tokens,
                    n.FINISH_REASONS: [event.stop_reason] if event.stop_reason else None,
                    GR.TURN: event.turn,
                    GR.COST_USD: event.cost_usd,
                }
            ),
        )
        if self.content and event.text:
            draft.attributes[n.OUTPUT_MESSAGES] = _messages(
                "assistant", event.text, finish=event.stop_reason
            )
        for name, retry, attributes in self._retries:
            draft.add(name, retry, attributes)
        self._retries.clear()
        self.sink.child(draft)

    # -- tool calls ------------------------------------------------------------------------

    def _tool(self, tool_use_id: str | None, tool: str, event: Event) -> SpanDraft:
        key = tool_use_id or f"{tool}@{event.seq}"
        draft = self._tools.get(key)
        if draft is None:
            draft = self._tools[key] = SpanDraft(
                f"{n.EXECUTE_TOOL} {tool}",
                "internal",
                event.time,
                event.time,
                _clean(
                    {
                        n.OPERATION: n.EXECUTE_TOOL,
                        n.TOOL_NAME: tool,
                        n.TOOL_CALL_ID: tool_use_id,
                        n.TOOL_TYPE: "function",
                        n.CONVERSATION_ID: self.run_id,
                    }
                ),
            )
        return draft

    def _tool_call(self, event: ToolCallEvent) -> None:
        key = event.tool_use_id or next(
            (k for k, d in self._tools.items() if d.attributes.get(n.TOOL_NAME) == event.tool),
            None,
        )
        draft = self._tools.pop(key, None) if key else None
        if draft is None:
            draft = self._tool(event.tool_use_id, event.tool, event)
            self._tools.pop(event.tool_use_id or f"{event.tool}@{event.seq}", None)
        draft.name = f"{n.EXECUTE_TOOL} {event.tool}"
        draft.attributes[n.TOOL_NAME] = event.tool
        draft.attributes[GR.TURN] = event.turn
        draft.start = min(draft.start, event.time - event.duration_s)
        draft.end = max(draft.end, event.time)
        draft.done = True
        if event.is_error:
            draft.error = draft.error or _refusal(event) or "tool_error"
        if self.content:
            draft.attributes[n.TOOL_ARGUMENTS] = json.dumps(dict(event.input), default=str)
            draft.attributes[n.TOOL_RESULT] = event.result
        self._last = draft

    def _close_last(self) -> None:
        if self._last is not None:
            self._emit(self._last)
            self._last = None

    def _emit(self, draft: SpanDraft) -> None:
        self.sink.child(draft)

    def _stop_span(self, event: CompletionCheckEvent) -> SpanDraft:
        """A check of a tool that ends the job goes on that call's span (it is judged before
        the tool runs); a check of the model's own stop goes on the run's."""
        assert self.run is not None
        if event.stop != "end_turn":
            waiting = [d for d in self._tools.values() if not d.done]
            if waiting:
                return waiting[-1]
        return self.run

    def _error(self, event: ErrorEvent) -> None:
        assert self.run is not None
        attributes: dict[str, Value | None] = {
            GR.ERROR_SOURCE: event.source,
            GR.ERROR_TYPE: event.error_type,
            GR.ERROR_MESSAGE: event.message,
            GR.GUARDRAIL: event.policy or event.provider,
            GR.TOOL: event.tool,
        }
        target = self._last or self.run
        if _ends_run(event):
            self._failure = event.error_type
        if event.source == "tool":
            waiting = [
                d
                for d in self._tools.values()
                if not d.done and d.attributes.get(n.TOOL_NAME) == event.tool
            ]
            if waiting:
                target = waiting[-1]
                target.error = event.error_type or "_OTHER"
        target.add(GR.ERROR, event, attributes)

    # -- what carries content ----------------------------------------------------------------

    def _requested(self, event: ApprovalRequestedEvent) -> dict[str, Value | None]:
        self._asking[event.request_id] = ", ".join(event.policies)
        attributes: dict[str, Value | None] = {
            GR.GUARDRAIL_KIND: "approval",
            GR.GUARDRAIL: self._asking[event.request_id],
            GR.REQUEST_ID: event.request_id,
            GR.ASKED: event.asked,
            GR.REASON: event.reason,
            GR.POLICIES: list(event.policies),
        }
        if self.content:
            attributes[GR.APPROVAL_INPUT] = json.dumps(dict(event.input), default=str)
        return attributes

    def _answered(self, event: ApprovalAnsweredEvent) -> dict[str, Value | None]:
        attributes: dict[str, Value | None] = {
            GR.GUARDRAIL_KIND: "approval",
            GR.GUARDRAIL: self._asking.get(event.request_id),
            GR.DECISION: event.decision,
            GR.REQUEST_ID: event.request_id,
            GR.BY: event.by,
            GR.WAITED_S: event.waited_s,
            GR.REASON: event.reason,
        }
        if self.content and event.input is not None:
            attributes[GR.APPROVAL_INPUT] = json.dumps(dict(event.input), default=str)
        if event.decision == "deny":
            draft = self._tools.get(event.tool_use_id or "")
            if draft is not None:
                draft.error = "denied"
        return attributes

    def _feedback(self, event: FeedbackEvent) -> dict[str, Value | None]:
        attributes: dict[str, Value | None] = {
            GR.GUARDRAIL_KIND: "feedback",
            GR.GUARDRAIL: event.provider,
            GR.DECISION: event.verdict,
            GR.SEVERITY: event.severity,
            GR.REASON: event.summary,
            GR.MODE: event.mode or "live",
        }
        if self.content:
            attributes[GR.FEEDBACK_TEXT] = event.text
        return attributes

    def _order(self, event: PromptInjectedEvent | GuidanceEvent) -> dict[str, Value | None]:
        order = event.directive
        attributes: dict[str, Value | None] = {
            GR.ORDER_SOURCE: order.source,
            GR.ORDER_ACTION: order.action,
            GR.FROM_LIMITS: order.from_limits,
        }
        if self.content:
            attributes[GR.ORDER_TEXT] = order.text
        return attributes


# -- the decisions' attributes ---------------------------------------------------------------


def _policy(event: PolicyDecisionEvent) -> dict[str, Value | None]:
    return {
        GR.GUARDRAIL_KIND: "policy",
        GR.GUARDRAIL: event.policy,
        GR.DECISION: event.verdict,
        GR.REASON: event.reason,
        GR.POLICIES: list(event.policies),
        GR.MODE: event.mode or "live",
    }


def _completion(event: CompletionCheckEvent) -> dict[str, Value | None]:
    return {
        GR.GUARDRAIL_KIND: "checker",
        GR.GUARDRAIL: event.checker,
        GR.DECISION: event.verdict,
        GR.REASON: event.feedback,
        GR.STOP: event.stop,
        GR.REFUSALS: event.refusals,
        GR.BYPASSED: event.bypassed,
        GR.GIVE_UP: event.give_up,
        GR.MODE: event.mode or "live",
    }


def _intervention(event: InterventionCheckEvent) -> dict[str, Value | None]:
    return {
        GR.GUARDRAIL_KIND: "intervention",
        GR.GUARDRAIL: "interventions",
        GR.DECISION: event.verdict,
        GR.REASON: event.why,
        GR.FIRED: event.fired,
        GR.TIER: event.tier,
        GR.ACTION: event.action,
        GR.SKIP_REASON: event.skip_reason,
        GR.STEP: event.step,
        GR.MODE: event.mode or "live",
    }


def _over_budget(event: RequestOverBudgetEvent) -> dict[str, Value | None]:
    limit = event.limit
    return {
        GR.NEEDED: event.needed,
        GR.REMAINING: event.remaining,
        GR.LIMIT_KIND: None if limit is None else limit.kind,
        GR.LIMIT: None if limit is None else float(limit.limit),
    }


def _retry(event: ModelRetryEvent) -> dict[str, Value | None]:
    return {
        GR.ATTEMPT: event.attempt,
        GR.ERROR_TYPE: event.error_type,
        GR.STATUS_CODE: event.status,
        GR.DELAY_S: event.delay_s,
    }


def _ends_run(event: Event) -> bool:
    return isinstance(event, ErrorEvent) and event.source in _ENDS_RUN


def _refusal(event: ToolCallEvent) -> str | None:
    """``denied`` for a call a policy or a person refused, ``stop_refused`` for an end of the
    job the completion checker refused; None for any other error."""
    source = event.directive.source if event.directive is not None else ""
    if source.startswith(("policy:", "approval:")):
        return "denied"
    if source == "stop_refused":
        return "stop_refused"
    return None


def _messages(role: str, text: str, *, finish: str | None = None) -> str:
    """One message in the conventions' JSON layout (``gen_ai.input.messages`` and
    ``gen_ai.output.messages``)."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


def _clean(attributes: Mapping[str, Value | None]) -> dict[str, Value]:
    """What OpenTelemetry takes: no None, lists as tuples of strings."""
    clean: dict[str, Value] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = tuple(str(v) for v in value)
        clean[key] = value
    return clean
