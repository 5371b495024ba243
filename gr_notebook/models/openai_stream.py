"""One chat-completions request, streamed (``stream=True``, with the usage asked for in a last
chunk): the openai SDK's own accumulator (``ChatCompletionStreamState``) adds the chunks up
into the ``ChatCompletion`` a plain ``create`` returns, so the adapter's reading of it is
unchanged.

The text, the reasoning some local models stream beside it (``reasoning_content`` /
``reasoning``, shown as thinking) and each tool call's name go to whoever watches the run,
and nothing is built when nobody does. An ``error`` chunk mid-stream, a stream that ends
before a finish reason, or one the SDK cannot read (bytes that are not UTF-8, a tool call
that never started) raises
:class:`~gr_notebook.models.sdk_calls.StreamInterrupted`, retried as a 5xx is; the SDK
itself turns a connection broken mid-stream into the ``APIConnectionError`` the adapter
already retries.

The completion returned is the accumulated snapshot itself, not the SDK's parse of it,
which raises on a ``length`` or ``content_filter`` finish: the adapter reads those as the
``max_tokens`` and ``refusal`` stops they are without streaming.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gr_notebook.models.call_context import TurnStream
from gr_notebook.models.sdk_calls import MALFORMED_STREAM, StreamInterrupted, failure, malformed

__all__ = ["REASONING_FIELDS", "stream_completion"]

#: Where OpenAI-compatible servers put a reasoning model's thinking in a chunk's delta
#: (vLLM, llama.cpp and DeepSeek: ``reasoning_content``; Ollama and OpenRouter: ``reasoning``).
REASONING_FIELDS = ("reasoning_content", "reasoning")
#: Error types mid-stream that a retry cannot mend: the request itself is wrong.
_FATAL_STREAM_ERRORS = frozenset({"invalid_request_error", "authentication_error"})


async def stream_completion(
    api: Any, body: Mapping[str, Any], stream: TurnStream | None, *, server: str, key: str
) -> tuple[Any, str | None]:
    """Send ``body`` streamed; returns the accumulated completion and its request id."""
    import openai
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    chunks = await api.create(**body, stream=True, stream_options={"include_usage": True})
    finished = False
    async with chunks:
        try:
            async for chunk in chunks:
                state.handle_chunk(chunk)
                for choice in chunk.choices:
                    finished = finished or choice.finish_reason is not None
                    if stream is not None and stream.active:
                        _relay(choice.delta, stream)
        except (openai.APIStatusError, openai.APIConnectionError):
            raise
        except openai.APIError as exc:  # the server's error chunk mid-stream
            raise _interrupted(exc, server, key) from exc
        except json.JSONDecodeError:  # a chunk that is not JSON: retried as a body that is not
            raise
        except MALFORMED_STREAM as exc:
            raise malformed(exc) from exc
        request_id = chunks.response.headers.get("x-request-id")
    if not finished:
        raise StreamInterrupted("the stream ended before a finish_reason")
    return state.current_completion_snapshot, request_id


def _relay(delta: Any, stream: TurnStream) -> None:
    for field in REASONING_FIELDS:
        thought = getattr(delta, field, None)
        if isinstance(thought, str) and thought:
            stream.send("thinking", thought)
    if delta.content:
        stream.send("text", delta.content)
    for call in delta.tool_calls or ():
        function = call.function
        if function is not None and function.name:
            stream.send("tool_use", function.name)


def _interrupted(error: Any, server: str, key: str) -> Exception:
    body = getattr(error, "body", None)
    kind = str(body.get("type") or "") if isinstance(body, Mapping) else ""
    message = str(getattr(error, "message", "") or error)
    if kind in _FATAL_STREAM_ERRORS:
        return failure(f"the server at {server} failed mid-stream ({kind}): {message}", error, key)
    return StreamInterrupted(f"{kind or 'error'} mid-stream: {message}")
