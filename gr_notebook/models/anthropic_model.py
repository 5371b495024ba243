"""Claude through the official ``anthropic`` SDK: the same agent, tools and guardrails as the
simulated model, on the real Messages API.

The core's messages already have the API's shape, so the request maps one to one: layer 1
and layer 2 are system blocks, layer 3 the tool schemas, layers 4 and 5 the messages. With
``cache=True`` the stable prefix (tools, then layer 1) ends in a ``cache_control``
breakpoint, and layer 2, which changes every few turns, goes to the tail of the last user
turn, after a breakpoint that ends the conversation, so each turn reads the conversation so
far from the cache (``layer2="system"`` keeps it a system block; see
:mod:`~gr_notebook.models.anthropic_layout`).

Every request is streamed (``stream=True``, the default): the text and thinking reach a
person watching as they are written (:mod:`~gr_notebook.models.anthropic_stream`), while the
response the loop gets is the same as without streaming.

The adapter retries by itself, with the SDK's own retries off, so each retry is a
``model_retry`` event and a stop during a request or a backoff is honoured at once (a
stream in flight is closed).

With ``count_tokens=True`` it is a :class:`~gr_notebook.models.base.TokenCounter`: the loop
asks it for each request's input tokens before sending, and checks them against the run's
token budget (the adapter itself enforces no limit).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gr_notebook.errors import ConfigError, ModelError
from gr_notebook.eventdata import plain_json
from gr_notebook.messages import (
    THINKING_BLOCKS,
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    block_json,
)
from gr_notebook.models.anthropic_layout import LAYER2_PLACEMENTS, Layer2Placement, lay_out
from gr_notebook.models.anthropic_stream import stream_message
from gr_notebook.models.base import (
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolSpec,
)
from gr_notebook.models.call_context import TurnStream, current_call, turn_stream
from gr_notebook.models.catalog import CONTEXT_1M_BETA, LONG_CONTEXT, facts_of
from gr_notebook.models.loop_clients import LoopClients
from gr_notebook.models.network import check_network, guard_http_client, guard_request
from gr_notebook.models.pricing import Price, PriceTable, warn_unpriced
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.models.sdk_calls import Vendor, check_options, send_with_retries
from gr_notebook.models.secrets import check_key, redact
from gr_notebook.models.thinking import Thinking, as_thinking, check_thinking

if TYPE_CHECKING:
    import anthropic

__all__ = ["MISSING_KEY", "AnthropicModel"]

MISSING_KEY = (
    "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable (or pass "
    "api_key=...), or run offline with model='simulated'"
)
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}
#: How many times one turn follows ``pause_turn`` before the adapter gives up: this bounds
#: what a turn that never ends can spend between budget checks.
MAX_PAUSE_CONTINUATIONS = 8
T = TypeVar("T")


class AnthropicModel:
    """``gr.Agent(model=gr.AnthropicModel("claude-sonnet-4-6"))``, or the spec string
    ``"anthropic:claude-sonnet-4-6"``.

    ``client`` is an ``anthropic.AsyncAnthropic`` used as it is (the adapter's retries come on
    top of its own); without one, the adapter builds a client with the SDK's retries off,
    from ``api_key`` or ``ANTHROPIC_API_KEY``. ``timeout`` is seconds per request, the whole
    of it, streamed or not: a try that has not ended by then is closed and retried as a
    timeout. Left None, only the client's own bounds hold, and they bound each read, not the
    request (the SDK's 600 s, 5 s to connect, for a client the adapter builds). ``layer2``
    places the todo layer when caching: ``"tail"`` (the default) or ``"system"``.
    ``context_window`` defaults to the model's own (:mod:`~gr_notebook.models.catalog`);
    ``context_1m=True`` opens the 1M-token window on a model that has one, with the beta
    header where the API still asks for it.
    ``thinking`` turns on extended thinking: a token budget (``thinking=4096``, below
    ``max_tokens``), ``"adaptive"`` where the model has it, or a :class:`~gr_notebook.Thinking`.
    Thinking blocks are kept in the conversation and sent back unchanged whether or not it
    is set (a model may think by default). ``stream=False`` sends each request whole, for a
    gateway that buffers server-sent events.
    """

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 8192,
        cache: bool = True,
        layer2: Layer2Placement = "tail",
        max_retries: int = 4,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        count_tokens: bool = False,
        prices: PriceTable | Mapping[str, Price] | None = None,
        context_window: int | None = None,
        context_1m: bool = False,
        thinking: int | str | Thinking | None = None,
        stream: bool = True,
    ) -> None:
        self.model, self.max_tokens, self.timeout = check_options(
            "AnthropicModel",
            model,
            "'claude-sonnet-4-6'",
            max_tokens=max_tokens,
            timeout=timeout,
        )
        if layer2 not in LAYER2_PLACEMENTS:
            raise ConfigError(
                f"layer2 is where the todo layer goes when caching: 'tail' (after the "
                f"conversation) or 'system'; got {layer2!r}"
            )
        self.cache = bool(cache)
        self.stream = bool(stream)
        self.layer2: Layer2Placement = layer2
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self.count_tokens = bool(count_tokens)
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices or {})
        self._unpriced: set[str] = set()
        facts = facts_of(self.model)
        if context_1m and facts.long_context == "none":
            raise ConfigError(
                f"context_1m=True: {self.model} has no 1M-token context window; use a model "
                "that has one (e.g. claude-sonnet-4-6), or leave context_1m off"
            )
        self.context_1m = bool(context_1m)
        self._betas: tuple[str, ...] = (
            (CONTEXT_1M_BETA,) if context_1m and facts.long_context == "beta" else ()
        )
        self.thinking = as_thinking(thinking)
        if self.thinking is not None:
            self._betas += check_thinking(
                self.model, self.thinking, facts, max_tokens=self.max_tokens
            )
        if context_window is None:
            context_window = LONG_CONTEXT if context_1m else facts.context_window
        self.context_window = context_window
        if client is not None and (api_key is not None or base_url is not None):
            raise ConfigError(
                "pass either client= or api_key=/base_url=, not both: a client passed in is "
                "used as it is"
            )
        self._client_options = _client_options(api_key, base_url, timeout) if client is None else {}
        self._client = client if client is not None else _new_client(self._client_options)
        if not hasattr(self._client, "messages") or _is_sync_client(self._client):
            raise ConfigError(
                "client must be an anthropic.AsyncAnthropic (the async client), got "
                f"{type(self._client).__name__}"
            )
        given_key = getattr(self._client, "api_key", None)
        self._key = (
            self._client_options["api_key"]
            if client is None
            else check_key(given_key, "the client passed in")
            if isinstance(given_key, str)
            else ""
        )
        if client is not None:  # the guard sees each request it sends, redirects included
            guard_http_client(getattr(client, "_client", None))
        # The client built (or given) at construction serves the first event loop; another
        # loop gets a new one of ours, or an error for the user's: pooled connections belong
        # to their loop.
        options = self._client_options
        self._clients: LoopClients[Any] = LoopClients(
            self._client,
            (lambda: _new_client(options)) if client is None else None,
            sdk="anthropic",
        )

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def price(self) -> Price | None:
        """What this model's calls cost, from its price table; None when unknown."""
        return self.prices.price_of(self.model)

    def redact_key(self, text: str) -> str:
        """``text`` without this model's API key (a tool's result that quotes it)."""
        return redact(text, self._key)

    @property
    def _api(self) -> Any:
        """The messages resource of this event loop's client, untyped: the SDK's overloads
        want literal arguments, and the body is built as plain JSON values."""
        return self._clients.current().messages

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def __repr__(self) -> str:
        return (
            f"AnthropicModel({self.model!r}, cache={self.cache}, layer2={self.layer2!r}, "
            f"max_tokens={self.max_tokens}, stream={self.stream}, "
            + (f"thinking={self.thinking}, " if self.thinking is not None else "")
            + f"max_retries={self.retry.max_retries}, timeout={self.timeout}, "
            f"base_url={self.base_url!r})"
        )

    # -- the call ------------------------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One turn. A ``pause_turn`` is continued here, as the API asks: the paused
        assistant content is sent back as the last message, and the segments come back as
        one response with their usage summed, so the loop sees one turn."""
        params = self.request_params(request)
        check_network(self.base_url)
        call, stream = current_call(), turn_stream()
        segments: list[ModelResponse] = []
        paused: list[Any] = []
        while True:
            body = params if not paused else _continued(params, paused)
            message, request_id = await self._with_retries(
                "messages.create", functools.partial(self._send, body, stream)
            )
            if stream is not None:
                stream.keep()
            counted = call.input_tokens if call else None
            segments.append(self._response(message, counted, request_id))
            if str(message.stop_reason) != "pause_turn":
                return _joined(segments) if len(segments) > 1 else segments[0]
            if len(segments) > MAX_PAUSE_CONTINUATIONS:
                raise ModelError(
                    f"the API paused one turn {len(segments)} times (pause_turn) and "
                    "gave no end; start the job again to resume it, or give the model "
                    "smaller steps"
                )
            paused.extend(_raw_block(block) for block in message.content)

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        """The request's input tokens, counted by the API (``count_tokens=True``); None
        when counting is off."""
        if not self.count_tokens:
            return None
        check_network(self.base_url)
        body = {k: v for k, v in self.request_params(request).items() if k != "max_tokens"}
        counted = await self._with_retries(
            "messages.count_tokens",
            lambda: self._api.count_tokens(**body, **self._timeout()),
        )
        return int(counted.input_tokens)

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API body for ``request``: what is sent, as plain JSON values."""
        wire = lay_out(
            request.system,
            [_tool(t) for t in request.tools],
            _messages(request.messages),
            cache=self.cache,
            placement=self.layer2,
        )
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": wire.messages,
        }
        if wire.system:
            params["system"] = wire.system
        if wire.tools:
            params["tools"] = wire.tools
        if self.thinking is not None:
            params["thinking"] = self.thinking.param()
        return params

    def _timeout(self) -> dict[str, Any]:
        """Per-request options: the timeout, and the beta header of the 1M window."""
        options: dict[str, Any] = {} if self.timeout is None else {"timeout": self.timeout}
        if self._betas:
            options["extra_headers"] = {"anthropic-beta": ",".join(self._betas)}
        return options

    async def _send(self, body: Mapping[str, Any], stream: TurnStream | None) -> tuple[Any, Any]:
        """One try of a request: streamed (the message and its request id), or whole."""
        if stream is not None:
            stream.attempt()
        if self.stream:
            return await stream_message(self._api, body, self._timeout(), stream, key=self._key)
        message = await self._api.create(**body, **self._timeout())
        return message, getattr(message, "_request_id", None)

    async def _with_retries(self, what: str, send: Callable[[], Awaitable[T]]) -> T:
        return await send_with_retries(
            send,
            what=what,
            vendor=_vendor(),
            policy=self.retry,
            key=self._key,
            timeout=self.timeout,
        )

    def _response(self, message: Any, counted: int | None, request_id: Any) -> ModelResponse:
        content: list[ContentBlock] = []
        for block in message.content:
            kind = getattr(block, "type", None)
            if kind == "text" and block.text.strip():  # the API refuses blank text back
                content.append(TextBlock(block.text))
            elif kind == "tool_use":
                content.append(ToolUseBlock(block.id, block.name, dict(block.input or {})))
            elif kind == "thinking":  # kept whole: the API checks the signature when it returns
                content.append(ThinkingBlock(block.thinking, block.signature))
            elif kind == "redacted_thinking":
                content.append(RedactedThinkingBlock(block.data))
        raw = message.usage
        usage = Usage(
            input_tokens=int(raw.input_tokens or 0),
            output_tokens=int(raw.output_tokens or 0),
            cache_creation_input_tokens=int(getattr(raw, "cache_creation_input_tokens", 0) or 0),
            cache_read_input_tokens=int(getattr(raw, "cache_read_input_tokens", 0) or 0),
        )
        model_id = str(getattr(message, "model", "") or self.model)
        cost = self.prices.cost(model_id, usage)
        if math.isnan(cost):
            warn_unpriced(model_id, self._unpriced)
        extra: dict[str, Any] = {"cost_usd": None if math.isnan(cost) else cost}
        if request_id:
            extra["request_id"] = request_id
        if counted is not None:
            extra["counted_input_tokens"] = counted
        if message.stop_reason == "model_context_window_exceeded":
            raise ModelError(
                f"the conversation no longer fits {self.model}'s context window; keep "
                "compaction on, or lower the budget of what the agent reads"
            )
        stop = _STOP_REASONS.get(str(message.stop_reason), "end_turn")
        if message.stop_reason == "pause_turn":
            extra["pause_turn"] = True
        return ModelResponse(tuple(content), stop, usage, self.name, extra)


