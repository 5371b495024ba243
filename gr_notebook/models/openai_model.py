"""Any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp's server,
LM Studio) through the official ``openai`` SDK: the same agent, tools and guardrails.

Layers 1 and 2 become the system message (layer 1 first), layer 3 the function tools, layers
4 and 5 the messages; tool results become ``role: "tool"`` messages. Retries, the network
guard and key redaction are the Anthropic adapter's (:mod:`~gr_notebook.models.sdk_calls`).

Every request is streamed (``stream=True``, the default; :mod:`~gr_notebook.models.openai_stream`),
so a person watching sees the text as a local model writes it; the response is the same.

Small local models make mistakes; none of them ends the run. Arguments that are not JSON
become a tool use the tool step refuses with the reason (:data:`INVALID_ARGUMENTS`); an
unknown tool is refused by the registry; an empty reply is asked again, as a retry.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gr_notebook.errors import ConfigError, ModelError
from gr_notebook.eventdata import plain_json
from gr_notebook.events import ModelRetryEvent
from gr_notebook.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from gr_notebook.models.base import (
    DEFAULT_CONTEXT_WINDOW,
    INVALID_ARGUMENTS,
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolSpec,
    invalid_arguments,
)
from gr_notebook.models.call_context import TurnStream, report, turn_stream
from gr_notebook.models.loop_clients import LoopClients
from gr_notebook.models.network import check_network, guard_http_client, guard_request
from gr_notebook.models.openai_stream import stream_completion
from gr_notebook.models.pricing import Price, PriceTable, warn_unpriced
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.models.sdk_calls import Vendor, check_options, send_with_retries
from gr_notebook.models.secrets import check_key, redact

if TYPE_CHECKING:
    import openai

__all__ = ["EMPTY_REPLY_NUDGE", "LOCAL_KEY", "MISSING_KEY", "OFFICIAL_URL", "OpenAIModel"]

OFFICIAL_URL = "https://api.openai.com/v1"
LOCAL_KEY = "local-server-ignores-this-key"
"""Sent when a server other than OpenAI's is given no key: the SDK needs one, they ignore it."""
MISSING_KEY = (
    "no OpenAI API key: set the OPENAI_API_KEY environment variable (or pass api_key=...), "
    "or point base_url at a local server (e.g. Ollama's http://localhost:11434/v1)"
)
EMPTY_REPLY_NUDGE = (
    "Your reply was empty: no text and no tool call. Call one of the tools to go on with the "
    "work, or answer in text if you are done."
)
EMPTY_REPLY_RETRIES = 2
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIModel:
    """``gr.Agent(model=gr.OpenAIModel("qwen2.5:7b", base_url="http://localhost:11434/v1"))``,
    or the spec string ``"openai:qwen2.5:7b@http://localhost:11434/v1"``.

    The key is ``api_key`` or ``OPENAI_API_KEY``; a server other than OpenAI's needs none.
    ``timeout`` is seconds per request, the whole of it, streamed or not: a try that has not
    ended by then is closed and retried as a timeout (None: only the client's own bounds,
    which bound each read, not the request). ``client=`` takes an
    ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) configured elsewhere, used as it is.
    ``stream=False`` sends each request whole, for a server that cannot stream.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_tokens: int = 4096,
        max_retries: int = 4,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        prices: PriceTable | Mapping[str, Price] | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        thinking: object = None,
        stream: bool = True,
    ) -> None:
        if thinking is not None:  # a keyword here, so the mistake gets a line, not a TypeError
            raise ConfigError(
                "OpenAIModel has no thinking option: a chat-completions reasoning model "
                "reasons on its own; for Claude's extended thinking use "
                "gr.AnthropicModel(model, thinking=4096)"
            )
        self.model, self.max_tokens, self.timeout = check_options(
            "OpenAIModel",
            model,
            "'gpt-4.1' or 'qwen2.5:7b'",
            max_tokens=max_tokens,
            timeout=timeout,
        )
        if client is not None and (api_key is not None or base_url is not None):
            raise ConfigError(
                "pass either client= or api_key=/base_url=, not both: a client passed in is "
                "used as it is"
            )
        if client is not None:
            url = _client_url(client)
        else:
            url = (base_url or os.environ.get("OPENAI_BASE_URL") or OFFICIAL_URL).strip()
            url = url.rstrip("/")
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ConfigError(
                f"base_url must be an http(s) URL such as http://localhost:11434/v1, got {url!r}"
            )
        self.base_url = url
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices or {})
        self._unpriced: set[str] = set()
        self.context_window = context_window
        self.stream = bool(stream)
        # Per request, so that it holds for a client passed in too.
        self._per_request = {} if self.timeout is None else {"timeout": self.timeout}
        if client is not None:
            given = getattr(client, "api_key", None)
            self._key = check_key(given, "the client passed in") if given else ""
            # The guard sees each request the client sends, redirects included.
            guard_http_client(getattr(client, "_client", None))
            self._clients = LoopClients(client, None, sdk="openai")
        else:
            self._key = _api_key(api_key, official=_is_official(url))
            options = {"api_key": self._key, "base_url": url, "max_retries": 0}
            self._clients = LoopClients(None, lambda: _new_client(options), sdk="openai")

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def price(self) -> Price | None:
        """What this model's calls cost, from its price table; None when unknown."""
        return self.prices.price_of(self.model)

    def redact_key(self, text: str) -> str:
        """``text`` without this model's API key (a tool's result that quotes it)."""
        return redact(text, self._key)

    def __repr__(self) -> str:
        return (
            f"OpenAIModel({self.model!r}, base_url={self.base_url!r}, "
            f"max_tokens={self.max_tokens}, max_retries={self.retry.max_retries}, "
            f"stream={self.stream})"
        )

    @property
    def _api(self) -> Any:
        """This event loop's chat-completions resource, untyped: the body is plain JSON."""
        return self._clients.current().chat.completions

    # -- the call ------------------------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        params = self.request_params(request)
        check_network(self.base_url)
        stream = turn_stream()
        spent = Usage()
        for attempt in range(EMPTY_REPLY_RETRIES + 1):
            completion, request_id = await send_with_retries(
                lambda body=params: self._send(body, stream),  # type: ignore[misc]
                what="chat.completions.create",
                vendor=self._vendor(),
                policy=self.retry,
                key=self._key,
                timeout=self.timeout,
                fatal_hint=self._fatal_hint,
            )
            if stream is not None:
                stream.keep()
            response = self._response(completion, spent, request_id)
            if response.content or attempt == EMPTY_REPLY_RETRIES:
                return response
            spent = response.usage or spent
            report(
                ModelRetryEvent(
                    attempt=attempt + 1,
                    max_retries=EMPTY_REPLY_RETRIES,
                    operation="chat.completions.create",
                    error_type="EmptyReply",
                    status=None,
                    retry_after=None,
                    delay_s=0.0,
                    message="the model's reply had no text and no tool call; asked again",
                )
            )
            params = {**params, "messages": [*params["messages"], _nudge()]}
        raise AssertionError("unreachable")  # pragma: no cover

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The chat-completions body for ``request``: what is sent, as plain JSON values."""
        system = "\n\n".join(
            b.text for b in sorted(request.system, key=lambda b: b.layer) if b.text.strip()
        )
        messages = [{"role": "system", "content": system}] if system else []
        messages += _messages(request.messages)
        # OpenAI's own endpoint wants the newer name (its reasoning models refuse the old one);
        # the local servers know the old one.
        limit = "max_completion_tokens" if _is_official(self.base_url) else "max_tokens"
        params: dict[str, Any] = {"model": self.model, "messages": messages, limit: self.max_tokens}
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
        return params

    async def _send(self, body: Mapping[str, Any], stream: TurnStream | None) -> tuple[Any, Any]:
        """One try of a request: streamed (the completion and its request id), or whole."""
        if stream is not None:
            stream.attempt()
        body = {**body, **self._per_request}
        if self.stream:
            return await stream_completion(
                self._api, body, stream, server=self.base_url, key=self._key
            )
        completion = await self._api.create(**body)
        return completion, getattr(completion, "_request_id", None)

    def _vendor(self) -> Vendor:
        import openai

        return Vendor(
            f"the server at {self.base_url}",
            openai.APIStatusError,
            (openai.APIConnectionError, openai.APIResponseValidationError),
            self._status_message,
        )

    def _status_message(self, error: Any) -> str:
        status = int(error.status_code)
        body = getattr(error, "body", None)
        detail = str(body.get("message", "") if isinstance(body, Mapping) else "") or str(error)
        if status == 401:
            return (
                f"the server at {self.base_url} rejected the API key (401); set OPENAI_API_KEY "
                "or pass api_key=... with a key it accepts"
            )
        if status == 404:
            code = str(body.get("code", "") if isinstance(body, Mapping) else "")
            if "model" in code or "model" in detail.lower():
                return (
                    f"the server at {self.base_url} has no model {self.model!r} (404: {detail}); "
                    f"use a model it serves (GET {self.base_url}/models lists them)"
                )
            return (
                f"nothing at {self.base_url} answers chat completions (404 for "
                "/chat/completions): point base_url at an OpenAI-compatible server, "
                "usually ending in /v1 (e.g. http://localhost:11434/v1)"
            )
        return f"the server at {self.base_url} answered {status}: {detail}"

    def _fatal_hint(self, error: Exception) -> str | None:
        """A connection refused is a wrong ``base_url`` or a server that is not running:
        retrying it for a minute would only delay the message."""
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ == "ConnectError":
                return (
                    f"could not connect to {self.base_url}: is the server running there? "
                    "check base_url (e.g. Ollama's is http://localhost:11434/v1)"
                )
            cause = cause.__cause__ or cause.__context__
        return None

    def _response(self, completion: Any, spent: Usage, request_id: Any) -> ModelResponse:
        if not getattr(completion, "choices", None):
            raise ModelError(
                f"the server at {self.base_url} answered without choices: it does not speak "
                "the chat-completions API; point base_url at an OpenAI-compatible server"
            )
        choice = completion.choices[0]
        message = choice.message
        content: list[ContentBlock] = []
        if isinstance(message.content, str) and message.content.strip():
            content.append(TextBlock(message.content))
        for i, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call: not one of ours
                continue
            call_id = call.id or f"call_{completion.id}_{i}"
            content.append(ToolUseBlock(call_id, function.name, _arguments(function.arguments)))
        if not content and str(choice.finish_reason) == "content_filter":  # not an empty reply
            raise ModelError(
                f"the server at {self.base_url} stopped the reply with its content filter "
                "(finish_reason content_filter) before the model wrote anything; reword the "
                "instructions or the files the agent reads, then start the job again"
            )
        raw = completion.usage
        cached = 0
        if raw is not None and raw.prompt_tokens_details is not None:
            cached = int(raw.prompt_tokens_details.cached_tokens or 0)
        prompt = int(raw.prompt_tokens or 0) if raw is not None else 0
        output = int(raw.completion_tokens or 0) if raw is not None else 0
        usage = spent + Usage(prompt - cached, output, cache_read_input_tokens=cached)
        priced_as = str(completion.model or self.model)
        cost = self.prices.cost(priced_as, usage)
        if math.isnan(cost):
            warn_unpriced(priced_as, self._unpriced)
        extra: dict[str, Any] = {"cost_usd": None if math.isnan(cost) else cost}
        if request_id:
            extra["request_id"] = request_id
        has_calls = any(isinstance(b, ToolUseBlock) for b in content)
        stop = "tool_use" if has_calls else _STOP_REASONS.get(str(choice.finish_reason), "end_turn")
        if stop == "tool_use" and not has_calls:
            stop = "end_turn"
        return ModelResponse(tuple(content), stop, usage, self.name, extra)


def _is_official(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() == "api.openai.com"


def _api_key(api_key: str | None, *, official: bool) -> str:
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    if key and key.strip():
        return check_key(key, "api_key=" if api_key is not None else "OPENAI_API_KEY")
    if official:
        raise ConfigError(MISSING_KEY)
    return LOCAL_KEY


def _client_url(client: object) -> str:
    """The base URL of a client passed in; refuses what is not the async OpenAI client."""
    import openai

    if isinstance(client, openai.OpenAI) or not hasattr(client, "chat"):
        raise ConfigError(
            f"client must be an openai.AsyncOpenAI (the async client), got {type(client).__name__}"
        )
    return str(getattr(client, "base_url", "")).rstrip("/")


def _new_client(options: Mapping[str, Any]) -> openai.AsyncOpenAI:
    import openai

    # The network guard on every request the client sends, redirects included.
    http_client = openai.DefaultAsyncHttpxClient(event_hooks={"request": [guard_request]})
    return openai.AsyncOpenAI(**options, http_client=http_client)


def _arguments(raw: str | None) -> dict[str, Any]:
    """A tool call's arguments as a dict; arguments that are not a JSON object become the
    marked input the tool step refuses with the reason. Empty arguments are ``{}``."""
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        return invalid_arguments(raw, str(err))
    if not isinstance(parsed, dict):
        return invalid_arguments(raw, f"expected a JSON object, got {type(parsed).__name__}")
    return parsed


def _nudge() -> dict[str, Any]:
    return {"role": "user", "content": EMPTY_REPLY_NUDGE}


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": plain_json(spec.input_schema),
        },
    }


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Core messages as chat messages: a user message's tool results come first, each its
    own ``tool`` message, right after the assistant's calls as the API requires."""
    out: list[dict[str, Any]] = []
    for message in messages:
        texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
        if message.role == "assistant":
            calls = [_call(b) for b in message.content if isinstance(b, ToolUseBlock)]
            if not texts and not calls:
                continue
            turn: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
            if calls:
                turn["tool_calls"] = calls
            out.append(turn)
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": block.tool_use_id, "content": _result(block)}
                )
            elif not isinstance(block, TextBlock):
                raise ModelError(f"cannot send a {type(block).__name__} to a chat-completions API")
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _call(block: ToolUseBlock) -> dict[str, Any]:
    bad = block.input.get(INVALID_ARGUMENTS)
    if isinstance(bad, Mapping):  # sent back as the model wrote it, so it sees its mistake
        arguments = str(bad.get("raw", ""))
    else:
        arguments = json.dumps(plain_json(block.input))
    return {
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": arguments},
    }


def _result(block: ToolResultBlock) -> str:
    """The API has no ``is_error``; an error says so in its first words."""
    text = block.content or "(no output)"
    return f"Error: {text}" if block.is_error and not text.startswith("Error") else text
