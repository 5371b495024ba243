"""The local Messages API server, driven by the real Anthropic SDK over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import pytest

from gr_notebook.messages import TextBlock, ToolUseBlock, Usage
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.scripted import text, tool_call
from gr_notebook.testing import Fault, MessagesServer
from gr_notebook.testing.prompt_cache import LOOKBACK_BLOCKS, prompt_tokens

MODEL = "claude-local-test"
HELLO = [{"role": "user", "content": "hello"}]


def estimate(piece: Any) -> int:
    """The server's documented estimate, restated so the test checks it independently."""
    return math.ceil(len(json.dumps(piece, separators=(",", ":"), ensure_ascii=False)) / 4)


def test_the_estimate_counts_characters_not_their_json_escapes() -> None:
    """A box-drawing rule is 67 characters, not 67 six-character ``\\u2550`` escapes: the
    todo display would otherwise cost 3.7 times what a tokenizer counts (decision 270)."""
    rule = {"type": "text", "text": "\u2550" * 67}
    assert prompt_tokens({"messages": [{"role": "user", "content": [rule]}]}) == estimate(rule)
    assert estimate(rule) == math.ceil((len('{"type":"text","text":""}') + 67) / 4)


_clients: dict[tuple[int, int], anthropic.AsyncAnthropic] = {}


def client(server: MessagesServer, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    """One SDK client per server: building one takes ~30 ms, more than a request does."""
    key = (id(server), max_retries)
    if key not in _clients:
        _clients[key] = anthropic.AsyncAnthropic(
            api_key="test-key", base_url=server.url, max_retries=max_retries
        )
    return _clients[key]


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    yield
    for sdk in _clients.values():
        await sdk.close()
    _clients.clear()


async def create(server: MessagesServer, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": HELLO} | kwargs
    return await client(server).messages.create(**params)


async def eventually(condition: Callable[[], bool], within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


# ── responses ──────────────────────────────────────────────────────────────────────────────


async def test_a_tool_use_turn_then_a_text_turn_round_trip() -> None:
    with MessagesServer([tool_call("read_file", path="notes.md"), text("All read.")]) as server:
        first = await create(server)
        assert first.id == "msg_local_1"
        assert first.model == MODEL
        assert first.stop_reason == "tool_use"
        [use] = first.content
        assert isinstance(use, anthropic.types.ToolUseBlock)
        assert (use.id, use.name, use.input) == (
            "toolu_local_1_0",
            "read_file",
            {"path": "notes.md"},
        )
        assert first._request_id == "req_local_1"

        messages = [
            *HELLO,
            {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "notes"}],
            },
        ]
        second = await create(server, messages=messages)
        assert second.stop_reason == "end_turn"
        [block] = second.content
        assert isinstance(block, anthropic.types.TextBlock)
        assert block.text == "All read."
        sent = server.requests[1].body["messages"]
        prompt = [sent[0]["content"], *sent[1]["content"], *sent[2]["content"]]
        assert second.usage.input_tokens == sum(estimate(piece) for piece in prompt)
        assert second.usage.output_tokens == estimate({"type": "text", "text": "All read."})
        assert second.usage.cache_creation_input_tokens == 0
        assert second.usage.cache_read_input_tokens == 0
        assert server.remaining == 0

    recorded = server.requests[0]
    assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
    assert recorded.body == {"model": MODEL, "max_tokens": 256, "messages": HELLO}
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert "anthropic-version" in recorded.headers


async def test_explicit_ids_and_usage_are_served_as_given() -> None:
    given = ModelResponse(
        (TextBlock("Reading."), ToolUseBlock("toolu_mine", "read_file", {"path": "a"})),
        "tool_use",
        usage=Usage(input_tokens=7, output_tokens=3, cache_read_input_tokens=11),
    )
    with MessagesServer([given]) as server:
        message = await create(server)
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].id == "toolu_mine"  # type: ignore[union-attr]
    usage = message.usage
    assert (usage.input_tokens, usage.output_tokens) == (7, 3)
    assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 11)


