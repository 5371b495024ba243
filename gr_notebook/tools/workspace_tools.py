"""File tools and the workspace memory tools, all confined to the workspace."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import regex

from gr_notebook.errors import ToolError, WorkspaceError
from gr_notebook.tools.base import Tool, ToolContext, object_schema
from gr_notebook.wording import plural
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.summary import SUMMARY_FILE
from gr_notebook.workflow.workspace import display_name, read_regular

__all__ = ["MAX_LIST_ENTRIES", "MAX_READ_CHARS", "MAX_SEARCH_HITS", "WORKSPACE_TOOLS"]

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 200
MAX_SEARCH_HITS = 50
MAX_HIT_CHARS = 160
SEARCH_TIMEOUT_S = 2.0
"""The most one search may take: a pattern that backtracks catastrophically, such as
``(a|aa)+b``, is stopped by the ``regex`` engine's own timeout instead of hanging the run."""

_PATH = {"type": "string", "minLength": 1, "description": "Path relative to the workspace."}


def _read_file(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    text = ctx.workspace.read_text(params["path"])
    if len(text) > MAX_READ_CHARS:
        return (
            text[:MAX_READ_CHARS]
            + f"\n[truncated: the file has {len(text)} characters; only the first "
            f"{MAX_READ_CHARS} are shown]"
        )
    return text


def _write_file(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    path, content = params["path"], params["content"]
    existed = ctx.workspace.exists(path)
    ctx.workspace.write_text(path, content)
    verb = "Overwrote" if existed else "Created"
    message = f"{verb} {display_name(path)} ({len(content)} characters)."
    return _after_write(ctx, path, content, message)


def _edit_file(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    path, old, new = params["path"], params["old_text"], params["new_text"]
    text = ctx.workspace.read_text(path)
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {path}; read the file and copy the text exactly"
        )
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {path}; include more surrounding text so it "
            "is unique"
        )
    edited = text.replace(old, new, 1)
    ctx.workspace.write_text(path, edited)
    return _after_write(ctx, path, edited, f"Edited {display_name(path)}: replaced 1 occurrence.")


def _after_write(ctx: ToolContext, path: str, text: str, message: str) -> str:
    """A write to the plan file is parsed at once, so the model sees plan warnings."""
    if ctx.workspace.resolve(path) != ctx.workspace.resolve(ctx.phases.plan_file):
        return message
    plan = Plan.parse(text)
    warnings = ctx.phases.on_plan_written(plan, source=ctx.source)
    if not warnings:
        return f"{message} The plan has {len(plan.phases)} phases."
    listed = "\n".join(f"- {w}" for w in warnings)
    return f"{message}\nPlan warnings (fix them with edit_file):\n{listed}"


def _list_files(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    root = params.get("path", ".")
    entries = []
    for path, kind in ctx.workspace.entries(root):
        about = f"{kind}: not a regular file, so it cannot be read" if kind else None
        entries.append(f"{ctx.workspace.shown(path)}  ({about or f'{_size(path)} bytes'})")
        if len(entries) > MAX_LIST_ENTRIES:
            break
    if not entries:
        return f"No files under {root}."
    if len(entries) > MAX_LIST_ENTRIES:
        entries[MAX_LIST_ENTRIES:] = ["… more files; list a subdirectory to see them"]
    return "\n".join(entries)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # removed since the listing found it


def _search(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    """Matching lines, so the model reads only the files that matter (seed 003)."""
    try:
        pattern = regex.compile(params["pattern"], regex.IGNORECASE)
    except regex.error as exc:
        raise ToolError(
            f"pattern is not a valid regular expression ({exc}); escape special characters "
            "such as ( or [ with a backslash"
        ) from None
    root = params.get("path", ".")
    hits: list[str] = []
    files = 0
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    for path in ctx.workspace.files(root):
        name = ctx.workspace.shown(path)
        try:
            text = read_regular(path).decode("utf-8")
        except (WorkspaceError, UnicodeDecodeError):
            continue  # binary, unreadable, or changed into a FIFO since listed: nothing to match
        found = False
        for number, line in enumerate(text.splitlines(), 1):
            try:
                matched = pattern.search(line, timeout=max(deadline - time.monotonic(), 0.001))
            except TimeoutError:
                raise ToolError(
                    f"the search took longer than {SEARCH_TIMEOUT_S:g} s and was stopped (at "
                    f"{name}:{number}); the pattern likely backtracks: avoid nested repetition "
                    "such as (a+)+ or (a|aa)+, search for a plain word or phrase, or give a "
                    "narrower path"
                ) from None
            if matched:
                found = True
                if len(hits) < MAX_SEARCH_HITS:
                    hits.append(f"{name}:{number}: {line.strip()[:MAX_HIT_CHARS]}")
        files += found
    if not hits:
        return f"No lines under {root} match {params['pattern']!r}."
    more = len(hits) >= MAX_SEARCH_HITS
    head = f"{plural(files, 'file')} match" + (
        f" (first {MAX_SEARCH_HITS} lines shown; narrow the pattern or the path)" if more else ""
    )
    return head + ":\n" + "\n".join(hits)


def _generate_summary(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    text = ctx.phases.generate_summary()
    rows = sum(1 for line in text.splitlines() if line.startswith("| ") and "---" not in line) - 1
    return f"Wrote {SUMMARY_FILE} ({rows} file rows). Read it with read_file('{SUMMARY_FILE}')."


def _add_accomplishment(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    ctx.phases.journal.add_accomplishment(params["text"])
    return "Accomplishment recorded in notes.md."


def _add_note(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    ctx.phases.journal.add_note(params["text"])
    return "Note recorded in notes.md."


_TEXT = {"type": "string", "minLength": 1}

WORKSPACE_TOOLS = (
    Tool(
        "read_file",
        "Read a text file from the workspace.",
        object_schema(["path"], path=_PATH),
        _read_file,
        docs="Returns the file's text. Very long files are truncated.",
        reads="path",
        effect="read",
    ),
    Tool(
        "write_file",
        "Create or overwrite a text file in the workspace.",
        object_schema(["path", "content"], path=_PATH, content={"type": "string"}),
        _write_file,
        docs="Writes the whole file atomically, creating directories as needed. Writing the "
        "plan file checks it and reports problems such as phases outside 5-20 steps.",
        effect="idempotent",
    ),
    Tool(
        "edit_file",
        "Replace one exact occurrence of old_text with new_text in a file.",
        object_schema(
            ["path", "old_text", "new_text"],
            path=_PATH,
            old_text={"type": "string", "minLength": 1},
            new_text={"type": "string"},
        ),
        _edit_file,
        docs="old_text must occur exactly once; include surrounding text to make it unique.",
        effect="idempotent",
    ),
    Tool(
        "list_files",
        "List the files under a workspace directory.",
        object_schema(path={**_PATH, "description": "Directory to list; default '.'."}),
        _list_files,
        docs="Lists files recursively with their sizes, skipping hidden directories.",
        effect="read",
    ),
    Tool(
        "search",
        "Find the lines matching a regular expression in the workspace's files.",
        object_schema(
            ["pattern"],
            pattern={"type": "string", "minLength": 1, "description": "Python regex."},
            path={**_PATH, "description": "Directory (or file) to search; default '.'."},
        ),
        _search,
        docs="Case-insensitive. Returns `path:line: text` for up to 50 lines and how many "
        "files match. Search before reading, and read only the files that matter.",
        effect="read",
    ),
    Tool(
        "generate_workspace_summary",
        "Write workspace_summary.md: files, accomplishments, current state, notes.",
        object_schema(),
        _generate_summary,
        docs="Regenerates workspace_summary.md from the workspace and notes.md. Read it after.",
        effect="idempotent",
    ),
    Tool(
        "add_accomplishment",
        "Record a milestone you achieved (kept in notes.md).",
        object_schema(["text"], text=_TEXT),
        _add_accomplishment,
        docs="Accomplishments appear in workspace_summary.md and in the summary you see after "
        "each phase.",
        effect="idempotent",
    ),
    Tool(
        "add_note",
        "Record a working note for later phases (kept in notes.md).",
        object_schema(["text"], text=_TEXT),
        _add_note,
        docs="Notes appear in workspace_summary.md and survive context summarization.",
        effect="idempotent",
    ),
)
