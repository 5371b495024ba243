"""The todo tools of seed 001: todo_write, todo_complete, todo_rewind, archive_and_reset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gr_notebook.errors import ToolError
from gr_notebook.tools.base import Tool, ToolContext, ToolOutput, object_schema
from gr_notebook.tools.effects import ResetPolicies, Rewound
from gr_notebook.workflow.todos import TodoItem

__all__ = ["TODO_TOOLS"]

_TODO_ITEM = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "done": {"type": "boolean"},
            },
            "required": ["title"],
            "additionalProperties": False,
        },
    ]
}


def _todo_write(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    items = []
    for i, todo in enumerate(params["todos"]):
        title, done = (todo, False) if isinstance(todo, str) else (todo["title"], todo.get("done"))
        if not title.strip():
            raise ToolError(f"todos[{i}] has a blank title; give every task a title")
        items.append(TodoItem(" ".join(title.split()), bool(done)))
    return ctx.phases.write_todos(items, source=ctx.source)


def _todo_complete(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    return ctx.phases.complete_todo(source=ctx.source)


def _todo_rewind(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    text = ctx.phases.rewind(params["issue"], source=ctx.source)
    rewound = Rewound(" ".join(params["issue"].split()))
    reset = (ResetPolicies(),) if params.get("reset_policies") else ()
    return ToolOutput(text, effects=(rewound, *reset))


def _archive_and_reset(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    return ctx.phases.archive_and_reset(source=ctx.source)


TODO_TOOLS = (
    Tool(
        "todo_write",
        "Set the whole todo list for the current phase (5-20 tasks).",
        object_schema(
            ["todos"],
            todos={
                "type": "array",
                "minItems": 1,
                "items": _TODO_ITEM,
                "description": "Task titles in order, or objects {title, done}.",
            },
        ),
        _todo_write,
        docs="""
Replaces the todo list in bulk. Use it after a phase transition or rewind prompt, with the
steps of the phase marked ← CURRENT in the plan. Each todo is a title string, or an object
with `title` and an optional `done`. The phase number and name are taken from the plan.
""",
        effect="idempotent",
    ),
    Tool(
        "todo_complete",
        "Mark the current task complete. Call it after finishing each task.",
        object_schema(),
        _todo_complete,
        docs="""
Takes no arguments. Marks the first incomplete task complete and tells you how many remain.
When the last task of a phase is completed, the system takes care of what comes next.
""",
        effect="idempotent",
    ),
    Tool(
        "todo_rewind",
        "Panic button: abandon the current todo list when the approach is not working.",
        object_schema(
            ["issue"],
            issue={
                "type": "string",
                "minLength": 1,
                "description": "What is wrong, and what could work instead.",
            },
            reset_policies={
                "type": "boolean",
                "description": "Also forget what the tool policies remember (files read, "
                "tools run). Default false.",
            },
        ),
        _todo_rewind,
        docs="""
Archives the current todo list with your failure note, records it in experiences.md,
regenerates workspace_summary.md and guides you to revise the plan and write new todos.
Progress already made in the workspace is kept, and so is what the tool policies remember
(which files you have read) unless you pass reset_policies=true.
""",
        effect="idempotent",
    ),
    Tool(
        "archive_and_reset",
        "Escape hatch: archive the current todo list and start an empty one.",
        object_schema(),
        _archive_and_reset,
        docs="""
Archives the current list as it is and clears it. Write the next list with todo_write().
Prefer todo_complete(); use this only when the list no longer fits the work.
""",
        effect="idempotent",
    ),
)
