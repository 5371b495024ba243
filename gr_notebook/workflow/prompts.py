"""The words the system says to the model: Layer 1 and the workflow prompts of seed 001.

Each injected prompt starts with a fixed marker (``PHASE TRANSITION``, ``REWIND``, …) so
that a person reading a transcript, and the simulated model, can tell which workflow is
under way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gr_notebook.guidance import Action, Directive
from gr_notebook.harness import GR_LOOP, Harness

if TYPE_CHECKING:
    from gr_notebook.workflow.todos import TodoList

__all__ = [
    "BOOTSTRAP_TODOS",
    "JOB_COMPLETION_TODOS",
    "cut_off_tool_use",
    "job_completion_prompt",
    "kickoff_prompt",
    "progress_check_prompt",
    "rewind_prompt",
    "stop_refused_prompt",
    "strategy_check_prompt",
    "stuck_rewind_issue",
    "system_prompt",
    "transition_prompt",
    "wrap_up_order",
]

TRANSITION_MARKER = "PHASE TRANSITION"
REWIND_MARKER = "REWIND"
RESET_MARKER = "RESET"
JOB_COMPLETION_MARKER = "JOB COMPLETION"
PROGRESS_CHECK_MARKER = "PROGRESS CHECK"
MARKERS = frozenset(
    {TRANSITION_MARKER, REWIND_MARKER, RESET_MARKER, JOB_COMPLETION_MARKER, PROGRESS_CHECK_MARKER}
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


def system_prompt(plan_file: str, extra: str = "", *, regulated: bool = False) -> str:
    """Layer 1. With self-regulation on, the todo list is the main job rather than the only
    one: seed 003's resource rules sit beside it, and neither may be absolute."""
    job = (
        "YOUR JOB: Complete the tasks in your todo list, one at a time, following the "
        "RESOURCE MANAGEMENT rules below as you go."
        if regulated
        else "YOUR ONLY JOB: Complete the tasks in your todo list, one at a time."
    )
    text = f"""\
You are an agent working through a long job inside a workspace of files.

Your work is organized into phases. Each phase has a todo list.

{job}

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


def transition_reads(plan_file: str, *, has_experiences: bool = False) -> tuple[str, ...]:
    """The files a transition prompt asks the model to re-read."""
    reads = (plan_file, "instructions.md", "workspace_summary.md")
    return (*reads, "experiences.md") if has_experiences else reads


def rewind_reads(plan_file: str) -> tuple[str, ...]:
    return (plan_file, "instructions.md", "workspace_summary.md", "experiences.md")


ASSESS_STEP = (
    "Call assess_task for {what}: estimated_iterations is about 2 per step plus 4 for the "
    "next transition."
)


def _steps(*steps: str) -> str:
    return "".join(f"{n}. {step}\n" for n, step in enumerate(steps, 1))


def transition_prompt(
    *,
    finished: str,
    archive: str | None,
    plan_file: str,
    plan_warnings: Sequence[str] = (),
    has_experiences: bool = False,
    assess: bool = False,
) -> str:
    """``assess``: self-regulation is on, so the phase ahead gets its own budget."""
    archived = f" (archived to {archive})" if archive else ""
    experiences = " and experiences.md (approaches that failed before)" if has_experiences else ""
    steps = [
        f"Read {plan_file}, instructions.md and workspace_summary.md{experiences}.",
        f"Update {plan_file}: mark the finished phase ✓ COMPLETE, adjust the later phases "
        "if what you learned requires it, and mark the next phase ← CURRENT.",
    ]
    if assess:
        steps.append(ASSESS_STEP.format(what="the next phase"))
    steps.append("Write the next phase's steps as your new todo list with todo_write(todos=[...]).")
    return (
        f"{TRANSITION_MARKER}: {finished} is complete{archived}. "
        "The system generated workspace_summary.md.\n"
        + _steps(*steps)
        + "Your conversation is then summarized; the plan and the new todos carry you forward."
        + _warnings_block(plan_warnings)
    )


def rewind_prompt(
    *,
    issue: str,
    phase: str,
    archive: str | None,
    plan_file: str,
    by: str,
    assess: bool = False,
) -> str:
    who = {
        "model": "You called todo_rewind()",
        "system": "The system rewound your todo list: no progress, even after a strategy check",
    }.get(by, "A person pressed the rewind button")
    what = (
        f"The todo list of {phase} was archived to {archive}"
        if archive
        else f"The todo list of {phase} was already empty"
    )
    return (
        f"{REWIND_MARKER}: {who}. {what}; the failure note is:\n"
        f'  "{issue}"\n'
        "The note is recorded in experiences.md.\n"
        + _steps(
            f"Read {plan_file}, instructions.md, workspace_summary.md and experiences.md.",
            f"Reconsider the phases in the light of the issue and revise {plan_file} with the "
            "adjusted approach (you may revise several phases). Keep exactly one phase "
            "← CURRENT.",
            *((ASSESS_STEP.format(what="the revised phase"),) if assess else ()),
            "Write the todo list for the revised current phase with todo_write(todos=[...]).",
        ).rstrip("\n")
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


def progress_check_prompt(turns: int, *, waiting_for_todos: bool = False) -> str:
    """Seed 000's progress check: the todo list has not moved for ``turns`` turns."""
    if waiting_for_todos:
        return (
            f"{PROGRESS_CHECK_MARKER}: your todo list has been empty for {turns} turns. Follow the "
            "latest instructions above: update the plan if they ask for it, then write the "
            "next tasks with todo_write(todos=[...])."
        )
    return (
        f"{PROGRESS_CHECK_MARKER}: your todo list has not changed for {turns} turns. Re-read the "
        "current task in your todo list. If it is blocked or your approach is not working, "
        'call todo_rewind(issue="what is wrong and what could work instead"). Otherwise '
        "finish it now and call todo_complete()."
    )


