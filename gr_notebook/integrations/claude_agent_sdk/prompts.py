"""What the system tells Claude in an SDK session where gr's own wording names gr's tools.

gr's tier-1 strategy check offers ``todo_rewind`` and its tier 2 rewinds gr's todo list;
Claude Code has neither, and an order that names a tool the model lacks cannot be obeyed.
These keep the marker (so guidance and the lint read them as the same orders) and ask only
for what Claude can do.
"""

from __future__ import annotations

from collections.abc import Sequence

from gr_notebook.workflow.prompts import STRATEGY_CHECK_MARKER

__all__ = [
    "run_ended",
    "second_strategy_check",
    "strategy_check",
    "stuck_reason",
    "unreadable_call",
]


def strategy_check(steps: int, checks: int) -> str:
    """Tier 1 of seed 004, without gr's rewind tool."""
    return (
        f"{STRATEGY_CHECK_MARKER}: no progress in the last {steps} tool calls ({checks} checks "
        "in a row: no test newly passing, no task completed). Stop repeating what you were "
        "doing. Re-read the task, decide what is blocking you, and change your approach."
    )


def second_strategy_check(steps: int, recent_tools: Sequence[str]) -> str:
    """Tier 2: gr rewinds its todo list; an SDK session has none, so Claude is told to."""
    tools = ", ".join(recent_tools[-5:]) or "none"
    return (
        f"{STRATEGY_CHECK_MARKER}: still no progress in {steps} tool calls, even after a "
        f"strategy check. The latest tool calls were: {tools}. Drop the current approach: note "
        "what failed and why, then start over with a different one."
    )


def stuck_reason(steps: int, step: int) -> str:
    """Tier 3: the session is stopped; the run's reason, with tier 2 as the session had it
    (a second strategy check, where gr's loop rewinds its todo list)."""
    return (
        f"no progress in {steps} tool calls, after two strategy checks "
        f"(intervention 3 of 3, after {step} tool calls)"
    )


def unreadable_call(problems: Sequence[str]) -> str:
    """A call whose hook input the guardrails could not read: denied, since no policy could
    judge it. The model can only try again, and stop trying if it keeps happening."""
    return (
        f"Not run: the guardrails could not read this tool call ({'; '.join(problems)}), so "
        "no policy could check it. Call the tool again, with its name and its inputs as named "
        "fields. If the same refusal comes back, end your turn and say that the guardrails "
        "could not read your tool calls."
    )


def run_ended(run_id: str, status: str) -> str:
    """A call made after the run these hooks record has ended."""
    return (
        f"Not run: the guarded run {run_id} has ended ({status}), so no more tool calls are "
        "allowed in this session. End your turn now."
    )
