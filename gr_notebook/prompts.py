"""The words the system says to the model: Layer 1 and the workflow prompts of seed 001.

Each injected prompt starts with a fixed marker (``PHASE TRANSITION``, ``REWIND``, …) so
that a person reading a transcript, and the simulated model, can tell which workflow is
under way.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BOOTSTRAP_TODOS",
    "JOB_COMPLETION_TODOS",
    "checkpoint_prompt",
    "job_completion_prompt",
    "kickoff_prompt",
    "rewind_prompt",
    "stop_refused_prompt",
    "strategy_check_prompt",
    "stuck_rewind_issue",
    "system_prompt",
    "transition_prompt",
]

TRANSITION_MARKER = "PHASE TRANSITION"
REWIND_MARKER = "REWIND"
RESET_MARKER = "RESET"
JOB_COMPLETION_MARKER = "JOB COMPLETION"
CHECKPOINT_MARKER = "CHECKPOINT"
MARKERS = frozenset(
    {TRANSITION_MARKER, REWIND_MARKER, RESET_MARKER, JOB_COMPLETION_MARKER, CHECKPOINT_MARKER}
)
STOP_REFUSED_MARKER = "STOP REFUSED"
"""Not a workflow marker: a refused stop leaves the current workflow where it was."""
STRATEGY_CHECK_MARKER = "STRATEGY CHECK"
"""Not a workflow marker either: a tier-1 intervention asks for a re-plan, nothing more."""


def bootstrap_todos(plan_file: str) -> tuple[str, ...]:
    return (
        "Generate workspace summary using generate_workspace_summary()",
        "Read workspace_summary.md",
        "Read instructions.md",
        f"Create comprehensive execution plan in {plan_file}",
        "Divide plan into executable phases (5-20 steps each)",
    )


BOOTSTRAP_TODOS = bootstrap_todos("main_plan.md")
JOB_COMPLETION_TODOS = ("Verify all deliverables", "Generate summary report", "Call job_complete()")


def system_prompt(plan_file: str, extra: str = "") -> str:
    text = f"""\
You are an agent working through a long job inside a workspace of files.

Your work is organized into phases. Each phase has a todo list.

YOUR ONLY JOB: Complete the tasks in your todo list, one at a time.

After completing each task, call todo_complete(). The system will:
- Mark the task done
- Show you the next task
- Handle everything else automatically

Do not try to manage phases yourself. Just focus on the current task.
When you see a fresh todo list, start working through it.

Trust the process: when todos appear, work through them. When your conversation is
summarized, continue from the new todos; the summary tells you what came before.

