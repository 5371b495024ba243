"""The Messages API's streamed form of a whole message, for the local server.

A client that asks for ``"stream": true`` reads server-sent events: ``message_start`` (the
message with no content), for each content block a ``content_block_start``, its deltas and
a ``content_block_stop``, then ``message_delta`` (the stop reason and the output tokens) and
``message_stop``. This module turns the message dict the server would have answered with
into those events, block by block, so one script serves a client that streams (the Claude
Code CLI always does) and one that does not, with the same content:

- ``text`` → ``text_delta``;
- ``tool_use`` → ``input_json_delta`` (the input as JSON text, in pieces);
- ``thinking`` → ``thinking_delta`` then ``signature_delta``;
- any other block (``redacted_thinking``, server tool results) whole in its start event.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["CONTENT_TYPE", "encode", "message_events", "stream_body"]

CONTENT_TYPE = "text/event-stream"
CHUNK = 64
"""Characters per delta: long texts and inputs arrive in several pieces, as from the API."""


def message_events(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events that stream ``message`` (a whole Messages API response), in order."""
    usage = dict(message.get("usage") or {})
    output_tokens = int(usage.get("output_tokens", 0))
    head = copy.deepcopy({k: v for k, v in message.items() if k != "content"})
    head.update(content=[], stop_reason=None, stop_sequence=None)
    head["usage"] = {**usage, "output_tokens": min(output_tokens, 1)}
    yield {"type": "message_start", "message": head}
    for index, block in enumerate(message.get("content") or []):
        yield from _block_events(index, block)
    yield {
        "type": "message_delta",
        "delta": {
            "stop_reason": message.get("stop_reason"),
            "stop_sequence": message.get("stop_sequence"),
        },
        "usage": {"output_tokens": output_tokens},
    }
    yield {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        start: dict[str, Any] = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = json.dumps(block.get("input") or {})
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(raw)]
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in _pieces(block.get("thinking", ""))
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        start, deltas = dict(block), []
    yield {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def encode(events: Iterable[dict[str, Any]]) -> bytes:
    """Server-sent events: an ``event:`` line naming the type, a ``data:`` line of JSON."""
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


def stream_body(message: dict[str, Any]) -> bytes:
    """The whole streamed answer for ``message``, as the body of one response."""
    return encode(message_events(message))
