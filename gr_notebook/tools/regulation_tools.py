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
from gr_notebook.tools.base import Tool, ToolContext, ToolOutput, object_schema

__all__ = ["REGULATION_PROMPT", "regulation_tools"]

REGULATION_PROMPT = """\
RESOURCE MANAGEMENT:
1. ALWAYS call assess_task FIRST to understand your resource budget
2. Call check_resources periodically to monitor your token/iteration usage
3. Call summarize_progress when context grows (>10 tool calls) to compress conversation history
4. Stay within your allocated token budget and iteration limits

Be efficient: avoid redundant operations, reuse information you've already gathered, and \
compress context when needed."""

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}


def _state(ctx: ToolContext) -> SelfRegulation:
    if ctx.regulation is None:
        raise ToolError("self-regulation is off for this agent")
    return ctx.regulation


async def _assess_task(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    assessment, approved = await _state(ctx).assess(
        params["task_type"],
        params["estimated_files"],
        params["estimated_iterations"],
        params["strategy"].strip(),
        turn=ctx.turn,
    )
    if not approved:
        return ToolOutput(
            f"Not approved: a budget of {assessment.token_budget:,} tokens is above "
            f"{_state(ctx).confirm_above:,}, and the person did not confirm it. Narrow the "
            "scope (fewer files, a cheaper task_type) and call assess_task again.",
            True,
        )
    return ToolOutput(
        json.dumps(
            {
                "token_budget": assessment.token_budget,
                "max_iterations": assessment.max_iterations,
                "guidance": assessment.guidance,
            }
        )
    )


def _check_resources(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    report = _state(ctx).report().to_json()
    report.pop("budget_source")
    return json.dumps(report)


def _summarize_progress(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    summary = _state(ctx).summarize(
        params["key_findings"], params["files_examined"], params["next_steps"], turn=ctx.turn
    )
    counts = (len(summary.key_findings), len(summary.files_examined), len(summary.next_steps))
    return (
        "Summary stored ({} findings, {} files, {} next steps). After this turn the "
        "conversation is pruned to the summary and the last 5 messages.".format(*counts)
    )


def regulation_tools(table: BudgetTable) -> tuple[Tool, ...]:
    return (
        Tool(
            "assess_task",
            "Call FIRST: get a token budget and an iteration limit for the task.",
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
            docs="Returns token_budget, max_iterations and guidance. The budget grows with "
            "estimated_files, up to twice the task type's base. A budget above the "
            "confirmation threshold needs a person's approval.",
        ),
        Tool(
            "check_resources",
            "Report token and iteration usage against your budget (every 3-5 tool calls).",
            object_schema(),
            _check_resources,
            docs="Returns tokens_used, tokens_budget, tokens_remaining, percentage_used, "
            "iterations_used, iterations_max, iterations_remaining and a recommendation "
            "(above 80%: summarize and wrap up; above 50%: caution).",
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
        ),
    )
