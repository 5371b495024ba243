"""The local server's SSE encoder, checked against the API's documented event sequence and
against the anthropic SDK's own stream accumulator: what the frames add up to is the message
the server would have answered without streaming, whatever its content blocks are."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from anthropic.lib.streaming._messages import accumulate_event

from gr_notebook.testing.sse import encode, error_frame, message_frames

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk"
USAGE = {
    "input_tokens": 472,
    "output_tokens": 89,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 1200,
}


def message(*content: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_local_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": dict(USAGE),
    }


EVERY_KIND = message(
    {"type": "thinking", "thinking": "Let me think this through, step by step. " * 3,
     "signature": SIGNATURE},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    {"type": "text", "text": "Okay, let's check the weather for San Francisco, CA:"},
    {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
     "input": {"location": "San Francisco, CA", "unit": "fahrenheit", "days": [1, 2]}},
)  # fmt: skip


def accumulate(frames: list[tuple[str, dict[str, Any]]]) -> Any:
    """The frames as the SDK reads them: parsed events, fed to its accumulator."""
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for name, data in frames:
        if name in ("ping", "error"):
            continue  # the SDK skips pings and raises on errors before accumulating
        event = anthropic.types.RawMessageStreamEvent  # a union: let the SDK pick the member
        parsed = anthropic._models.construct_type(type_=event, value=data)
        snapshot = accumulate_event(event=parsed, current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


def test_the_event_sequence_is_the_apis() -> None:
    frames = list(message_frames(EVERY_KIND, chunk_chars=8))
    names = [name for name, _ in frames]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in frames)  # the SSE name is the type
    blocks = names[2:-2]
    starts = [i for i, name in enumerate(blocks) if name == "content_block_start"]
    stops = [i for i, name in enumerate(blocks) if name == "content_block_stop"]
    assert len(starts) == len(stops) == 4
    for number, (start, stop) in enumerate(zip(starts, stops, strict=True)):
        inside = frames[2 + start + 1 : 2 + stop]
        assert all(name == "content_block_delta" for name, _ in inside)
        assert all(data["index"] == number for _, data in frames[2 + start : 2 + stop + 1])


def test_message_start_has_empty_content_and_message_delta_the_final_usage() -> None:
    frames = list(message_frames(EVERY_KIND))
    start = frames[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] == 472 and start["usage"]["output_tokens"] <= 1
    _name, delta = frames[-2]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == USAGE  # cumulative: the totals, not an increment


def test_each_kind_of_block_streams_as_the_api_streams_it() -> None:
    frames = list(message_frames(EVERY_KIND, chunk_chars=8))
    by_index: dict[int, list[dict[str, Any]]] = {}
    for name, data in frames:
        if name.startswith("content_block"):
            by_index.setdefault(data["index"], []).append(data)
    thinking, redacted, text, tool = (by_index[i] for i in range(4))
    assert thinking[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    kinds = [d["delta"]["type"] for d in thinking[1:-1]]
    assert kinds[-1] == "signature_delta" and set(kinds[:-1]) == {"thinking_delta"}
    assert thinking[-2]["delta"]["signature"] == SIGNATURE  # just before the block's stop
    assert redacted[0]["content_block"] == EVERY_KIND["content"][1] and len(redacted) == 2
    pieces = [d["delta"]["text"] for d in text[1:-1]]
    assert all(0 < len(p) <= 8 for p in pieces) and len(pieces) > 1
    assert text[0]["content_block"] == {"type": "text", "text": ""}
    assert tool[0]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "get_weather",
        "input": {},
    }
    partial = "".join(d["delta"]["partial_json"] for d in tool[1:-1])
    assert json.loads(partial) == EVERY_KIND["content"][3]["input"]


@pytest.mark.parametrize("chunk_chars", [1, 5, 24, 10_000])
def test_the_sdk_accumulates_the_frames_into_the_message(chunk_chars: int) -> None:
    snapshot = accumulate(list(message_frames(EVERY_KIND, chunk_chars=chunk_chars)))
    whole = anthropic.types.Message.model_validate(EVERY_KIND)
    assert [b.model_dump(exclude_none=True) for b in snapshot.content] == [
        b.model_dump(exclude_none=True) for b in whole.content
    ]
    assert snapshot.usage.model_dump(exclude_none=True) == whole.usage.model_dump(exclude_none=True)
    assert (snapshot.id, snapshot.stop_reason, snapshot.model) == (
        "msg_local_1",
        "tool_use",
        "claude-sonnet-4-6",
    )


def test_an_unknown_block_goes_whole_in_its_start() -> None:
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    frames = list(message_frames(message(result, stop="end_turn")))
    starts = [data for name, data in frames if name == "content_block_start"]
    assert [s["content_block"] for s in starts] == [result]
    assert not [name for name, _ in frames if name == "content_block_delta"]


def test_an_empty_text_block_and_an_empty_input_stream_no_delta() -> None:
    frames = list(
        message_frames(message({"type": "tool_use", "id": "t", "name": "todo_complete",
                                "input": {}}))
    )  # fmt: skip
    partial = [d["delta"]["partial_json"] for n, d in frames if n == "content_block_delta"]
    assert partial == ["{}"]
    assert accumulate(frames).content[0].input == {}


def test_frames_encode_as_server_sent_events() -> None:
    frame = error_frame("overloaded_error", "Overloaded")
    assert encode(frame) == (
        b"event: error\n"
        b'data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
        b"\n\n"
    )


def test_chunk_chars_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk_chars"):
        list(message_frames(EVERY_KIND, chunk_chars=0))