def stop_refused_prompt(
    feedback: str | None, *, refusals: int, limit: int, harness: Harness = GR_LOOP
) -> str:
    """A refused stop; it names the todo list only where the model has one (``harness``)."""
    left = limit - refusals
    work = "through your todo list" if harness.phased else "on the task"
    return (
        f"{STOP_REFUSED_MARKER}: the task is not complete, so the run goes on.\n"
        f"{(feedback or 'The completion check found unfinished work.').strip()}\n"
        f"Keep working {work} and stop only when the work is done "
        f"({left} more refused stop{'' if left == 1 else 's'} in a row end the run as "
        "incomplete)."
    )


def strategy_check_prompt(steps: int, checks: int) -> str:
    """Tier 1 of seed 004: no progress for a while, outside every safeguard."""
    return (
        f"{STRATEGY_CHECK_MARKER}: no progress in the last {steps} tool calls ({checks} checks "
        "in a row: no test newly passing, no task completed). Stop repeating what you were doing. "
        "Re-read the current task and the plan, decide what is blocking you, and change your "
        "approach. If the approach cannot work, call "
        'todo_rewind(issue="what is wrong and what could work instead").'
    )


def stuck_rewind_issue(steps: int, recent_tools: Sequence[str]) -> str:
    """Tier 2's issue text, written by the system for the rewind it performs."""
    tools = ", ".join(recent_tools[-5:]) or "none"
    return (
        f"The system rewound this list: no progress in {steps} tool calls, even after a "
        f"strategy check. The latest tool calls were: {tools}. Try a different approach."
    )


WRAP_UP_INSTRUCTION = (
    "Resources are low: summarize your progress with summarize_progress, then call "
    "job_complete(summary=..., confidence=..., notes=...) with what is done and what is left"
)
"""The todo layer's INSTRUCTION line once the run was told to wrap up: it stands for the
rest of the run, so the layer never asks for a task the system told the model to leave."""

_ACTIONS: dict[str, Action] = {
    TRANSITION_MARKER: "write_todos",
    REWIND_MARKER: "write_todos",
    RESET_MARKER: "write_todos",
    JOB_COMPLETION_MARKER: "finish_job",
    STOP_REFUSED_MARKER: "continue",
    STRATEGY_CHECK_MARKER: "change_approach",
}


def directive(text: str, *, reads: Sequence[str] = ()) -> Directive:
    """A prompt the system injects, as guidance: its marker is its source."""
    marker = marker_of(text)
    action: Action | None = _ACTIONS.get(marker)
    if marker == PROGRESS_CHECK_MARKER:
        action = "write_todos" if "has been empty" in text else "change_approach"
    elif marker == "other":
        action = "finish_job" if "job_complete(" in text else "work_on_task"
    source = "intervention" if marker == STRATEGY_CHECK_MARKER else f"prompt:{marker}"
    return Directive(text, source, action, reads=tuple(reads))


def todo_layer_directive(todos: TodoList) -> Directive:
    """The INSTRUCTION line of Layer 2, as guidance: the order in force on every turn."""
    text = todos.next_instruction()
    action: Action | None
    if text == WRAP_UP_INSTRUCTION:
        action = "wrap_up"
    elif todos.current is not None:
        action = "finish_job" if todos.kind == "job_completion" else "work_on_task"
    elif todos.is_finished:
        action = "finish_job" if todos.kind == "job_completion" else None
    else:
        action = "write_todos"
    return Directive(text, "todo_layer", action)


def marker_of(text: str) -> str:
    """Which workflow prompt a text is, or ``"other"``."""
    head = text.split(":", 1)[0]
    return head if head in MARKERS or head in _OTHER_MARKERS else "other"


_OTHER_MARKERS = frozenset({STOP_REFUSED_MARKER, STRATEGY_CHECK_MARKER})


def cut_off_tool_use(tool: str) -> str:
    """The error result of a tool call whose reply was cut off at the token limit."""
    return (
        f"Not run: your reply was cut off at the output token limit while writing this "
        f"{tool} call, so its input may be incomplete. Call {tool} again with a shorter "
        "input, or split the work into several smaller calls."
    )


def wrap_up_order(recommendation: str) -> str:
    """The wrap-up order past 80% of a hard limit, for a harness without gr's todo layer
    (and so none of gr's workflow tools): seed 003's warning, and what to do."""
    return (
        f"{recommendation} Do not start new work: finish what you are doing, then end your "
        "turn with your final answer, saying what is done and what is left."
    )
