"""One Messages API request, streamed: the SDK's stream helper (``messages.stream``) reads
the server-sent events and accumulates them into the same ``Message`` a plain ``create``
returns, so what the adapter makes of it (content, usage, stop reason, cost) is unchanged.

On the way, the text and thinking deltas go to whoever watches the run
(:class:`~gr_notebook.models.call_context.TurnStream`), and nothing is built when nobody
does. A stream that breaks off — the API's ``error`` event mid-stream, a connection cut, a
body that ends before ``message_stop`` — or one the SDK cannot read (bytes that are not
UTF-8, a delta for a block that never started) raises
:class:`~gr_notebook.models.sdk_calls.StreamInterrupted`, which the adapter retries as it
retries a 529: the whole request again, since a partial tool-use or thinking block cannot be
recovered. A cancelled run leaves the ``async
with`` at once, and the SDK closes the response, so the connection is closed too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gr_notebook.models.call_context import TurnStream
from gr_notebook.models.sdk_calls import (
    MALFORMED_STREAM,
    StreamInterrupted,
    failure,
    malformed,
    transport_error,
)

__all__ = ["RETRIED_STREAM_ERRORS", "stream_message"]

#: Error events retried mid-stream: the types of the statuses retried before a stream (429,
#: 500, 504, 529). Any other error type mid-stream fails the call, as its status would.
RETRIED_STREAM_ERRORS = frozenset(
    {"rate_limit_error", "api_error", "timeout_error", "overloaded_error"}
)


async def stream_message(
    api: Any,
    body: Mapping[str, Any],
    options: Mapping[str, Any],
    stream: TurnStream | None,
    *,
    key: str,
) -> tuple[Any, str | None]:
    """Send ``body`` streamed; returns the accumulated message and its request id. An
    error status before the stream begins is raised by the SDK as it is without streaming."""
    import anthropic

    broken, network = anthropic.APIStatusError, transport_error(anthropic)
    async with api.stream(**body, **options) as events:
        ended = False
        try:
            async for event in events:
                kind = event.type
                if kind == "message_stop":
                    ended = True
                elif stream is not None and stream.active:
                    _relay(event, kind, stream)
        except broken as exc:  # the SDK raises the API's error event as a status error
            raise _interrupted(exc, key) from exc
        except network as exc:
            raise StreamInterrupted(
                f"the connection broke mid-stream ({type(exc).__name__}: {exc})"
            ) from exc
        except json.JSONDecodeError:  # an event that is not JSON: retried as a body that is not
            raise
        except MALFORMED_STREAM as exc:
            raise malformed(exc) from exc
        if not ended:
            raise StreamInterrupted("the stream ended before its message_stop event")
        return events.current_message_snapshot, events.request_id


def _relay(event: Any, kind: str, stream: TurnStream) -> None:
    """The pieces a person watching wants: text and thinking as they come, and which tool
    a tool use calls (its input, often long, shows in the finished turn)."""
    if kind == "content_block_delta":
        delta = event.delta
        if delta.type == "text_delta":
            stream.send("text", delta.text)
        elif delta.type == "thinking_delta":
            stream.send("thinking", delta.thinking)
    elif kind == "content_block_start":
        block = event.content_block
        if block.type == "tool_use":
            stream.send("tool_use", block.name)
        elif block.type == "redacted_thinking":
            stream.send("redacted_thinking")


def _interrupted(error: Any, key: str) -> Exception:
    """An error event mid-stream: retried when its type is one the API sends for a status
    that is retried, else the call fails with what the API said."""
    body = getattr(error, "body", None)
    detail = body.get("error") if isinstance(body, Mapping) else None
    kind = str(getattr(error, "type", None) or (detail or {}).get("type") or "error")
    message = str(getattr(error, "api_message", None) or (detail or {}).get("message") or "")
    if kind in RETRIED_STREAM_ERRORS:
        return StreamInterrupted(f"{kind} mid-stream: {message}".rstrip(": "))
    return failure(f"Anthropic API error mid-stream ({kind}): {message}", error, key)
