"""The local chat-completions server answering ``"stream": true`` in the chunk format, read by
the real openai SDK and added up by its own accumulator into the answer without streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.scripted import text
from gr_notebook.testing import ChatServer, Fault, bad_arguments
from gr_notebook.testing.chat_server import chat_chunks

MODEL = "qwen2.5:7b"
HELLO = [{"role": "user", "content": "hello"}]
TURN = ModelResponse(
    (
        TextBlock("Let me look at both files."),
        ToolUseBlock("call_1", "read_file", {"path": "a.md"}),
        ToolUseBlock("call_2", "read_file", {"path": "b.md"}),
    ),
    "tool_use",
)


@pytest.fixture
async def clients() -> AsyncIterator[list[openai.AsyncOpenAI]]:
    made: list[openai.AsyncOpenAI] = []
    yield made
    for client in made:
        await client.close()


def sdk(server: ChatServer, clients: list[openai.AsyncOpenAI]) -> Any:
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
    clients.append(client)
    return client.chat.completions


def calls(message: Any) -> list[tuple[str, str, Any]]:
    return [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]


async def accumulate(completions: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
    state: Any = ChatCompletionStreamState()
    chunks = []
    stream = await completions.create(model=MODEL, messages=HELLO, stream=True, **kwargs)
    async for chunk in stream:
        chunks.append(chunk)
        state.handle_chunk(chunk)
    return state.get_final_completion(), chunks


async def test_a_streamed_answer_adds_up_to_the_answer_without_streaming(
    clients: list[Any],
) -> None:
    with ChatServer([TURN], chunk_chars=4) as streamed, ChatServer([TURN]) as whole:
        completion, chunks = await accumulate(
            sdk(streamed, clients), stream_options={"include_usage": True}
        )
        plain = await sdk(whole, clients).create(model=MODEL, messages=HELLO)
    got, want = completion.choices[0], plain.choices[0]
    assert got.message.content == want.message.content == "Let me look at both files."
    assert calls(got.message) == calls(want.message)
    assert got.finish_reason == want.finish_reason == "tool_calls"
    assert completion.usage == plain.usage and completion.usage.prompt_tokens > 0
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # usage comes last
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 7


async def test_usage_comes_only_when_asked_for(clients: list[Any]) -> None:
    with ChatServer([text("hi")]) as server:
        completion, chunks = await accumulate(sdk(server, clients))
    assert completion.usage is None and all(c.choices for c in chunks)


def test_each_tool_call_opens_with_its_name_then_streams_its_arguments() -> None:
    completion = {
        "id": "chatcmpl-1",
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "write_file", "arguments": '{"path": "x.md"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    chunks = chat_chunks(completion, chunk_chars=5)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1]["tool_calls"][0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_file", "arguments": ""},
    }
    pieces = [d["tool_calls"][0]["function"]["arguments"] for d in deltas[2:-1]]
    assert "".join(pieces) == '{"path": "x.md"}' and all(len(p) <= 5 for p in pieces)
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}


async def test_arguments_that_are_not_json_stream_as_they_are(clients: list[Any]) -> None:
    with ChatServer([bad_arguments("write_file")], chunk_chars=3) as server:
        completion, _ = await accumulate(sdk(server, clients))
    [call] = completion.choices[0].message.tool_calls
    assert call.function.arguments == '{"path": "notes.md",'


async def test_an_error_chunk_mid_stream_is_raised_by_the_sdk(clients: list[Any]) -> None:
    broken = Fault.stream_error(text("x" * 200), after=3)
    with ChatServer([broken], chunk_chars=4) as server, pytest.raises(openai.APIError) as raised:
        await accumulate(sdk(server, clients))
    assert not isinstance(raised.value, openai.APIStatusError)
    assert raised.value.body == {
        "message": "Overloaded",
        "type": "server_error",
        "param": None,
        "code": None,
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"stream": "yes"}, "stream: must be a boolean"),
        ({"stream_options": {"include_usage": True}}, "only allowed when stream is true"),
        ({"stream": True, "stream_options": "usage"}, "stream_options: must be an object"),
    ],
)
async def test_bad_stream_fields_are_refused(
    clients: list[Any], change: dict[str, Any], problem: str
) -> None:
    with ChatServer([text("never")]) as server:
        with pytest.raises(openai.BadRequestError, match=problem):
            await sdk(server, clients).create(model=MODEL, messages=HELLO, extra_body=change)
        assert server.remaining == 1