How to work:
- The job's instructions are in instructions.md; the strategy is in {plan_file}.
- Read and write files with the workspace tools; paths are relative to the workspace.
- Record milestones with add_accomplishment() and observations with add_note().
- If your approach cannot work, call todo_rewind(issue="what is wrong and what could work
  instead"). The system archives the list and helps you re-plan without losing progress.
- When your final todo says so, call job_complete(summary, deliverables, confidence, notes)."""
    return f"{text}\n\n{extra.strip()}" if extra.strip() else text


def kickoff_prompt() -> str:
    return (
        "A new job has started. Its instructions are in instructions.md. "
        "Begin with task 1 of your todo list."
    )


def _warnings_block(warnings: Sequence[str]) -> str:
    if not warnings:
        return ""
    listed = "\n".join(f"- {w}" for w in warnings)
    return f"\n\nFix these problems in the plan while you update it:\n{listed}"


def transition_prompt(
    *,
    finished: str,
    archive: str | None,
    plan_file: str,
    plan_warnings: Sequence[str] = (),
    has_experiences: bool = False,
) -> str:
    archived = f" (archived to {archive})" if archive else ""
    experiences = " and experiences.md (approaches that failed before)" if has_experiences else ""
    return (
        f"{TRANSITION_MARKER}: {finished} is complete{archived}. "
        "The system generated workspace_summary.md.\n"
        f"1. Read {plan_file}, instructions.md and workspace_summary.md{experiences}.\n"
        f"2. Update {plan_file}: mark the finished phase ✓ COMPLETE, adjust the later phases "
        "if what you learned requires it, and mark the next phase ← CURRENT.\n"
        "3. Write the next phase's steps as your new todo list with todo_write(todos=[...]).\n"
        "Your conversation is then summarized; the plan and the new todos carry you forward."
        + _warnings_block(plan_warnings)
    )


def rewind_prompt(
    *, issue: str, phase: str, archive: str | None, plan_file: str, by_person: bool
) -> str:
    who = "A person pressed the rewind button" if by_person else "You called todo_rewind()"
    what = (
        f"The todo list of {phase} was archived to {archive}"
        if archive
        else f"The todo list of {phase} was already empty"
    )
    return (
        f"{REWIND_MARKER}: {who}. {what}; the failure note is:\n"
        f'  "{issue}"\n'
        "The note is recorded in experiences.md.\n"
        f"1. Read {plan_file}, instructions.md, workspace_summary.md and experiences.md.\n"
        f"2. Reconsider the phases in the light of the issue and revise {plan_file} with the "
        "adjusted approach (you may revise several phases). Keep exactly one phase "
        "← CURRENT.\n"
        "3. Write the todo list for the revised current phase with todo_write(todos=[...])."
    )


def reset_prompt(*, archive: str | None) -> str:
    archived = f" to {archive}" if archive else ""
    return (
        f"{RESET_MARKER}: the todo list was archived{archived} and cleared. Write the new "
        "todo list with todo_write(todos=[...]); your conversation is then summarized."
    )


def job_completion_prompt(plan_file: str) -> str:
    return (
        f"{JOB_COMPLETION_MARKER}: every phase in {plan_file} is complete. Your final todo "
        "list is above: verify all deliverables, write a summary report, then call "
        "job_complete(summary=..., deliverables=[...], confidence=0.0-1.0, notes=...)."
    )


def checkpoint_prompt(turns: int, *, waiting_for_todos: bool = False) -> str:
    if waiting_for_todos:
        return (
            f"{CHECKPOINT_MARKER}: your todo list has been empty for {turns} turns. Follow the "
            "latest instructions above: update the plan if they ask for it, then write the "
            "next tasks with todo_write(todos=[...])."
        )
    return (
        f"{CHECKPOINT_MARKER}: your todo list has not changed for {turns} turns. Re-read the "
        "current task in your todo list. If it is blocked or your approach is not working, "
        'call todo_rewind(issue="what is wrong and what could work instead"). Otherwise '
        "finish it now and call todo_complete()."
    )


def stop_refused_prompt(feedback: str | None, *, refusals: int, limit: int) -> str:
    left = limit - refusals
    return (
        f"{STOP_REFUSED_MARKER}: the task is not complete, so the run goes on.\n"
        f"{(feedback or 'The completion check found unfinished work.').strip()}\n"
        "Keep working through your todo list and stop only when the work is done "
        f"({left} more refused stop{'' if left == 1 else 's'} in a row end the run as "
        "incomplete)."
    )


def strategy_check_prompt(steps: int, checks: int) -> str:
    """Tier 1 of seed 004: no progress for a while, outside every safeguard."""
    return (
        f"{STRATEGY_CHECK_MARKER}: no progress in the last {steps} steps ({checks} checks in a "
        "row: no test newly passing, no task completed). Stop repeating what you were doing. "
        "Re-read the current task and the plan, decide what is blocking you, and change your "
        "approach. If the approach cannot work, call "
        'todo_rewind(issue="what is wrong and what could work instead").'
    )


def stuck_rewind_issue(steps: int, recent_tools: Sequence[str]) -> str:
    """Tier 2's issue text, written by the system for the rewind it performs."""
    tools = ", ".join(recent_tools[-5:]) or "none"
    return (
        f"The system rewound this list: no progress in {steps} steps, even after a strategy "
        f"check. The latest tool calls were: {tools}. Try a different approach."
    )


def marker_of(text: str) -> str:
    """Which workflow prompt a text is, or ``"other"``."""
    head = text.split(":", 1)[0]
    return head if head in MARKERS or head in _OTHER_MARKERS else "other"


_OTHER_MARKERS = frozenset({STOP_REFUSED_MARKER, STRATEGY_CHECK_MARKER})
