"""A hook's input as the guardrails read it, whatever the CLI sent.

The SDK types a tool hook's input (``tool_name`` a string, ``tool_input`` an object, a
``tool_use_id``), but nothing checks it on the way in, and a hook that indexes it blindly
raises: the CLI then blocks the call or goes on while the run records nothing.
:func:`read_tool_hook` takes what is there and names what is not, so that ``PreToolUse``
denies the call and ``PostToolUse`` records it, each with an ``error`` event.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gr_notebook.eventdata import clip

__all__ = ["UNNAMED", "ToolHookInput", "fields_of", "json_kind", "read_tool_hook", "session_of"]

UNNAMED = "(unnamed tool)"
"""The tool a call is recorded under when its input names none."""

_SHOWN = 60
"""How much of a malformed value an error message quotes."""


@dataclass(frozen=True, slots=True)
class ToolHookInput:
    """What a tool hook's input says, read defensively: ``problems`` names, in a reader's
    words, each part that is missing or of the wrong kind (empty when it is well formed)."""

    tool_name: str | None
    tool_input: Mapping[str, Any]
    """The call's input; empty when it is not an object."""
    tool_use_id: str
    """Empty when the call has none."""
    problems: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.tool_name or UNNAMED


def fields_of(hook_input: Any) -> Mapping[str, Any]:
    """The input's fields; none when it is not an object."""
    return hook_input if isinstance(hook_input, Mapping) else {}


def session_of(hook_input: Any) -> str | None:
    session_id = fields_of(hook_input).get("session_id")
    return session_id if isinstance(session_id, str) and session_id else None


def read_tool_hook(hook_input: Any, tool_use_id: Any) -> ToolHookInput:
    """A ``PreToolUse``, ``PostToolUse`` or ``PostToolUseFailure`` input; ``tool_use_id`` is
    the id the SDK passes beside it, else the input's own."""
    if not isinstance(hook_input, Mapping):
        problem = f"the input is {_shown(hook_input)}, not an object of named fields"
        return ToolHookInput(None, {}, _id_of(tool_use_id) or "", (problem,))
    problems = []
    name = hook_input.get("tool_name")
    if "tool_name" not in hook_input:
        problems.append("it has no tool_name")
    elif not isinstance(name, str) or not name.strip():
        problems.append(f"its tool_name is {_shown(name)}, not a tool's name")
    raw = hook_input.get("tool_input", {})  # absent: a tool without parameters
    if not isinstance(raw, Mapping):
        problems.append(f"its tool_input is {_shown(raw)}, not an object of named inputs")
    key = _id_of(tool_use_id) or _id_of(hook_input.get("tool_use_id"))  # absent: not matched
    return ToolHookInput(
        name if isinstance(name, str) and name.strip() else None,
        dict(raw) if isinstance(raw, Mapping) else {},
        key or "",
        tuple(problems),
    )


def json_kind(value: Any) -> str:
    """A value's kind in JSON's words, as the CLI sent it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _shown(value: Any) -> str:
    if value is None or isinstance(value, Mapping):
        return json_kind(value)
    return f"{json_kind(value)} ({clip(reprlib.repr(value), _SHOWN)})"  # bounded, any depth


def _id_of(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
