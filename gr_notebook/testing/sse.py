"""A message as the Messages API streams it, for the local server: server-sent events.

The encoder is generic over the content-block dicts the server would have answered without
streaming, so a new kind of block streams without a change here: ``text`` goes out as
``text_delta`` chunks, ``tool_use`` (and ``server_tool_use``) as ``input_json_delta`` chunks
of its input's JSON, ``thinking`` as ``thinking_delta`` chunks then one ``signature_delta``,
and any other block (``redacted_thinking``, a server tool's result) whole in its
``content_block_start``. The sequence is the API's: ``message_start`` (empty content, the
input usage), a ``ping``, each block's start / deltas / stop, ``message_delta`` (the stop
reason and the cumulative usage), ``message_stop``. An ``error`` event can cut it short.

Standard library only, like the server; the SDK's accumulator is what the tests check it
against.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

__all__ = ["DEFAULT_CHUNK_CHARS", "Frame", "encode", "error_frame", "message_frames"]

DEFAULT_CHUNK_CHARS = 24
"""Characters per delta: a few tokens, as the API sends them."""

Frame: TypeAlias = tuple[str, dict[str, Any]]
"""One server-sent event: its name and its JSON data (whose ``type`` is the same name)."""

_STREAMED_INPUT = frozenset({"tool_use", "server_tool_use"})


def encode(frame: Frame) -> bytes:
    name, data = frame
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def error_frame(error_type: str, message: str) -> Frame:
    """The API's mid-stream error, e.g. ``overloaded_error`` (a 529 had the stream not begun)."""
    return "error", {"type": "error", "error": {"type": error_type, "message": message}}


def message_frames(
    message: Mapping[str, Any], *, chunk_chars: int = DEFAULT_CHUNK_CHARS
) -> Iterator[Frame]:
    """The frames that stream ``message`` (a Messages API response body), in order."""
    if chunk_chars < 1:
        raise ValueError(f"chunk_chars must be at least 1, got {chunk_chars}")
    usage = dict(message.get("usage") or {})
    start_usage = {**usage, "output_tokens": min(1, int(usage.get("output_tokens", 0) or 0))}
    head = {k: v for k, v in message.items() if k not in ("content", "usage")}
    started = {**head, "content": [], "stop_reason": None, "stop_sequence": None}
    yield "message_start", {"type": "message_start", "message": {**started, "usage": start_usage}}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message.get("content") or ()):
        yield from _block_frames(index, block, chunk_chars)
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": None}
    if message.get("stop_sequence") is not None:
        delta["stop_sequence"] = message["stop_sequence"]
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def _block_frames(index: int, block: Mapping[str, Any], size: int) -> Iterator[Frame]:
    kind = block.get("type")
    if kind == "text":
        yield _start(index, {**block, "text": ""})
        yield from _deltas(index, "text_delta", "text", str(block.get("text", "")), size)
    elif kind in _STREAMED_INPUT:
        yield _start(index, {**block, "input": {}})
        raw = json.dumps(block.get("input") or {})
        yield from _deltas(index, "input_json_delta", "partial_json", raw, size)
    elif kind == "thinking":
        yield _start(index, {**block, "thinking": "", "signature": ""})
        thinking = str(block.get("thinking", ""))
        yield from _deltas(index, "thinking_delta", "thinking", thinking, size)
        signature = {"type": "signature_delta", "signature": str(block.get("signature", ""))}
        yield _delta(index, signature)
    else:  # redacted thinking, a server tool's result: whole, in the start
        yield _start(index, dict(block))
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _start(index: int, block: dict[str, Any]) -> Frame:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def _delta(index: int, delta: dict[str, Any]) -> Frame:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _deltas(index: int, kind: str, field: str, value: str, size: int) -> Iterator[Frame]:
    for at in range(0, len(value), size):
        yield _delta(index, {"type": kind, field: value[at : at + size]})
