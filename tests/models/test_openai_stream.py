"""The OpenAI-compatible adapter streams: the real openai SDK against the local chat server.
The same run as without streaming; the text, a local model's reasoning and the tools it calls
reach a watcher as they arrive; broken streams are retried; a cancel closes the stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.models import ModelResponse
from gr_notebook.models.call_context import ModelDelta
from gr_notebook.models.openai_model import OpenAIModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import ChatServer, Fault, bad_arguments, empty_reply
from gr_notebook.testing.chat_server import RAW_MESSAGE
from tests.conftest import agent_at, full_job_script
from tests.models.test_anthropic_stream import LONG, comparable, eventually, said, watched

MODEL = "qwen2.5:7b"
FAST = RetryPolicy(max_retries=3, base_s=0.01, max_s=0.05)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ChatServer, OpenAIModel]]]:
    servers: list[ChatServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[ChatServer, OpenAIModel]:
        server = ChatServer(turns, chunk_chars=options.pop("chunk_chars", 16)).start()
        servers.append(server)
        options.setdefault("retry", FAST)
        return server, OpenAIModel(MODEL, base_url=f"{server.url}/v1", **options)

    yield start
    for server in servers:
        server.close()


def test_every_request_streams_with_its_usage_and_stream_false_does_not(
    serve: Any, tmp_path: Path
) -> None:
    streamed, model = serve([gr.text("done")])
    whole, plain = serve([gr.text("done")], stream=False)
    assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
    assert agent_at(tmp_path / "b", plain).run_sync("job").status == "ended"
    body = streamed.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "stream" not in whole.requests[0].body
    assert "stream=True" in repr(model) and "stream=False" in repr(plain)


def test_a_headless_run_records_what_it_recorded_without_streaming(
    serve: Any, tmp_path: Path
) -> None:
    _, model = serve(full_job_script(), chunk_chars=3)
    _, plain = serve(full_job_script(), stream=False)
    streamed = agent_at(tmp_path / "a", model).run_sync("job")
    whole = agent_at(tmp_path / "b", plain).run_sync("job")
    assert streamed.status == whole.status == "completed"
    assert comparable(streamed) == comparable(whole)
    assert streamed.summary()["input_tokens"] == whole.summary()["input_tokens"] > 0


def test_small_model_mistakes_still_become_results_the_model_can_act_on(
    serve: Any, tmp_path: Path
) -> None:
    turns = [empty_reply(), bad_arguments("write_file"), gr.tool_call("no_such_tool"), "done"]
    _, model = serve([t if not isinstance(t, str) else gr.text(t) for t in turns], chunk_chars=2)
    run = agent_at(tmp_path, model, max_iterations=3).run_sync("job")
    errors = [e.data for e in run.events.of_kind("tool_call") if e.data["is_error"]]
    assert len(errors) == 2  # the bad arguments and the unknown tool, each an is_error result
    assert [e.data["error_type"] for e in run.events.of_kind("model_retry")] == ["EmptyReply"]


async def test_a_watcher_gets_text_reasoning_and_tool_names(serve: Any, tmp_path: Path) -> None:
    thinking = {
        "role": "assistant",
        "content": LONG,
        "reasoning_content": "The notes first, then the plan.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "notes.md"}'},
            }
        ],
    }
    turn = ModelResponse((), "tool_use", extra={RAW_MESSAGE: thinking})
    _, model = serve([turn, gr.text("done")])
    run, deltas = watched(agent_at(tmp_path, model, max_iterations=2))
    await run.wait()
    assert said(deltas, 1, "thinking") == "The notes first, then the plan."
    assert said(deltas, 1) == LONG and said(deltas, 1, "tool_use") == "read_file"
    assert said(deltas, 2) == "done"
    [first, *_] = run.events.of_kind("tool_call")
    assert first.data["input"] == {"path": "notes.md"}


async def test_an_error_chunk_mid_stream_is_retried_and_the_view_restarts(
    serve: Any, tmp_path: Path
) -> None:
    server, model = serve([Fault.stream_error(gr.text(LONG), after=4), gr.text("done")])
    run, deltas = watched(agent_at(tmp_path, model, max_iterations=1))
    await run.wait()
    assert len(server.requests) == 2
    [retry] = run.events.of_kind("model_retry")
    assert retry.data["error_type"] == "StreamInterrupted"
    assert "server_error mid-stream: Overloaded" in retry.data["message"]
    kinds = [d.kind for d in deltas]
    assert kinds.count("restart") == 1
    assert "".join(d.text for d in deltas[kinds.index("restart") + 1 :]) == "done"


def test_an_invalid_request_error_mid_stream_fails_in_one_line(serve: Any, tmp_path: Path) -> None:
    refused = Fault.stream_error(gr.text(LONG), error_type="invalid_request_error", message="no")
    server, model = serve([refused, gr.text("never")])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "failed" and len(server.requests) == 1
    assert "failed mid-stream (invalid_request_error): no" in str(run.reason)


def test_a_cut_stream_is_retried(serve: Any, tmp_path: Path) -> None:
    server, model = serve([Fault.cut(gr.text(LONG), after=5), gr.text("done")])
    run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
    assert len(server.requests) == 2
    [retry] = run.events.of_kind("model_retry")
    assert retry.data["error_type"] == "APIConnectionError"


def test_a_stream_without_a_finish_reason_is_retried(tmp_path: Path) -> None:
    class Unfinished(ChatServer):
        def _stream_reply(self, message: dict[str, Any], body: dict[str, Any]) -> Any:
            reply = super()._stream_reply(message, body)
            kept = [e for e in reply.stream if b'"finish_reason": "stop"' not in e]
            return type(reply)(stream=tuple(kept), headers=reply.headers)

    with Unfinished([gr.text("a"), gr.text("b")]) as server:
        model = OpenAIModel(MODEL, base_url=f"{server.url}/v1", retry=FAST)
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
    retries = run.events.of_kind("model_retry")
    assert retries and "ended before a finish_reason" in retries[0].data["message"]


async def test_cancel_closes_a_stream_in_flight(serve: Any, tmp_path: Path) -> None:
    server, model = serve([Fault.drip(0.25, then=gr.text(LONG))], chunk_chars=4)
    run, deltas = watched(agent_at(tmp_path, model))
    await eventually(lambda: any(d.kind == "text" for d in deltas))
    started = time.monotonic()
    run.cancel("stopped by the person")
    await asyncio.wait_for(run.wait(), timeout=2.0)
    assert run.status == "cancelled" and time.monotonic() - started < 1.0
    await eventually(lambda: server.disconnects == 1, within=1.0)
    assert len(said(deltas, 1)) < len(LONG) // 4
    assert all(isinstance(d, ModelDelta) for d in deltas)
