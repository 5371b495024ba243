"""The local server's streamed answers: the Messages API's server-sent events, block by block,
read back by the real ``anthropic`` SDK's stream parser."""

from __future__ import annotations

import json

import anthropic

import gr_notebook as gr
from gr_notebook.testing import MessagesServer
from gr_notebook.testing.sse import encode, message_events

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [
        {"type": "thinking", "thinking": "Let me think. " * 10, "signature": "sig=="},
        {"type": "text", "text": "Writing it now. " * 8},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "Write",
            "input": {"file_path": "/a", "content": "x" * 100},
        },
        {"type": "redacted_thinking", "data": "opaque"},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 40},
}


def test_each_block_streams_as_its_deltas() -> None:
    events = list(message_events(MESSAGE))
    assert [e["type"] for e in events][:2] == ["message_start", "content_block_start"]
    assert (
        events[0]["message"]["content"] == []
        and events[0]["message"]["usage"]["output_tokens"] == 1
    )
    deltas: dict[int, list[dict[str, object]]] = {}
    for e in events:
        if e["type"] == "content_block_delta":
            deltas.setdefault(e["index"], []).append(e["delta"])
    assert {d["type"] for d in deltas[0]} == {"thinking_delta", "signature_delta"}
    assert (
        "".join(str(d.get("thinking", "")) for d in deltas[0]) == MESSAGE["content"][0]["thinking"]
    )
    assert deltas[0][-1] == {"type": "signature_delta", "signature": "sig=="}
    assert len(deltas[1]) > 1  # a long text arrives in pieces
    assert (
        json.loads("".join(str(d["partial_json"]) for d in deltas[2]))
        == MESSAGE["content"][2]["input"]
    )
    assert 3 not in deltas  # a redacted block comes whole in its start event
    assert events[-2] == {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 40},
    }
    assert encode(events[-1:]) == b'event: message_stop\ndata: {"type": "message_stop"}\n\n'


def test_the_sdk_reads_a_streamed_turn_as_the_same_message() -> None:
    script = [
        gr.tool_calls([("write_file", {"path": "a.md", "content": "a" * 150})]),
        gr.text("Done."),
    ]
    with MessagesServer(script) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        ask = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "go"}],
        }
        with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_message()
        plain = client.messages.create(**ask)  # type: ignore[arg-type]
    [use] = streamed.content
    assert use.type == "tool_use" and use.input == {"path": "a.md", "content": "a" * 150}
    assert streamed.stop_reason == "tool_use" and streamed.usage.output_tokens > 1
    assert plain.content[0].type == "text" and plain.content[0].text == "Done."
    assert [r.body.get("stream") for r in server.requests] == [True, None]


def test_side_requests_consume_no_turn() -> None:
    def side(body: dict[str, object]) -> gr.ModelResponse | None:
        return None if body.get("tools") else gr.text("A title")

    tools = [{"name": "noop", "description": "d", "input_schema": {"type": "object"}}]
    with MessagesServer([gr.text("the turn")], side=side) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        ask = {
            "model": "claude-haiku-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "t"}],
        }
        title = client.messages.create(**ask)  # type: ignore[arg-type]
        turn = client.messages.create(**ask, tools=tools)  # type: ignore[arg-type]
        assert server.remaining == 0
    assert title.content[0].text == "A title" and turn.content[0].text == "the turn"  # type: ignore[union-attr]
    assert len(server.requests) == 2  # both recorded