async def test_a_callable_turn_answers_from_the_request_body() -> None:
    def echo(body: dict[str, Any]) -> ModelResponse:
        return text(f"you said {body['messages'][-1]['content']}")

    with MessagesServer([echo]) as server:
        message = await create(server)
    assert message.content[0].text == "you said hello"  # type: ignore[union-attr]


async def test_turns_added_while_running_are_served() -> None:
    with MessagesServer() as server:
        server.add(text("late addition"))
        assert server.remaining == 1
        message = await create(server)
    assert message.content[0].text == "late addition"  # type: ignore[union-attr]


# ── prompt caching ─────────────────────────────────────────────────────────────────────────

LONG_SYSTEM = "You are careful. " * 40  # about 170 tokens as compact JSON


def cached_system(text: str = LONG_SYSTEM) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


async def test_a_cached_prefix_is_written_once_then_read() -> None:
    system_tokens = estimate({"type": "text", "text": LONG_SYSTEM})
    assert system_tokens > 100
    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        first = await create(server, system=cached_system())
        second = await create(server, system=cached_system())
    rest = estimate("hello")
    assert first.usage.cache_creation_input_tokens == system_tokens
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.input_tokens == rest
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.cache_read_input_tokens == system_tokens
    assert second.usage.input_tokens == rest


async def test_nothing_is_cached_without_cache_control() -> None:
    system = [{"type": "text", "text": LONG_SYSTEM}]
    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        first = await create(server, system=system)
        second = await create(server, system=system)
    for message in (first, second):
        assert message.usage.cache_creation_input_tokens == 0
        assert message.usage.cache_read_input_tokens == 0
        assert message.usage.input_tokens == estimate(system[0]) + estimate("hello")


async def test_a_prefix_below_the_minimum_is_not_cached() -> None:
    short = "Be brief."
    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        await create(server, system=cached_system(short))
        second = await create(server, system=cached_system(short))
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.cache_read_input_tokens == 0
    assert second.usage.input_tokens == estimate({"type": "text", "text": short}) + estimate(
        "hello"
    )


async def test_a_longer_prefix_reads_the_cached_part_and_writes_the_rest() -> None:
    """A system breakpoint and a moving last-message breakpoint, as an agent loop sends them."""

    def turn(said: str) -> list[dict[str, Any]]:
        block = {"type": "text", "text": said * 30, "cache_control": {"type": "ephemeral"}}
        return [{"role": "user", "content": [block]}]

    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        first = await create(server, system=cached_system(), messages=turn("a"))
        second = await create(server, system=cached_system(), messages=turn("b"))
    system_tokens = estimate({"type": "text", "text": LONG_SYSTEM})
    message_tokens = estimate({"type": "text", "text": "a" * 30})
    assert first.usage.cache_creation_input_tokens == system_tokens + message_tokens
    assert second.usage.cache_read_input_tokens == system_tokens
    assert second.usage.cache_creation_input_tokens == message_tokens
    assert second.usage.input_tokens == 0


def _conversation(blocks: int, *, marked: bool = True) -> list[dict[str, Any]]:
    """One user turn of ``blocks`` text blocks, the last one a breakpoint."""
    content: list[dict[str, Any]] = [{"type": "text", "text": f"b{k}"} for k in range(blocks)]
    if marked:
        content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
    return [{"role": "user", "content": content}]


