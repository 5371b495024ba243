"""A LangChain reply's tokens as gr counts them: every token the model read or wrote,
cached or not, from the reply's ``usage_metadata`` (whose ``input_tokens`` include the
cached ones), else estimated from the text (a model that reports no usage)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from gr_notebook.messages import Usage

__all__ = ["CHARS_PER_TOKEN", "usage_of"]

CHARS_PER_TOKEN = 4
"""The estimate gr uses when a model reports no usage."""


def usage_of(reply: AIMessage, sent: Sequence[BaseMessage]) -> Usage:
    meta: Mapping[str, Any] | None = reply.usage_metadata
    if not meta:
        read = sum(len(str(m.content)) for m in sent) // CHARS_PER_TOKEN
        return Usage(input_tokens=read, output_tokens=len(str(reply.content)) // CHARS_PER_TOKEN)
    details = meta.get("input_token_details") or {}
    cache_read = int(details.get("cache_read") or 0)
    cache_write = int(details.get("cache_creation") or 0)
    return Usage(
        input_tokens=max(int(meta.get("input_tokens") or 0) - cache_read - cache_write, 0),
        output_tokens=int(meta.get("output_tokens") or 0),
        cache_creation_input_tokens=cache_write,
        cache_read_input_tokens=cache_read,
    )
