"""How deep a tool's input may nest: a model can send JSON nested a thousand levels deep,
and every recursive walk over it (token estimates, validation, events, the next request)
would raise ``RecursionError`` and end the run. The loop cuts such an input down to
:data:`MAX_INPUT_DEPTH` levels where the conversation keeps it, and answers the call with an
``is_error`` result the model can act on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gr_notebook.messages import Message, ToolUseBlock

__all__ = ["CUT", "MAX_INPUT_DEPTH", "cut_deep_inputs", "deeper_than", "too_deep_message"]

MAX_INPUT_DEPTH = 32
"""Levels of arrays and objects a tool input may have; real tool schemas need a handful."""
CUT = "…(cut: nested too deep)"


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels deep; without
    recursion, so it is safe on any depth."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values()
            if isinstance(item, Mapping)
            else item
            if isinstance(item, (list, tuple))
            else None
        )
        if children is None:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _cut(value: Any, levels: int) -> Any:
    """``value`` with what lies below ``levels`` levels replaced by :data:`CUT`."""
    if isinstance(value, Mapping):
        return {str(k): _cut(v, levels - 1) for k, v in value.items()} if levels else CUT
    if isinstance(value, (list, tuple)):
        return [_cut(v, levels - 1) for v in value] if levels else CUT
    return value


def cut_deep_inputs(message: Message) -> tuple[Message, frozenset[str]]:
    """``message`` with each tool input nested too deep cut to :data:`MAX_INPUT_DEPTH`
    levels, and the ids of the calls that were cut (they are answered with an error)."""
    cut: set[str] = set()
    blocks = []
    for block in message.content:
        if isinstance(block, ToolUseBlock) and deeper_than(block.input, MAX_INPUT_DEPTH):
            cut.add(block.id)
            block = ToolUseBlock(block.id, block.name, _cut(block.input, MAX_INPUT_DEPTH))
        blocks.append(block)
    return (Message(message.role, tuple(blocks)), frozenset(cut)) if cut else (message, frozenset())


def too_deep_message(name: str) -> str:
    return (
        f"Invalid arguments for {name}: the input is nested more than {MAX_INPUT_DEPTH} levels "
        "deep, and was not run. Send the arguments the tool's schema describes, nested no "
        "deeper than it shows."
    )
