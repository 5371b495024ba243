"""One model reply of an SDK session, as the message stream reports it.

With ``include_partial_messages`` (what :meth:`GuardrailHooks.options` asks for) the SDK
passes on the API's own stream events, and a reply is read whole from them: its usage as it
starts, its text and tool uses, its stop reason and final output tokens as it ends. Without
them the CLI's ``AssistantMessage`` is all there is: one per content block, each with the
usage of the reply's start, so the first one stands for the reply (its output tokens are
then understated until the session's total settles them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gr_notebook.messages import Usage

__all__ = ["Reply"]


def _usage(raw: Any, previous: Usage | None = None) -> Usage:
    raw = raw if isinstance(raw, Mapping) else {}
    base = previous or Usage()

    def take(key: str, default: int) -> int:
        value = raw.get(key)
        return int(value) if isinstance(value, int | float) else default

    return Usage(
        take("input_tokens", base.input_tokens),
        take("output_tokens", base.output_tokens),
        take("cache_creation_input_tokens", base.cache_creation_input_tokens),
        take("cache_read_input_tokens", base.cache_read_input_tokens),
    )


@dataclass(slots=True)
class Reply:
    message_id: str
    model: str
    usage: Usage
    started: float
    text: str = ""
    tool_ids: list[str] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token the model read, cached or not."""
        u = self.usage
        return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens

    @classmethod
    def of_message(cls, message: Any, model: str, started: float) -> Reply:
        """A reply from its first ``AssistantMessage`` (the stream events are off)."""
        blocks = getattr(message, "content", ()) or ()
        return cls(
            message_id=str(getattr(message, "message_id", None) or ""),
            model=str(getattr(message, "model", "") or model),
            usage=_usage(getattr(message, "usage", None)),
            started=started,
            text="".join(str(b.text) for b in blocks if type(b).__name__ == "TextBlock"),
            tool_ids=[str(b.id) for b in blocks if type(b).__name__ == "ToolUseBlock"],
            stop_reason=getattr(message, "stop_reason", None),
        )

    @classmethod
    def starting(cls, event: Mapping[str, Any], model: str, started: float) -> Reply:
        """A reply from its ``message_start`` event, to be filled by :meth:`add`."""
        message = event.get("message")
        message = message if isinstance(message, Mapping) else {}
        return cls(
            message_id=str(message.get("id") or ""),
            model=str(message.get("model") or model),
            usage=_usage(message.get("usage")),
            started=started,
        )

    def add(self, event: Mapping[str, Any]) -> bool:
        """Take one stream event of this reply; True once it has ended (``message_stop``)."""
        kind = event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                self.tool_ids.append(str(block.get("id", "")))
        elif kind == "content_block_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta":
                self.text += str(delta.get("text", ""))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self.usage = _usage(event.get("usage"), self.usage)
        return kind == "message_stop"