@pytest.mark.parametrize(("added", "read"), [(LOOKBACK_BLOCKS, True), (LOOKBACK_BLOCKS + 1, False)])
async def test_a_breakpoint_reads_a_prefix_up_to_20_blocks_back(added: int, read: bool) -> None:
    """The API checks the block boundaries before a breakpoint for a hit, 20 of them."""
    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        first = await create(server, system=cached_system(), messages=_conversation(5))
        second = await create(server, system=cached_system(), messages=_conversation(5 + added))
    written = first.usage.cache_creation_input_tokens
    assert written > estimate({"type": "text", "text": LONG_SYSTEM})
    system_tokens = estimate({"type": "text", "text": LONG_SYSTEM})
    assert second.usage.cache_read_input_tokens == (written if read else system_tokens)
    total = second.usage.cache_read_input_tokens + second.usage.cache_creation_input_tokens
    assert total + second.usage.input_tokens == prompt_tokens(
        {"system": cached_system(), "messages": _conversation(5 + added)}
    )


async def test_what_follows_the_last_breakpoint_is_plain_input() -> None:
    """A tail block after the conversation's breakpoint is neither written nor read."""
    messages = _conversation(3)
    messages[-1]["content"].append({"type": "text", "text": "the todo layer " * 10})
    with MessagesServer([text("one"), text("two")], min_cacheable_tokens=100) as server:
        first = await create(server, system=cached_system(), messages=messages)
        second = await create(server, system=cached_system(), messages=messages)
    tail = estimate(messages[-1]["content"][-1])
    assert first.usage.input_tokens == second.usage.input_tokens == tail
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


# ── faults ─────────────────────────────────────────────────────────────────────────────────


async def test_a_429_surfaces_as_rate_limit_error_with_retry_after() -> None:
    with (
        MessagesServer([Fault.rate_limited(0.05)]) as server,
        pytest.raises(anthropic.RateLimitError) as caught,
    ):
        await create(server)
    err = caught.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "0.05"
    assert err.request_id == "req_local_1"
    assert err.type == "rate_limit_error"


async def test_the_sdk_retries_a_429_after_retry_after() -> None:
    with MessagesServer([Fault.rate_limited(0.05), text("second time lucky")]) as server:
        message = await client(server, max_retries=1).messages.create(
            model=MODEL, max_tokens=256, messages=HELLO
        )
    assert message.content[0].text == "second time lucky"  # type: ignore[union-attr]
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


async def test_529_is_overloaded_error_an_internal_server_error() -> None:
    with (
        MessagesServer([Fault.overloaded()]) as server,
        pytest.raises(anthropic.OverloadedError) as caught,
    ):
        await create(server)
    assert isinstance(caught.value, anthropic.InternalServerError)
    assert caught.value.status_code == 529
    assert caught.value.type == "overloaded_error"


async def test_500_is_internal_server_error() -> None:
    with (
        MessagesServer([Fault.status(500, message="boom")]) as server,
        pytest.raises(anthropic.InternalServerError) as caught,
    ):
        await create(server)
    assert type(caught.value) is anthropic.InternalServerError
    assert caught.value.api_message == "boom"


async def test_malformed_json_escapes_the_sdk_as_a_json_decode_error() -> None:
    """Not an anthropic.APIError: the SDK lets the stdlib decoder's error through, unretried."""
    with MessagesServer([Fault.malformed()]) as server, pytest.raises(json.JSONDecodeError):
        await create(server)


async def test_a_slow_answer_beyond_the_client_timeout_is_api_timeout_error() -> None:
    with MessagesServer([Fault.slow(2.0, then=text("too late"))]) as server:
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            await create(server, timeout=0.2)
        assert (
            time.monotonic() - started < 1.8
        )  # cut before the 2 s answer, with room for a busy machine
        assert server.remaining == 0


async def test_a_slow_answer_within_the_timeout_arrives() -> None:
    with MessagesServer([Fault.slow(0.05, then=text("worth the wait"))]) as server:
        message = await create(server, timeout=2.0)
    assert message.content[0].text == "worth the wait"  # type: ignore[union-attr]


async def test_cancelling_a_hung_call_closes_its_connection() -> None:
    with MessagesServer([Fault.hang()]) as server:
        task = asyncio.create_task(create(server))
        await eventually(lambda: len(server.requests) == 1)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 0.2
        await eventually(lambda: server.disconnects == 1, within=1.0)
        closing = time.monotonic()
    assert time.monotonic() - closing < 0.5


