"""The local chat-completions server, driven by the real ``openai`` SDK and by plain HTTP."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from gr_notebook.models.scripted import text, tool_call
from gr_notebook.testing import ChatServer, Fault, bad_arguments, empty_reply

MODEL = "local-test"
HELLO = [{"role": "user", "content": "hello"}]


def create(server: ChatServer, max_retries: int = 0, **body: Any) -> Any:
    async def call() -> Any:
        client = openai.AsyncOpenAI(
            api_key="test-key", base_url=f"{server.url}/v1", max_retries=max_retries
        )
        try:
            body.setdefault("model", MODEL)
            body.setdefault("messages", HELLO)
            return await client.chat.completions.create(**body)
        finally:
            await client.close()

    return asyncio.run(call())


def post(server: ChatServer, path: str, body: Any, method: str = "POST") -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{server.url}{path}", data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_text_and_tool_calls_in_the_wire_format() -> None:
    with ChatServer([text("hi"), tool_call("read_file", path="a.md")]) as server:
        first = create(server)
        second = create(server)
    assert first.choices[0].message.content == "hi"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage.prompt_tokens > 0 and first.model == MODEL
    [call] = second.choices[0].message.tool_calls
    assert second.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "read_file" and json.loads(call.function.arguments) == {
        "path": "a.md"
    }
    assert second.choices[0].message.content is None


def test_the_mistakes_small_models_make() -> None:
    script = [bad_arguments("read_file"), empty_reply(), tool_call("no_such_tool")]
    with ChatServer(script) as server:
        bad, empty, unknown = (create(server) for _ in range(3))
    assert bad.choices[0].message.tool_calls[0].function.arguments == '{"path": "notes.md",'
    assert empty.choices[0].message.content == "" and not empty.choices[0].message.tool_calls
    assert unknown.choices[0].message.tool_calls[0].function.name == "no_such_tool"


def test_it_lists_its_models_and_refuses_others() -> None:
    with ChatServer([text("hi")], models=["llama3.2", MODEL]) as server:
        status, listed = post(server, "/v1/models", None, method="GET")
        assert status == 200 and [m["id"] for m in listed["data"]] == ["llama3.2", MODEL]
        with pytest.raises(openai.NotFoundError) as raised:
            create(server, model="gpt-9")
        assert raised.value.body["code"] == "model_not_found"  # type: ignore[index]
        assert server.remaining == 1  # a refused request consumes no turn


def test_it_checks_the_key_when_given_one() -> None:
    with (
        ChatServer([text("hi")], api_key="right") as server,
        pytest.raises(openai.AuthenticationError),
    ):
        create(server)


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "tool", "tool_call_id": "x", "content": "r"}], "must answer a tool_call_id"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "next"},
            ],
            "were not answered",
        ),
        ([{"role": "robot", "content": "hi"}], "unknown role"),
        ([], "non-empty list"),
    ],
)
def test_it_refuses_what_the_api_refuses(messages: list[Any], problem: str) -> None:
    with ChatServer([text("hi")]) as server:
        status, body = post(server, "/v1/chat/completions", {"model": MODEL, "messages": messages})
        assert status == 400 and problem in body["error"]["message"]
        assert server.remaining == 1


def test_an_unknown_route_is_a_404() -> None:
    with ChatServer() as server:
        status, body = post(server, "/v1/messages", {"model": MODEL})
    assert status == 404 and "no route" in body["error"]["message"]


def test_faults_are_shared_with_the_messages_server() -> None:
    with ChatServer([Fault.rate_limited(0.05), text("after")]) as server:
        started = time.perf_counter()
        reply = create(server, max_retries=1)
        assert reply.choices[0].message.content == "after"
        assert time.perf_counter() - started >= 0.05
    with ChatServer([Fault.slow(0.1, then=text("late"))]) as server:
        assert create(server).choices[0].message.content == "late"
    with ChatServer([Fault.status(500)]) as server, pytest.raises(openai.InternalServerError):
        create(server)
