"""Where the layers go on the Messages API wire, and where the cache breakpoints sit.

The API caches prefixes in the order tools, system, messages, so whatever changes often must
come late. Layer 2 (the todo display) changes every few turns: as a system block it sits
before the conversation and no turn of the conversation is ever read from the cache. With
the ``"tail"`` placement it is a text block at the end of the last user turn instead, after
a breakpoint that ends the conversation, so next turn's request reads the conversation back
from the cache. The layer is on every request either way; only its position differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gr_notebook.models.base import SystemBlock

__all__ = [
    "CACHE_MARK",
    "LAYER2_PLACEMENTS",
    "Layer2Placement",
    "WireLayout",
    "lay_out",
    "tail_text",
]

Layer2Placement = Literal["tail", "system"]
LAYER2_PLACEMENTS: tuple[Layer2Placement, ...] = ("tail", "system")
CACHE_MARK = {"type": "ephemeral"}
"""A 5-minute breakpoint, the API's default and the one priced in :mod:`pricing`."""

_TAIL_OPEN = '<context layer="2" name="todo">'
_TAIL_CLOSE = "</context>"


def tail_text(layer2: str) -> str:
    """Layer 2 as the tail block: tagged, so that neither model nor reader takes it for the
    user's words."""
    return f"{_TAIL_OPEN}\n{layer2}\n{_TAIL_CLOSE}"


@dataclass(frozen=True)
class WireLayout:
    """The request's ``system``, ``tools`` and ``messages``, as JSON values, breakpoints set."""

    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]


def lay_out(
    system: tuple[SystemBlock, ...],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    *,
    cache: bool,
    placement: Layer2Placement,
) -> WireLayout:
    """The layout: layer 2 at the tail only when caching and the last turn is the user's
    (else there is nothing to gain, or no user turn to carry it), and at most three
    breakpoints: after the tools and layer 1, at the end of the previous request's
    conversation, and at the end of this one. The middle one makes the read independent of
    the API's 20-block lookback, whatever the turn added."""
    blocks = sorted((b for b in system if b.text.strip()), key=lambda b: b.layer)
    tools = [dict(t) for t in tools]
    messages = [{**m, "content": list(m["content"])} for m in messages]
    at_tail = cache and placement == "tail" and bool(messages) and messages[-1]["role"] == "user"
    sent = [b for b in blocks if not (at_tail and b.layer == 2)]
    wire_system: list[dict[str, Any]] = [{"type": "text", "text": b.text} for b in sent]
    if cache:
        stable = [i for i, b in enumerate(blocks) if b.layer == 1]
        if stable:
            wire_system[stable[-1]] = {**wire_system[stable[-1]], "cache_control": dict(CACHE_MARK)}
        elif tools:
            tools[-1] = {**tools[-1], "cache_control": dict(CACHE_MARK)}
    if at_tail:
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        for i in users[-2:]:  # the previous request ended at the user turn before the last
            _mark_last_block(messages[i])
        layer2 = "\n".join(b.text for b in blocks if b.layer == 2)
        if layer2:
            messages[-1]["content"].append({"type": "text", "text": tail_text(layer2)})
    return WireLayout(wire_system, tools, messages)


def _mark_last_block(message: dict[str, Any]) -> None:
    content = message["content"]
    if content:
        content[-1] = {**content[-1], "cache_control": dict(CACHE_MARK)}
