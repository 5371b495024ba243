"""Seed 003's three self-regulation tools: assess_task, check_resources, summarize_progress.

They are built per agent, because ``assess_task``'s schema lists the task types of the
agent's own :class:`~gr_notebook.guardrails.budget_table.BudgetTable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gr_notebook.errors import ToolError
from gr_notebook.guardrails.budget_table import BudgetTable
from gr_notebook.guardrails.regulation import SelfRegulation
from gr_notebook.guidance import Action, Directive
from gr_notebook.tools.base import Tool, ToolContext, ToolOutput, object_schema
from gr_notebook.tools.effects import PruneConversation

__all__ = ["REGULATION_PROMPT", "regulation_tools"]

REGULATION_PROMPT = """\
RESOURCE MANAGEMENT (it serves your todo list and never replaces a task):
1. Call assess_task when a phase transition or a rewind asks for it, for the phase ahead, to \
understand your resource budget: the budget covers that phase, and the run's hard limits \
cover the whole job
2. Call check_resources every 3-5 tool calls to monitor your token/iteration usage, and follow \
its recommendation
3. Call summarize_progress when context grows (>10 tool calls) to compress conversation \
history, between two tasks
4. Stay within your allocated token budget and iteration limits

Be efficient: avoid redundant operations, reuse information you've already gathered, and \
compress context when needed."""

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}


def _state(ctx: ToolContext) -> SelfRegulation:
    if ctx.regulation is None:
        raise ToolError("self-regulation is off for this agent")
    return ctx.regulation


async def _assess_task(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    now = _state(ctx).check()
    if now.wrap_up:  # past the wrap-up mark there is no phase ahead to budget
        ctx.phases.order_wrap_up()
        text = (
            f"No budget for the phase ahead: the run's hard limits are "
            f"{now.limits_percentage_used:.0f}% used. {now.recommendation}"
        )
        return ToolOutput(
            text, directive=Directive(text, "assess_task", "wrap_up", from_limits=True)
        )
    assessment, approved = await _state(ctx).assess(
        params["task_type"],
        params["estimated_files"],
        params["estimated_iterations"],
        params["strategy"].strip(),
        turn=ctx.turn,
    )
    if not approved:
        text = (
            f"Not approved: a budget of {assessment.token_budget:,} tokens is above "
            f"{_state(ctx).confirm_above or 0:,}, and the person did not confirm it. Narrow the "
            "scope (fewer files, a cheaper task_type) and call assess_task again."
        )
        _state(ctx).answer = text
        return ToolOutput(text, True, Directive(text, "confirmation", "narrow_scope"))
    directive = Directive(
        assessment.guidance,
        "assess_task",
        "narrow_scope" if assessment.narrow else "continue",
        from_limits=assessment.narrow,
    )
    _state(ctx).answer = assessment.guidance
    payload = {
        "token_budget": assessment.token_budget,
        "max_iterations": assessment.max_iterations,
        "guidance": assessment.guidance,
    }
    return ToolOutput(json.dumps(payload), directive=directive)


def _check_resources(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    report = _state(ctx).check()
    if report.wrap_up:
        ctx.phases.order_wrap_up()
    payload = report.to_json()
    payload.pop("budget_source")
    action: Action = "wrap_up" if report.wrap_up else "continue"
    return ToolOutput(
        json.dumps(payload),
        directive=Directive(
            report.recommendation, "check_resources", action, from_limits=report.wrap_up
        ),
    )


def _summarize_progress(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    summary = _state(ctx).summarize(
        params["key_findings"], params["files_examined"], params["next_steps"], turn=ctx.turn
    )
    counts = (len(summary.key_findings), len(summary.files_examined), len(summary.next_steps))
    text = (
        "Summary stored ({} findings, {} files, {} next steps). After this turn the "
        "conversation is pruned to the summary and the last 5 messages.".format(*counts)
    )
    return ToolOutput(
        text,
        effects=(
            PruneConversation(
                summary.render(),
                summary.key_findings,
                summary.files_examined,
                summary.next_steps,
                summary.turn,
            ),
        ),
    )


def regulation_tools(table: BudgetTable) -> tuple[Tool, ...]:
    return (
        Tool(
            "assess_task",
            "Get a token budget and an iteration limit for the phase ahead.",
            object_schema(
                ["task_type", "estimated_files", "estimated_iterations", "strategy"],
                task_type={"type": "string", "enum": list(table.task_types)},
                estimated_files={
                    "type": "integer",
                    "minimum": 0,
                    "description": "Files you will likely examine.",
                },
                estimated_iterations={
                    "type": "integer",
                    "minimum": 1,
                    "description": "Tool-calling rounds you expect to need.",
                },
                strategy={"type": "string", "minLength": 1, "description": "1-2 sentences."},
            ),
            _assess_task,
            docs="Returns token_budget, max_iterations and guidance for the phase ahead "
            "(usage counts from the assessment; the budget lapses when another phase "
            "starts). The budget is at least the task type's base, grown with "
            "estimated_files up to twice, and at least estimated_iterations (about 2 a "
            "step, plus 4 for the transition); only the run's hard limits cap it. A budget "
            "above the confirmation threshold needs a person's approval.",
            effect="idempotent",
        ),
        Tool(
            "check_resources",
            "Report token and iteration usage against your budget (every 3-5 tool calls).",
            object_schema(),
            _check_resources,
            docs="Returns tokens_used, tokens_budget, tokens_remaining, percentage_used, "
            "iterations_used, iterations_max and iterations_remaining against the phase's "
            "budget (from its assessment, extended by half when the phase needs more while "
            "the hard limits have room; the run's limits when there is none), the job's "
            "totals with limits_percentage_used against the run's hard limits, and a "
            "recommendation: above 80% of a hard limit, summarize and wrap up; above 50%, "
            "caution.",
            effect="idempotent",
        ),
        Tool(
            "summarize_progress",
            "Compress the conversation: keep your summary and the last 5 messages.",
            object_schema(
                ["key_findings", "files_examined", "next_steps"],
                key_findings={**_STRINGS, "minItems": 1},
                files_examined=_STRINGS,
                next_steps=_STRINGS,
            ),
            _summarize_progress,
            docs="Use it after more than 10 tool calls or when resources run low. Your todo "
            "list, the system prompt and the tool descriptions are never pruned.",
            effect="idempotent",
        ),
    )
