"""Seed 004's tiers in a session of another harness (a Claude Agent SDK session, a LangChain
agent), which has no todo list and none of gr's workflow tools.

gr's tier-1 strategy check offers ``todo_rewind`` and its tier 2 rewinds gr's todo list; an
order that names a tool the model lacks cannot be obeyed. In a session, tier 1 is a strategy
check that asks only for what the model can do, tier 2 a second one (recorded as
``second_strategy_check``), tier 3 the end of the session, ``stuck``. The texts keep gr's
marker, so guidance and the lint read them as the same orders.
"""

from __future__ import annotations

from collections.abc import Sequence

from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.workflow.prompts import STRATEGY_CHECK_MARKER

__all__ = [
    "second_strategy_check",
    "session_intervention",
    "strategy_check",
    "stuck_reason",
]


def session_intervention(check: InterventionCheck) -> str | LoopOutcome:
    """What a tier that fired does in a session: the order to send (tiers 1 and 2), or the
    end of the session (tier 3)."""
    steps = check.steps_since_progress
    if check.action == "replan":
        return strategy_check(steps, check.stuck_counter)
    if check.action == "rewind":
        return second_strategy_check(steps, check.recent_tools)
    return LoopOutcome("stuck", stuck_reason(steps, check.step))


def strategy_check(steps: int, checks: int) -> str:
    """Tier 1 of seed 004, without gr's rewind tool."""
    return (
        f"{STRATEGY_CHECK_MARKER}: no progress in the last {steps} tool calls ({checks} checks "
        "in a row: no test newly passing, no task completed). Stop repeating what you were "
        "doing. Re-read the task, decide what is blocking you, and change your approach."
    )


def second_strategy_check(steps: int, recent_tools: Sequence[str]) -> str:
    """Tier 2: gr rewinds its todo list; a session has none, so the model is told to."""
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
