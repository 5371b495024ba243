"""How the simulated agent follows seed 003's RESOURCE MANAGEMENT rules, when its tools
are offered: assess each phase when a transition asks for it, check resources every 5 tool
calls, and summarize progress after more than 10, at the end of a task so no work in
progress is pruned.

Everything is decided from the request alone, like the rest of the simulated agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gr_notebook.models.simulated.situation import Situation

__all__ = ["assessment_for", "due_check", "due_summary", "summary_for", "task_type_of"]

CHECK_EVERY = 5
SUMMARIZE_AFTER = 10
ITERATIONS_PER_STEP = 2
TRANSITION_ITERATIONS = 4
"""The estimate the transition prompt suggests: about 2 rounds a step, plus 4."""
AUDIT_FILES = 10
AUDIT_ITERATIONS = 5
"""An auditor expects about 10 files in a folder: a search, two turns of reads, the
findings and todo_complete."""
_COMPLETED = re.compile(r"^Task \d+ '(.*)' marked complete\.")
_KEYWORDS = (
    ("codebase_audit", ("audit",)),
    ("multi_file_refactor", ("refactor", "rename across")),
    ("file_edit", ("implement", "fix", "edit")),
    ("exploration", ("explore", "research", "survey")),
)


def task_type_of(instructions: str, known: Sequence[str]) -> str:
    lowered = instructions.lower()
    for task_type, words in _KEYWORDS:
        if task_type in known and any(w in lowered for w in words):
            return task_type
    return "exploration" if "exploration" in known else known[0]


def assessment_for(
    s: Situation, known: Sequence[str], todos: Sequence[str]
) -> dict[str, Any] | None:
    """The assess_task call to make now, or None: when the latest workflow prompt asks for
    one, in the turn that writes the phase's todos, so the budget covers the phase ahead.
    Once per prompt; a denied assessment is tried once more with half the scope."""
    if s.marker is None or "assess_task" not in s.marker_text or not todos:
        return None
    tries = [c for c in s.calls_since_marker if c.name == "assess_task"]
    if any(not c.is_error for c in tries) or len(tries) >= 2:
        return None
    audits = sum(str(t).startswith("Audit ") for t in todos)
    files = AUDIT_FILES * audits + (len(todos) - audits)
    rounds = AUDIT_ITERATIONS * audits + ITERATIONS_PER_STEP * (len(todos) - audits)
    return {
        "task_type": task_type_of(s.latest_read("instructions.md") or "", known),
        "estimated_files": max(files // (2 if tries else 1), 1),
        "estimated_iterations": rounds + TRANSITION_ITERATIONS,
        "strategy": "Work through the phase's todos one at a time; search before reading, "
        "read only the files that matter, and summarize after each batch of tasks.",
    }


def due_check(s: Situation) -> bool:
    return len(s.calls_since("check_resources")) >= CHECK_EVERY


def warned(s: Situation) -> bool:
    """The latest resource check said to summarize (a warning, or an allotment nearly
    spent), and nothing was summarized since."""
    for call in reversed(s.calls):
        if call.name == "summarize_progress":
            return False
        if call.name == "check_resources" and not call.is_error:
            return "ummarize" in (call.result or "")  # "Summarize and wrap up", "summarize_..."
    return False


def due_summary(s: Situation, *, eager: bool = True) -> bool:
    """At a task boundary (a todo just completed, past the list's first task, so no
    workflow prompt or work in progress is pruned away): when the latest resource check
    warned, or, ``eager``, once more than 10 calls are in view."""
    if s.current is None or s.current.number == 1:
        return False
    if not any(c.name == "todo_complete" and not c.is_error for c in s.last_calls):
        return False
    return warned(s) or (eager and len(s.calls_since("summarize_progress")) > SUMMARIZE_AFTER)


def summary_for(s: Situation) -> dict[str, Any]:
    done = [m.group(1) for c in s.calls if (m := _COMPLETED.match(c.result or ""))]
    files = [
        str(c.input.get("path"))
        for c in s.calls
        if c.name == "read_file" and not c.is_error and c.input.get("path")
    ]
    return {
        "key_findings": [f"Completed: {title}" for title in done[-10:]]
        or [f"Working on: {s.current.title if s.current else s.phase_name}"],
        "files_examined": list(dict.fromkeys(files)),
        "next_steps": [t.title for t in s.tasks if not t.done][:10],
    }
