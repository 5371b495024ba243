"""The names a trace carries: the GenAI semantic conventions' as the installed
``opentelemetry-semantic-conventions`` spells them, and gr's own under the ``gr.`` prefix
where the conventions have none (guardrail decisions, a run's status)."""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

__all__ = [
    "AGENT_NAME",
    "CACHE_READ_TOKENS",
    "CACHE_WRITE_TOKENS",
    "CHAT",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "EXECUTE_TOOL",
    "FINISH_REASONS",
    "GR",
    "INPUT_MESSAGES",
    "INPUT_TOKENS",
    "INVOKE_AGENT",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "PROVIDER",
    "REQUEST_MODEL",
    "RESPONSE_MODEL",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TOOL_TYPE",
]

OPERATION: Final = GEN_AI_OPERATION_NAME
PROVIDER: Final = GEN_AI_PROVIDER_NAME
REQUEST_MODEL: Final = GEN_AI_REQUEST_MODEL
RESPONSE_MODEL: Final = GEN_AI_RESPONSE_MODEL
INPUT_TOKENS: Final = GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS: Final = GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_READ_TOKENS: Final = GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
CACHE_WRITE_TOKENS: Final = GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
FINISH_REASONS: Final = GEN_AI_RESPONSE_FINISH_REASONS
TOOL_NAME: Final = GEN_AI_TOOL_NAME
TOOL_CALL_ID: Final = GEN_AI_TOOL_CALL_ID
TOOL_TYPE: Final = GEN_AI_TOOL_TYPE
TOOL_ARGUMENTS: Final = GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_RESULT: Final = GEN_AI_TOOL_CALL_RESULT
AGENT_NAME: Final = GEN_AI_AGENT_NAME
CONVERSATION_ID: Final = GEN_AI_CONVERSATION_ID
INPUT_MESSAGES: Final = GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES: Final = GEN_AI_OUTPUT_MESSAGES

# The operations (the values of gen_ai.operation.name the conventions list).
INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"


class GR:
    """gr's own names, where the conventions have none: span events and attributes."""

    # span events
    POLICY_DECISION: Final = "gr.policy_decision"
    APPROVAL_REQUESTED: Final = "gr.approval_requested"
    APPROVAL_ANSWERED: Final = "gr.approval_answered"
    FEEDBACK: Final = "gr.feedback"
    COMPLETION_CHECK: Final = "gr.completion_check"
    INTERVENTION_CHECK: Final = "gr.intervention_check"
    ORDER: Final = "gr.order"
    REQUEST_OVER_BUDGET: Final = "gr.request_over_budget"
    MODEL_RETRY: Final = "gr.model_retry"
    ERROR: Final = "gr.error"

    # attributes every decision may carry: its kind, its guardrail's name and its verdict,
    # in the words and under the names of the DataFrames' kind, guardrail and decision
    GUARDRAIL_KIND: Final = "gr.guardrail.kind"
    GUARDRAIL: Final = "gr.guardrail.name"
    DECISION: Final = "gr.decision"
    REASON: Final = "gr.reason"
    MODE: Final = "gr.mode"
    POLICIES: Final = "gr.policies"
    TOOL: Final = "gr.tool.name"
    BY: Final = "gr.approval.by"
    ASKED: Final = "gr.approval.asked"
    REQUEST_ID: Final = "gr.approval.request_id"
    WAITED_S: Final = "gr.approval.waited_s"
    APPROVAL_INPUT: Final = "gr.approval.input"
    SEVERITY: Final = "gr.feedback.severity"
    FEEDBACK_TEXT: Final = "gr.feedback.text"
    STOP: Final = "gr.completion.stop"
    REFUSALS: Final = "gr.completion.refusals"
    BYPASSED: Final = "gr.completion.bypassed"
    GIVE_UP: Final = "gr.completion.give_up"
    FIRED: Final = "gr.intervention.fired"
    TIER: Final = "gr.intervention.tier"
    ACTION: Final = "gr.intervention.action"
    SKIP_REASON: Final = "gr.intervention.skip_reason"
    STEP: Final = "gr.intervention.step"
    ORDER_SOURCE: Final = "gr.order.source"
    ORDER_ACTION: Final = "gr.order.action"
    FROM_LIMITS: Final = "gr.order.from_limits"
    ORDER_TEXT: Final = "gr.order.text"
    NEEDED: Final = "gr.budget.needed_tokens"
    REMAINING: Final = "gr.budget.remaining_tokens"
    LIMIT_KIND: Final = "gr.limit.kind"
    LIMIT_USED: Final = "gr.limit.used"
    LIMIT: Final = "gr.limit.limit"
    ATTEMPT: Final = "gr.retry.attempt"
    STATUS_CODE: Final = "gr.retry.status"
    DELAY_S: Final = "gr.retry.delay_s"
    ERROR_SOURCE: Final = "gr.error.source"
    ERROR_TYPE: Final = "gr.error.type"
    ERROR_MESSAGE: Final = "gr.error.message"

    # attributes of the spans
    HARNESS: Final = "gr.harness"
    TURN: Final = "gr.turn"
    COST_USD: Final = "gr.cost_usd"
    STATUS: Final = "gr.run.status"
    RUN_REASON: Final = "gr.run.reason"
    TURNS: Final = "gr.run.turns"
    PARENT_RUN: Final = "gr.run.parent_id"
    RELATION: Final = "gr.run.relation"
