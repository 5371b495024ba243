"""``workspace_summary.md``: the agent's snapshot of its workspace, in the seed's format.

Every section is capped, so the summary the model re-reads at each transition stays the same
size however many files and notes the job accumulates.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Callable
from pathlib import Path

from gr_notebook.errors import WorkspaceError
from gr_notebook.eventdata import clip
from gr_notebook.workflow.journal import EXPERIENCES_FILE, NOTES_FILE, Journal
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import ARCHIVE_DIR, TODOS_FILE, TodoList
from gr_notebook.workflow.workspace import TOOL_DOCS_DIR, Workspace, read_regular

__all__ = ["SUMMARY_FILE", "build_workspace_summary", "workspace_state"]

SUMMARY_FILE = "workspace_summary.md"
MAX_FILE_ROWS = 30
MAX_ACCOMPLISHMENTS = 12
MAX_NOTES = 8

_KNOWN_PURPOSES = {
    "instructions.md": "Task instructions",
    SUMMARY_FILE: "This summary",
    TODOS_FILE: "Active todo list",
    NOTES_FILE: "Accomplishments and notes",
    EXPERIENCES_FILE: "Failed approaches and lessons",
}


def build_workspace_summary(
    workspace: Workspace,
    *,
    plan_file: str,
    todos: TodoList,
    clock: Callable[[], float],
    blocking: str | None = None,
    just_finished: str | None = None,
    journal: Journal | None = None,
    plan: Plan | None = None,
) -> str:
    """Render the summary text (the caller writes it, so the write is one recorded step).

    ``plan`` is the parsed plan file when the caller has it; otherwise the file is read.
    """
    journal = journal or Journal(workspace)
    generated = dt.datetime.fromtimestamp(clock()).strftime("%Y-%m-%d %H:%M:%S")
    lines = ["# Workspace Summary", "", f"Generated: {generated}", "", "## Files", ""]
    lines += ["| File | Purpose | Last Modified |", "|------|---------|---------------|"]
    lines += _file_rows(workspace, plan_file)
    lines += ["", "## Accomplishments"]
    lines += _capped(journal.accomplishments(), MAX_ACCOMPLISHMENTS, NOTES_FILE)
    lines += ["", "## Current State"]
    plan = _read_plan(workspace, plan_file) if plan is None else plan
    lines += _current_state(plan, plan_file, todos, blocking, just_finished)
    lines += ["", "## Notes"]
    lines += _capped(journal.notes(), MAX_NOTES, NOTES_FILE)
    return "\n".join(lines) + "\n"


def _file_rows(workspace: Workspace, plan_file: str) -> list[str]:
    grouped: dict[str, int] = {}
    entries: list[tuple[float, str, Path, str | None, os.stat_result]] = []
    for path, kind in workspace.entries():
        rel = workspace.shown(path)
        top = rel.split("/", 1)[0]
        if top in (ARCHIVE_DIR, TOOL_DOCS_DIR) and "/" in rel:
            grouped[top] = grouped.get(top, 0) + 1
            continue
        try:
            stat = path.lstat()
        except OSError:
            continue  # removed since the walk found it
        entries.append((stat.st_mtime, rel, path, kind, stat))
    shown = sorted(entries, key=lambda e: e[:2], reverse=True)[:MAX_FILE_ROWS]
    rows = []
    for mtime, rel, path, kind, stat in sorted(shown, key=lambda e: e[1]):
        stamp = dt.datetime.fromtimestamp(mtime).strftime("%H:%M")
        purpose = (
            f"{kind[0].upper()}{kind[1:]} (not a regular file; not read)"
            if kind
            else _purpose(rel, path, plan_file, (stat.st_ino, stat.st_mtime_ns, stat.st_size))
        )
        rows.append(f"| {rel} | {purpose} | {stamp} |")
    if len(entries) > len(shown):
        rows.append(f"| … | {len(entries) - len(shown)} older files; use list_files() | |")
    if TOOL_DOCS_DIR in grouped:
        rows.append(f"| {TOOL_DOCS_DIR}/ | Full tool docs ({grouped[TOOL_DOCS_DIR]} files) | |")
    if ARCHIVE_DIR in grouped:
        rows.append(f"| {ARCHIVE_DIR}/ | Archived todo lists ({grouped[ARCHIVE_DIR]}) | |")
    return rows


def _purpose(rel: str, path: Path, plan_file: str, version: tuple[int, int, int]) -> str:
    if rel == plan_file:
        return "Execution plan"
    if rel in _KNOWN_PURPOSES:
        return _KNOWN_PURPOSES[rel]
    return _first_line(str(path), version)


@functools.lru_cache(maxsize=4096)
def _first_line(path: str, version: tuple[int, int, int]) -> str:
    """A file's purpose, its first line, read once per version (inode, mtime, size): every
    write renames a new file in, so a file the run has not rewritten since the
    last transition is not read again, and the summary's cost stays with what changed."""
    try:
        head = read_regular(Path(path), limit=512).decode("utf-8", errors="strict")
    except WorkspaceError:
        return "Unreadable file"
    except UnicodeDecodeError:
        return "Binary file"
    for line in head.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return clip(text.replace("|", "/"), 48)
    return "Empty file"


def _read_plan(workspace: Workspace, plan_file: str) -> Plan | None:
    return Plan.parse(workspace.read_text(plan_file)) if workspace.exists(plan_file) else None


def _current_state(
    plan: Plan | None,
    plan_file: str,
    todos: TodoList,
    blocking: str | None,
    just_finished: str | None,
) -> list[str]:
    state = [f"- Just finished: {just_finished}"] if just_finished else []
    if todos.kind == "bootstrap":
        state.append("- Bootstrapping: building the execution plan")
    elif todos.kind == "job_completion":
        state.append("- All phases complete; finishing the job")
    elif plan and plan.active:
        phase = plan.active
        state.append(f"- Working on Phase {phase.number} of {len(plan.phases)}: {phase.name}")
    if plan:
        done = sum(p.status == "complete" for p in plan.phases)
        state.append(f"- {done} of {len(plan.phases)} phases complete in {plan_file}")
    else:
        state.append(f"- No plan yet ({plan_file} does not exist)")
    if todos.items:
        state.append(f"- {todos.done_count} of {len(todos.items)} tasks complete in current phase")
    elif plan is not None and plan.is_complete:
        state.append("- Next: verify the deliverables, write the report, call job_complete()")
    else:
        state.append("- Next: update the plan and write the next todo list")
    state.append(f"- Blocking issue: {blocking}" if blocking else "- No blocking issues")
    return state


def _capped(items: list[str], limit: int, where: str) -> list[str]:
    if not items:
        return ["- (none yet)"]
    shown = [f"- {item}" for item in items[-limit:]]
    if len(items) > limit:
        shown.insert(0, f"- … {len(items) - limit} earlier entries in {where}")
    return shown


def workspace_state(
    workspace: Workspace, *, plan_file: str, todos: TodoList, plan: Plan | None = None
) -> list[str]:
    """The summary's Current State, computed now, for the recap after compaction."""
    plan = _read_plan(workspace, plan_file) if plan is None else plan
    state = _current_state(plan, plan_file, todos, None, None)
    return [line.removeprefix("- ") for line in state]
