"""A local stand-in for an OpenAI-compatible chat-completions server (Ollama, vLLM,
llama.cpp, LM Studio, OpenAI), serving scripted turns.

It is :class:`MessagesServer` with another wire format: the same lifecycle, script, faults
(429 with ``retry-after``, 500, malformed JSON, slow and hung responses, and the stream
faults, endless and injected streams included) and recorded requests; only the routes, the
validation and the JSON shapes differ. With ``"stream": true`` it answers in chunks
(``chat.completion.chunk``, then ``[DONE]``): a reasoning model's ``reasoning_content`` and
the text in pieces, each tool call's name then its arguments in pieces, the finish reason,
and the usage in a last chunk when ``stream_options.include_usage`` asks for it. It also
plays the mistakes small local models make: tool-call arguments that are not JSON
(:func:`bad_arguments`), an unknown tool (a plain ``gr.tool_call`` to a name the agent lacks)
and an empty reply (:func:`empty_reply`). Standard library only; 127.0.0.1 only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.testing.local_http import Reply, json_reply
from gr_notebook.testing.messages_server import MessagesServer, Turn, event_stream
from gr_notebook.testing.request_rules import InvalidRequest, require
from gr_notebook.testing.sse import DEFAULT_CHUNK_CHARS

__all__ = ["ChatServer", "bad_arguments", "chat_chunks", "empty_reply"]

RAW_MESSAGE = "chat_message"
"""The key of a :class:`ModelResponse`'s ``extra`` that holds a raw chat message to send as
it is: how a script says what a ModelResponse cannot (arguments that are not JSON)."""

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def bad_arguments(name: str, arguments: str = '{"path": "notes.md",') -> ModelResponse:
    """A turn whose one tool call has arguments that are not valid JSON."""
    call = {
        "id": "call_bad_0",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return ModelResponse((), "tool_use", extra={RAW_MESSAGE: message})


def empty_reply() -> ModelResponse:
    """A turn with no text and no tool call, as small models sometimes send."""
    return ModelResponse((), "end_turn", extra={RAW_MESSAGE: {"role": "assistant", "content": ""}})


class ChatServer(MessagesServer):
    """Serves scripted turns over ``POST /v1/chat/completions``; ``GET /v1/models`` lists
    ``models``. With ``models`` given, a request for another model gets the 404 servers send;
    with ``api_key`` given, a request without ``Authorization: Bearer <api_key>`` gets 401.
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        models: Iterable[str] | None = None,
        api_key: str | None = None,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
    ) -> None:
        super().__init__(turns, chunk_chars=chunk_chars)
        self.models = None if models is None else tuple(models)
        self.api_key = api_key

    def dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Reply]:
        number, body = self._record(method, path, headers, raw)
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return number, self._error_reply(401, "Incorrect API key provided", number)
        if (method, path) == ("GET", "/v1/models"):
            listed = [
                {"id": m, "object": "model", "created": 0, "owned_by": "local"}
                for m in self.models or ()
            ]
            return number, json_reply({"object": "list", "data": listed})
        if (method, path) != ("POST", "/v1/chat/completions"):
            return number, self._error_reply(
                404, f"local server: no route for {method} {path}", number
            )
        if not isinstance(body, dict):
            return number, self._error_reply(400, "the request body must be a JSON object", number)
        try:
            _validate(body)
        except InvalidRequest as invalid:
            return number, self._error_reply(400, str(invalid), number)
        if self.models is not None and body["model"] not in self.models:
            message = f"model '{body['model']}' not found"
            return number, self._error_reply(404, message, number, "model_not_found")
        return number, self._next_turn(body, number)

    def _message(
        self, response: ModelResponse, body: dict[str, Any], turn_number: int
    ) -> dict[str, Any]:
        message = response.extra.get(RAW_MESSAGE)
        if not isinstance(message, Mapping):
            message = _chat_message(response, turn_number)
        finish = (
            "tool_calls" if message.get("tool_calls") else _FINISH.get(response.stop_reason, "stop")
        )
        prompt = _tokens(json.dumps([body.get("messages"), body.get("tools")]))
        completion = _tokens(json.dumps(message))
        if response.usage is not None:
            prompt, completion = response.usage.input_tokens, response.usage.output_tokens
        return {
            "id": f"chatcmpl-local-{turn_number}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": dict(message), "finish_reason": finish, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _stream_reply(self, message: dict[str, Any], body: dict[str, Any]) -> Reply:
        options = body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = chat_chunks(message, chunk_chars=self.chunk_chars, include_usage=usage)
        return event_stream([*(_data(chunk) for chunk in chunks), b"data: [DONE]\n\n"])

    def _keepalive_event(self, body: dict[str, Any]) -> bytes:
        """A chunk that says nothing: what a server that keeps a stream open sends."""
        delta = {"index": 0, "delta": {"content": ""}, "finish_reason": None}
        chunk = {
            "id": "chatcmpl-local-keepalive",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [delta],
        }
        return _data(chunk)

    def _stream_error_event(self, error_type: str, message: str) -> bytes:
        """What OpenAI-compatible servers send mid-stream: a data line with an ``error``."""
        kind = "server_error" if error_type in ("api_error", "overloaded_error") else error_type
        return _data({"error": {"message": message, "type": kind, "param": None, "code": None}})

    def _error_reply(
        self,
        status: int,
        message: str,
        number: int,
        error_type: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> Reply:
        kind = "invalid_request_error" if status < 500 else "server_error"
        code = error_type if error_type == "model_not_found" else None
        payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        return Reply(status, json.dumps(payload).encode(), headers)


def chat_chunks(
    completion: Mapping[str, Any], *, chunk_chars: int, include_usage: bool = False
) -> list[dict[str, Any]]:
    """The chunks that stream ``completion`` (a ``chat.completion`` body), in order."""
    head = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion.get("created", 0),
        "model": completion["model"],
    }
    [choice] = completion["choices"]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for field in ("reasoning_content", "reasoning"):  # a reasoning model's thinking, first
        thought = message.get(field)
        if isinstance(thought, str):
            chunks += [chunk({field: piece}) for piece in _pieces(thought, chunk_chars)]
    content = message.get("content") or ""
    chunks += [chunk({"content": piece}) for piece in _pieces(content, chunk_chars)]
    for i, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        opened = {"name": function.get("name"), "arguments": ""}
        chunks.append(chunk({"tool_calls": [{**_call_head(call, i), "function": opened}]}))
        for piece in _pieces(str(function.get("arguments") or ""), chunk_chars):
            more = {"index": i, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [more]}))
    chunks.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": completion.get("usage")})
    return chunks