async def test_closing_the_server_does_not_wait_for_a_hung_request() -> None:
    server = MessagesServer([Fault.hang(30)]).start()
    task = asyncio.create_task(create(server))
    await eventually(lambda: len(server.requests) == 1)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 0.5
    with pytest.raises(anthropic.APIConnectionError):
        await task


async def test_a_hang_that_runs_its_course_drops_the_connection() -> None:
    with MessagesServer([Fault.hang(0.1)]) as server:
        with pytest.raises(anthropic.APIConnectionError):
            await create(server)
        assert server.disconnects == 0


# ── validation, token counting, exhaustion ────────────────────────────────────────────────


async def test_an_orphan_tool_result_is_refused_without_consuming_a_turn() -> None:
    orphan = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"}],
        }
    ]
    with (
        MessagesServer([text("unused")]) as server,
        pytest.raises(anthropic.BadRequestError) as caught,
    ):
        await create(server, messages=orphan)
        assert server.remaining == 1
        assert len(server.requests) == 1
    assert caught.value.type == "invalid_request_error"
    assert "unexpected `tool_use_id`" in (caught.value.api_message or "")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"model": ""}, "model"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "first message"),
        ({"messages": [{"role": "system", "content": "hi"}]}, "role"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}, "non-empty"),
        ({"system": [{"type": "image"}]}, "system.0.type"),
        ({"tools": [{"name": "read_file"}]}, "input_schema"),
        ({"system": cached_system() * 5}, "A maximum of 4 blocks with cache_control"),
        ({"system": [{"type": "text", "text": "x", "cache_control": {"type": "x"}}]}, "ephemeral"),
        (
            {
                "messages": [
                    *HELLO,
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {"role": "user", "content": "no result"},
                ]
            },
            "without `tool_result`",
        ),
    ],
)
async def test_invalid_requests_are_refused_as_the_api_would(
    change: dict[str, Any], complaint: str
) -> None:
    with (
        MessagesServer([text("unused")]) as server,
        pytest.raises(anthropic.BadRequestError) as caught,
    ):
        await create(server, **change)
        assert server.remaining == 1
    assert complaint in (caught.value.api_message or "")


async def test_count_tokens_returns_the_estimate_and_consumes_no_turn() -> None:
    system = [{"type": "text", "text": LONG_SYSTEM}]
    with MessagesServer([text("unused")]) as server:
        counted = await client(server).messages.count_tokens(
            model=MODEL, system=system, messages=HELLO
        )
        assert server.remaining == 1
    assert counted.input_tokens == estimate(system[0]) + estimate("hello")
    assert server.requests[0].path == "/v1/messages/count_tokens"


async def test_an_exhausted_script_answers_400() -> None:
    with MessagesServer([text("only one")]) as server:
        await create(server)
        with pytest.raises(anthropic.BadRequestError) as caught:
            await create(server)
    assert caught.value.api_message == "local server: the script has no turn left for request 2"


async def test_unknown_routes_are_404_with_the_error_json() -> None:
    with MessagesServer() as server, pytest.raises(anthropic.NotFoundError) as caught:
        await client(server).models.list()
    assert caught.value.type == "not_found_error"
    assert caught.value.request_id == "req_local_1"


async def test_a_script_error_is_a_500_the_sdk_does_not_retry() -> None:
    def broken(body: dict[str, Any]) -> ModelResponse:
        raise RuntimeError("script bug")

    with MessagesServer([broken, text("never")]) as server:
        retrying = client(server, max_retries=2)
        with pytest.raises(anthropic.InternalServerError) as caught:
            await retrying.messages.create(model=MODEL, max_tokens=256, messages=HELLO)
        assert len(server.requests) == 1
    assert "script bug" in (caught.value.api_message or "")
