"""Content blocks, messages and usage, in the shape of the Anthropic Messages API.

Keeping the core in the wire shape means the Anthropic adapter maps one to one, and a
recorded conversation reads the same in tests, notebooks and the real API. The JSON form of
a message (:meth:`Message.to_json`) is that wire shape too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from gr_notebook.eventdata import plain_json

__all__ = [
    "THINKING_BLOCKS",
    "ContentBlock",
    "Message",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "approx_tokens",
    "block_json",
    "block_tokens",
    "message_tokens",
]

Role: TypeAlias = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Claude's extended thinking, kept as the API sent it: the signature lets the API check
    that the block comes back unchanged, which it requires in a tool loop."""

    thinking: str
    signature: str
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class RedactedThinkingBlock:
    """Thinking the API encrypted (``data`` is opaque): sent back unchanged, never shown."""

    data: str
    type: Literal["redacted_thinking"] = "redacted_thinking"


ContentBlock: TypeAlias = (
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock
)
THINKING_BLOCKS = (ThinkingBlock, RedactedThinkingBlock)
"""The thinking kinds, for ``isinstance``: both must go back where the API asks for them."""


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: tuple[ContentBlock, ...]

    @classmethod
    def user(cls, *blocks: ContentBlock | str) -> Message:
        return cls("user", tuple(TextBlock(b) if isinstance(b, str) else b for b in blocks))

    @classmethod
    def assistant(cls, *blocks: ContentBlock | str) -> Message:
        return cls("assistant", tuple(TextBlock(b) if isinstance(b, str) else b for b in blocks))

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @property
    def thinking(self) -> tuple[ThinkingBlock | RedactedThinkingBlock, ...]:
        """The thinking blocks, redacted ones included (``text`` never includes them)."""
        return tuple(b for b in self.content if isinstance(b, THINKING_BLOCKS))

    @property
    def opens_with_thinking(self) -> bool:
        """Whether the first block is thinking: what the API asks of the assistant message
        that opens a tool loop, when thinking is on."""
        return bool(self.content) and isinstance(self.content[0], THINKING_BLOCKS)

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "content": [block_json(b) for b in self.content]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        role = data["role"]
        if role not in ("user", "assistant"):
            raise ValueError(f"a message's role is user or assistant, not {role!r}")
        return cls(role, tuple(_block_of(b) for b in data["content"]))


def block_json(block: ContentBlock) -> dict[str, Any]:
    """A block in the wire shape (thinking blocks exactly as the API sent them)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": plain_json(block.input),
        }
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
        "is_error": block.is_error,
    }


def _block_of(data: Mapping[str, Any]) -> ContentBlock:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(str(data["text"]))
    if kind == "tool_use":
        return ToolUseBlock(str(data["id"]), str(data["name"]), dict(data["input"]))
    if kind == "tool_result":
        return ToolResultBlock(
            str(data["tool_use_id"]), str(data["content"]), bool(data["is_error"])
        )
    if kind == "thinking":
        return ThinkingBlock(str(data["thinking"]), str(data["signature"]))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(str(data["data"]))
    raise ValueError(f"unknown content block type {kind!r}")


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


def approx_tokens(text: str) -> int:
    """A deterministic token estimate (about four characters a token) for offline models."""
    return math.ceil(len(text) / 4) if text else 0


def block_tokens(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return approx_tokens(block.text)
    if isinstance(block, ToolUseBlock):
        try:
            encoded = json.dumps(dict(block.input), ensure_ascii=False, default=str)
        except (RecursionError, ValueError):  # nested too deep, or circular: a rough size
            encoded = _rough_json(block.input)
        return approx_tokens(block.name) + approx_tokens(encoded)
    if isinstance(block, ThinkingBlock):  # as sent back: the text and its signature
        return approx_tokens(block.thinking) + approx_tokens(block.signature)
    if isinstance(block, RedactedThinkingBlock):
        return approx_tokens(block.data)
    return approx_tokens(block.content) + 2


def _rough_json(value: Any) -> str:
    """A stand-in of about the JSON's length, built without recursion, for inputs that
    ``json.dumps`` cannot encode (the loop refuses those calls; the estimate must not fail)."""
    parts: list[str] = []
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            parts.append("[]")
            if isinstance(item, Mapping):
                parts.extend(f'"{k}":' for k in item)
                stack.extend(item.values())
            else:
                stack.extend(item)
        else:
            parts.append(str(item))
    return ",".join(parts)


MESSAGE_OVERHEAD = 4
"""Tokens a message costs beyond its blocks (role and framing), in the offline estimate."""


def message_tokens(message: Message | Sequence[ContentBlock]) -> int:
    blocks = message.content if isinstance(message, Message) else message
    return MESSAGE_OVERHEAD + sum(block_tokens(b) for b in blocks)
