"""The local Messages API server answering ``"stream": true``, driven by the real anthropic
SDK's stream helper over loopback HTTP: the same turns as without streaming, and the stream
faults (an error event mid-stream, a cut connection, a slow drip a client can walk away from)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.scripted import text, tool_call
from gr_notebook.models.sdk_calls import transport_error
from gr_notebook.testing import Fault, MessagesServer
from tests.testing.test_messages_server import HELLO, MODEL, eventually

LONG = "The quick brown fox jumps over the lazy dog. " * 40
RAW_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)


@pytest.fixture
async def clients() -> AsyncIterator[list[anthropic.AsyncAnthropic]]:
    made: list[anthropic.AsyncAnthropic] = []
    yield made
    for client in made:
        await client.close()


def sdk(server: MessagesServer, clients: list[anthropic.AsyncAnthropic]) -> Any:
    client = anthropic.AsyncAnthropic(api_key="test-key", base_url=server.url, max_retries=0)
    clients.append(client)
    return client.messages


async def stream(messages: Any, seen: list[Any] | None = None, **kwargs: Any) -> Any:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": HELLO} | kwargs
    async with messages.stream(**params) as events:
        async for event in events:
            if seen is not None:
                seen.append(event)
        return await events.get_final_message(), events


async def test_a_streamed_answer_is_the_answer_without_streaming(clients: list[Any]) -> None:
    turn = ModelResponse(
        (TextBlock("Let me read it first."), ToolUseBlock("toolu_1", "read_file", {"path": "a"})),
        "tool_use",
    )
    with MessagesServer([turn], chunk_chars=5) as streamed, MessagesServer([turn]) as whole:
        seen: list[Any] = []
        message, events = await stream(sdk(streamed, clients), seen)
        plain = await sdk(whole, clients).create(model=MODEL, max_tokens=256, messages=HELLO)
        assert streamed.requests[0].body["stream"] is True
    assert [b.model_dump(exclude_none=True) for b in message.content] == [
        b.model_dump(exclude_none=True) for b in plain.content
    ]
    assert message.usage == plain.usage and message.stop_reason == "tool_use"
    assert events.request_id == "req_local_1"
    assert events.response.headers["content-type"] == "text/event-stream"
    texts = [e.delta.text for e in seen if e.type == "content_block_delta" and e.delta.type
             == "text_delta"]  # fmt: skip
    assert len(texts) == 5 and "".join(texts) == "Let me read it first."


async def test_stream_must_be_a_boolean(clients: list[Any]) -> None:
    with MessagesServer([text("never")]) as server:
        with pytest.raises(anthropic.BadRequestError, match="stream: Input should be a valid"):
            await sdk(server, clients).create(
                model=MODEL, max_tokens=256, messages=HELLO, extra_body={"stream": "yes"}
            )
        assert server.remaining == 1


async def test_an_error_event_mid_stream_is_raised_by_the_sdk(clients: list[Any]) -> None:
    with MessagesServer([Fault.stream_error(text(LONG), after=5)], chunk_chars=8) as server:
        seen: list[Any] = []
        with pytest.raises(anthropic.APIStatusError) as raised:
            await stream(sdk(server, clients), seen)
    assert raised.value.type == "overloaded_error"  # type: ignore[attr-defined]
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    deltas = [e for e in seen if e.type == "content_block_delta"]
    assert len(deltas) == 2  # message_start, ping, content_block_start, then two deltas


async def test_the_error_has_its_status_when_not_streamed(clients: list[Any]) -> None:
    fault = Fault.stream_error(text("x"), error_type="api_error", message="boom")
    with MessagesServer([fault, Fault.stream_error(text("y"))]) as server:
        with pytest.raises(anthropic.InternalServerError) as raised:
            await sdk(server, clients).create(model=MODEL, max_tokens=256, messages=HELLO)
        assert raised.value.status_code == 500
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            await sdk(server, clients).create(model=MODEL, max_tokens=256, messages=HELLO)
        assert overloaded.value.status_code == 529


async def test_a_cut_stream_is_a_network_error_mid_body(clients: list[Any]) -> None:
    with MessagesServer([Fault.cut(text(LONG), after=6), Fault.cut(text("y"))]) as server:
        seen: list[Any] = []
        with pytest.raises(transport_error(anthropic)):
            await stream(sdk(server, clients), seen)
        assert len([e for e in seen if e.type == "content_block_delta"]) == 3
        with pytest.raises(anthropic.APIConnectionError):  # not streamed: no answer at all
            await sdk(server, clients).create(model=MODEL, max_tokens=256, messages=HELLO)


async def test_a_malformed_stream_escapes_as_a_json_decode_error(clients: list[Any]) -> None:
    with MessagesServer([Fault.malformed()]) as server, pytest.raises(json.JSONDecodeError):
        await stream(sdk(server, clients))


async def test_a_status_fault_is_answered_before_any_stream(clients: list[Any]) -> None:
    with (
        MessagesServer([Fault.overloaded()]) as server,
        pytest.raises(anthropic.APIStatusError) as raised,
    ):
        await stream(sdk(server, clients))
    assert raised.value.status_code == 529


async def test_a_drip_spaces_the_events(clients: list[Any]) -> None:
    turn = tool_call("write_file", path="a.md", content="x" * 30)
    with MessagesServer([Fault.drip(0.02, then=turn)], chunk_chars=10) as server:
        seen: list[Any] = []
        started = time.monotonic()
        message, _ = await stream(sdk(server, clients), seen)
        elapsed = time.monotonic() - started
    assert message.content[0].input == {"path": "a.md", "content": "x" * 30}
    events = [e for e in seen if e.type in RAW_EVENTS]  # the SDK adds events of its own
    # The events and the ping the SDK skips are len(events) + 1 frames, 0.02 s apart.
    assert len(events) >= 10 and elapsed >= 0.02 * len(events) * 0.95


async def test_walking_away_from_a_drip_closes_the_connection(clients: list[Any]) -> None:
    with MessagesServer([Fault.drip(0.2, then=text(LONG))], chunk_chars=4) as server:
        seen: list[Any] = []
        task = asyncio.create_task(stream(sdk(server, clients), seen))
        await eventually(lambda: any(e.type == "content_block_delta" for e in seen))
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: server.disconnects == 1, within=1.0)
        assert time.monotonic() - cancelled < 1.0  # noticed between two events, not after
        assert len([e for e in seen if e.type == "content_block_delta"]) < 5


async def test_closing_the_server_ends_a_drip_at_once(clients: list[Any]) -> None:
    server = MessagesServer([Fault.drip(5.0, then=text(LONG))]).start()
    seen: list[Any] = []
    task = asyncio.create_task(stream(sdk(server, clients), seen))
    await eventually(lambda: bool(seen))
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 1.0
    with pytest.raises(transport_error(anthropic)):
        await task


async def test_thinking_blocks_stream_whatever_the_server_makes_of_a_turn(
    clients: list[Any],
) -> None:
    """The encoder is generic over the content dicts: a server whose messages carry thinking
    (as the thinking work makes them) streams them with no change to the encoder."""

    class ThinkingServer(MessagesServer):
        def _message(self, response: Any, body: Any, turn_number: int) -> dict[str, Any]:
            message = super()._message(response, body, turn_number)
            thinking = {"type": "thinking", "thinking": "Hmm. " * 20, "signature": "sig-1"}
            redacted = {"type": "redacted_thinking", "data": "opaque=="}
            return {**message, "content": [thinking, redacted, *message["content"]]}

    with ThinkingServer([text("Answer.")], chunk_chars=7) as server:
        seen: list[Any] = []
        message, _ = await stream(sdk(server, clients), seen)
    thinking, redacted, answer = message.content
    assert (thinking.thinking, thinking.signature) == ("Hmm. " * 20, "sig-1")
    assert redacted.data == "opaque==" and answer.text == "Answer."
    assert [e.type for e in seen if e.type in ("thinking", "signature")][-1] == "signature"