def _call_head(call: Mapping[str, Any], index: int) -> dict[str, Any]:
    return {"index": index, "id": call.get("id"), "type": call.get("type", "function")}


def _pieces(text: str, size: int) -> list[str]:
    return [text[at : at + size] for at in range(0, len(text), size)]


def _data(payload: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _chat_message(response: ModelResponse, turn_number: int) -> dict[str, Any]:
    text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    calls = []
    for i, block in enumerate(response.content):
        if isinstance(block, ToolUseBlock):
            arguments = json.dumps(json.loads(json.dumps(block.input, default=dict)))
            call_id = block.id or f"call_local_{turn_number}_{i}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": arguments},
                }
            )
        elif not isinstance(block, TextBlock):
            raise TypeError(f"{type(block).__name__} cannot appear in an assistant response")
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _validate(body: dict[str, Any]) -> None:
    """Refuse what chat-completions servers refuse: the checks a client bug would trip."""
    model = body.get("model")
    require(isinstance(model, str) and model != "", "model: must be a non-empty string")
    require(isinstance(body.get("stream", False), bool), "stream: must be a boolean")
    options = body.get("stream_options")
    require(options is None or isinstance(options, dict), "stream_options: must be an object")
    require(
        options is None or body.get("stream") is True,
        "stream_options: only allowed when stream is true",
    )
    messages = body.get("messages")
    require(isinstance(messages, list) and bool(messages), "messages: must be a non-empty list")
    pending: set[str] = set()
    for i, message in enumerate(messages or ()):
        require(isinstance(message, dict), f"messages.{i}: must be an object")
        role = message.get("role")
        require(role in _ROLES, f"messages.{i}.role: unknown role {role!r}")
        if role == "tool":
            call_id = message.get("tool_call_id")
            require(
                call_id in pending,
                f"messages.{i}: a tool message must answer a tool_call_id of the assistant "
                f"message before it, got {call_id!r}",
            )
            pending.discard(call_id)
            require(
                isinstance(message.get("content"), str), f"messages.{i}.content: must be a string"
            )
            continue
        require(not pending, f"messages.{i}: tool_calls {sorted(pending)} were not answered")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            require(
                isinstance(function.get("arguments"), str),
                f"messages.{i}.tool_calls: arguments must be a string of JSON",
            )
            pending.add(call.get("id"))
    for j, tool in enumerate(body.get("tools") or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        require(
            isinstance(tool, dict)
            and tool.get("type") == "function"
            and isinstance(function, dict)
            and bool(function.get("name")),
            f"tools.{j}: must be {{'type': 'function', 'function': {{'name': ...}}}}",
        )