def _continued(params: Mapping[str, Any], paused: Sequence[Any]) -> dict[str, Any]:
    """The request again, with the paused assistant content appended unchanged."""
    messages = list(params["messages"])
    return {**params, "messages": [*messages, {"role": "assistant", "content": list(paused)}]}


def _raw_block(block: Any) -> Any:
    """A content block as the API sent it (server-tool blocks included), to send back."""
    dump = getattr(block, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else plain_json(block)


def _joined(segments: Sequence[ModelResponse]) -> ModelResponse:
    """The segments of a paused turn as one response: content in order, usage summed."""
    last = segments[-1]
    usage = sum((s.usage for s in segments if s.usage is not None), Usage())
    costs = [s.extra.get("cost_usd") for s in segments]
    extra = dict(last.extra)
    extra["cost_usd"] = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
    extra["pause_continuations"] = len(segments) - 1
    extra.pop("pause_turn", None)
    content = tuple(block for s in segments for block in s.content)
    return ModelResponse(content, last.stop_reason, usage, last.model, extra)


def _client_options(
    api_key: str | None, base_url: str | None, timeout: float | None
) -> dict[str, Any]:
    key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
    if not key or not key.strip():
        raise ConfigError(MISSING_KEY)
    source = "api_key=" if api_key is not None else "ANTHROPIC_API_KEY"
    options: dict[str, Any] = {"api_key": check_key(key, source), "max_retries": 0}
    if timeout is not None:  # else the SDK's own: 600 s, and 5 s to connect
        options["timeout"] = float(timeout)
    if base_url is not None:
        options["base_url"] = base_url
    return options


def _new_client(options: Mapping[str, Any]) -> anthropic.AsyncAnthropic:
    import anthropic

    # Our own HTTP client rather than the SDK's wrapper: the wrapper closes itself on garbage
    # collection by scheduling a task on whatever loop runs then, which fails noisily for a
    # client whose own loop has closed (a run_sync() earlier in the script).
    # Its request hook is the network guard, on every request it sends, redirects included.
    http_client = anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [guard_request]})
    return anthropic.AsyncAnthropic(**options, http_client=http_client)


def _is_sync_client(client: object) -> bool:
    import anthropic

    return isinstance(client, anthropic.Anthropic)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": plain_json(spec.input_schema),
    }


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for b in (_block(block) for block in message.content) if b is not None]
        if blocks:
            out.append({"role": message.role, "content": blocks})
    return out


def _block(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        params = plain_json(block.input)
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": params}
    if isinstance(block, ToolResultBlock):
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content or "(no output)",
        }
        if block.is_error:
            result["is_error"] = True
        return result
    if isinstance(block, THINKING_BLOCKS):  # unchanged, signature and all
        return block_json(block)
    raise ModelError(f"cannot send a {type(block).__name__} to the Messages API")


def _vendor() -> Vendor:
    import anthropic

    return Vendor(
        "the Anthropic API",
        anthropic.APIStatusError,
        (anthropic.APIConnectionError, anthropic.APIResponseValidationError),
        _status_message,
    )


def _status_message(error: Any) -> str:
    status = error.status_code
    kind = getattr(error, "type", None) or ""
    detail = getattr(error, "api_message", None) or str(error)
    if status == 401:
        return (
            f"Anthropic rejected the API key (401 {kind}); check ANTHROPIC_API_KEY, or run "
            "offline with model='simulated'"
        )
    return f"Anthropic API error {' '.join(filter(None, (str(status), kind)))}: {detail}"
