"""The Anthropic adapter streams: the real SDK's stream helper against the local server.

What a run gets is what it got without streaming (content, usage, stop reasons, cost,
events); a person watching gets the text and thinking as they arrive; an error event or a
cut connection mid-stream is retried as a 529 is; a cancelled run closes the stream's
connection at once."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.messages import Message, TextBlock, ToolUseBlock
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.call_context import ModelDelta
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import Fault, MessagesServer
from tests.conftest import agent_at, full_job_script

SECRET = "sk-ant-api03-SECRET-do-not-leak-7f3a9c"
MODEL = "claude-sonnet-4-6"
FAST = RetryPolicy(max_retries=3, base_s=0.01, max_s=0.05)
LONG = "I will read the notes, then write the summary the job asks for. " * 30


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[MessagesServer, AnthropicModel]]]:
    servers: list[MessagesServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[MessagesServer, AnthropicModel]:
        server = MessagesServer(turns, chunk_chars=options.pop("chunk_chars", 16)).start()
        servers.append(server)
        options.setdefault("retry", FAST)
        return server, AnthropicModel(MODEL, api_key=SECRET, base_url=server.url, **options)

    yield start
    for server in servers:
        server.close()


async def eventually(condition: Callable[[], bool], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def watched(agent: gr.Agent, instructions: str = "job") -> tuple[gr.Run, list[ModelDelta]]:
    """A run started with a watcher of its stream; call from a running event loop."""
    run = agent.start(instructions)
    deltas: list[ModelDelta] = []
    run.subscribe_stream(deltas.append)
    return run, deltas


def said(deltas: list[ModelDelta], turn: int, kind: str = "text") -> str:
    return "".join(d.text for d in deltas if d.turn == turn and d.kind == kind)


def comparable(run: gr.Run) -> list[tuple[str, int, str]]:
    """The run's events without what depends on the clock or names the run (the workspace
    summary's times, durations, the run id and the workspace's path, and the idempotency key,
    which is the run's own)."""
    varies = {"run_id", "workspace", "key"}
    out = []
    for e in run.events:
        data = {k: v for k, v in e.data.items() if not k.endswith("_s") and k not in varies}
        text = json.dumps(data, sort_keys=True, default=str)
        out.append((e.kind, e.turn, re.sub(r"(\d{4}-\d\d-\d\d )?\d\d:\d\d(:\d\d)?", "T", text)))
    return out


class TestSameResult:
    def test_every_request_is_streamed_and_stream_false_sends_it_whole(
        self, serve: Any, tmp_path: Path
    ) -> None:
        streamed, model = serve([gr.text("done")])
        assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
        whole, plain = serve([gr.text("done")], stream=False)
        assert agent_at(tmp_path / "b", plain).run_sync("job").status == "ended"
        assert streamed.requests[0].body["stream"] is True
        assert "stream" not in whole.requests[0].body
        rest = {k: v for k, v in streamed.requests[0].body.items() if k != "stream"}
        assert rest == whole.requests[0].body
        assert "stream=True" in repr(model) and "stream=False" in repr(plain)

    def test_a_headless_run_records_what_it_recorded_without_streaming(
        self, serve: Any, tmp_path: Path
    ) -> None:
        _, model = serve(full_job_script(), chunk_chars=3)
        _, plain = serve(full_job_script(), stream=False)
        streamed = agent_at(tmp_path / "a", model).run_sync("job")
        whole = agent_at(tmp_path / "b", plain).run_sync("job")
        assert streamed.status == whole.status == "completed"
        assert comparable(streamed) == comparable(whole)
        assert streamed.summary()["cost_usd"] == pytest.approx(whole.summary()["cost_usd"])
        assert streamed.summary()["input_tokens"] == whole.summary()["input_tokens"] > 0

    def test_a_large_max_tokens_needs_the_stream(self, serve: Any, tmp_path: Path) -> None:
        """The SDK refuses a non-streamed request it expects to pass 10 minutes; extended
        thinking wants budgets that large."""
        _, model = serve([gr.text("done")], max_tokens=64_000)
        assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
        _, plain = serve([gr.text("done")], max_tokens=64_000, stream=False)
        run = agent_at(tmp_path / "b", plain).run_sync("job")
        assert run.status == "failed" and "Streaming is required" in str(run.reason)

    async def test_the_response_is_the_one_create_gives(self, serve: Any) -> None:
        turn = ModelResponse(
            (TextBlock("Reading first."), ToolUseBlock("toolu_9", "read_file", {"path": "a"})),
            "tool_use",
        )
        _, model = serve([turn], chunk_chars=2)
        _, plain = serve([turn], stream=False)
        request = ModelRequest((), (Message("user", (TextBlock("go"),)),), ())
        streamed, whole = await model.complete(request), await plain.complete(request)
        assert streamed == whole
        assert streamed.extra["request_id"] == "req_local_1"

    async def test_a_paused_turn_streams_each_segment_and_joins_them(
        self, serve: Any, tmp_path: Path
    ) -> None:
        paused = ModelResponse((TextBlock("Searching the web first. "),), "pause_turn")  # type: ignore[arg-type]
        server, model = serve([paused, gr.text("Found it; done.")])
        run, deltas = watched(agent_at(tmp_path, model))
        await run.wait()
        assert run.status == "ended" and len(server.requests) == 2
        assert said(deltas, 1) == "Searching the web first. Found it; done."
        assert not [d for d in deltas if d.kind == "restart"]
        [call] = run.events.of_kind("model_call")  # one turn, as without streaming
        assert " ".join(call.data["text"].split()) == "Searching the web first. Found it; done."


class TestWatching:
    async def test_a_watcher_gets_the_text_and_the_tools_as_they_arrive(
        self, serve: Any, tmp_path: Path
    ) -> None:
        turn = ModelResponse(
            (TextBlock(LONG), ToolUseBlock("toolu_1", "read_file", {"path": "notes.md"})),
            "tool_use",
        )
        _, model = serve([turn, gr.text("All done here.")])
        run, deltas = watched(agent_at(tmp_path, model))
        await run.wait()
        assert said(deltas, 1) == LONG and said(deltas, 2) == "All done here."
        assert len([d for d in deltas if d.turn == 1 and d.kind == "text"]) > 100
        assert said(deltas, 1, "tool_use") == "read_file"
        kinds = [d.kind for d in deltas if d.turn == 1]
        assert kinds.index("tool_use") == len(kinds) - 1  # after all the text

    async def test_thinking_reaches_the_watcher_before_the_text(self, tmp_path: Path) -> None:
        class ThinkingServer(MessagesServer):
            def _message(self, response: Any, body: Any, turn_number: int) -> dict[str, Any]:
                message = super()._message(response, body, turn_number)
                thinking = {
                    "type": "thinking",
                    "thinking": "Check the notes. " * 4,
                    "signature": "s",
                }
                redacted = {"type": "redacted_thinking", "data": "opaque"}
                return {**message, "content": [thinking, redacted, *message["content"]]}

        with ThinkingServer([gr.text("done")], chunk_chars=5) as server:
            model = AnthropicModel(MODEL, api_key=SECRET, base_url=server.url, retry=FAST)
            run, deltas = watched(agent_at(tmp_path, model, max_iterations=1))
            await run.wait()
        assert said(deltas, 1, "thinking") == "Check the notes. " * 4
        kinds = [d.kind for d in deltas]
        assert kinds.index("redacted_thinking") == kinds.count("thinking")  # right after it
        assert kinds[-1] == "text" and said(deltas, 1) == "done"

    async def test_a_run_with_no_watcher_builds_no_delta(
        self, serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        built: list[ModelDelta] = []
        original = ModelDelta.__init__

        def counting(self: ModelDelta, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            built.append(self)

        monkeypatch.setattr(ModelDelta, "__init__", counting)
        _, model = serve([gr.text(LONG)])
        run = agent_at(tmp_path, model).start("job")
        await run.wait()
        assert run.status == "ended" and built == []

    async def test_a_watcher_that_raises_is_dropped_and_the_run_goes_on(
        self, serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        _, model = serve([gr.text(LONG)])
        run = agent_at(tmp_path, model).start("job")
        calls: list[ModelDelta] = []

        def broken(delta: ModelDelta) -> None:
            calls.append(delta)
            raise RuntimeError("a broken view")

        run.subscribe_stream(broken)
        await run.wait()
        assert run.status == "ended" and len(calls) == 1
        assert "watcher of the model's stream failed" in caplog.text

    async def test_unsubscribing_stops_the_deltas(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([gr.tool_call("read_file", path="x"), gr.text("done")])
        run = agent_at(tmp_path, model).start("job")
        deltas: list[ModelDelta] = []
        unsubscribe = run.subscribe_stream(deltas.append)
        run.subscribe(lambda event: unsubscribe() if event.kind == "model_call" else None)
        await run.wait()
        assert {d.turn for d in deltas} == {1}
        assert run.subscribe_stream(deltas.append)() is None  # a finished run sends nothing


class TestBrokenStreams:
    async def test_an_overloaded_error_mid_stream_is_retried_and_the_view_restarts(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve([Fault.stream_error(gr.text(LONG), after=6), gr.text("done")])
        run, deltas = watched(agent_at(tmp_path, model))
        await run.wait()
        assert run.status == "ended" and len(server.requests) == 2
        [retry] = run.events.of_kind("model_retry")
        assert retry.data["error_type"] == "StreamInterrupted"
        assert retry.data["operation"] == "messages.create"
        assert "overloaded_error mid-stream: Overloaded" in retry.data["message"]
        kinds = [d.kind for d in deltas]
        assert kinds.count("restart") == 1 and kinds.index("restart") == 3  # after 3 deltas
        after = deltas[kinds.index("restart") + 1 :]
        assert "".join(d.text for d in after) == "done"
        [call] = run.events.of_kind("model_call")
        assert call.data["text"] == "done"  # the broken attempt left nothing behind

    async def test_an_error_before_the_stream_retries_as_before_with_nothing_to_void(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve([Fault.overloaded(), gr.text("done")])
        run, deltas = watched(agent_at(tmp_path, model))
        await run.wait()
        assert run.status == "ended" and len(server.requests) == 2
        [retry] = run.events.of_kind("model_retry")
        assert (retry.data["status"], retry.data["error_type"]) == (529, "OverloadedError")
        assert [d.kind for d in deltas] == ["text"] and said(deltas, 1) == "done"

    async def test_a_cut_connection_mid_stream_is_retried(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([Fault.cut(gr.text(LONG), after=5), gr.text("done")])
        run = agent_at(tmp_path, model).start("job")
        await run.wait()
        assert run.status == "ended" and len(server.requests) == 2
        [retry] = run.events.of_kind("model_retry")
        assert "the connection broke mid-stream" in retry.data["message"]

    def test_a_stream_that_ends_without_message_stop_is_retried(self, tmp_path: Path) -> None:
        class Truncating(MessagesServer):
            def _stream_reply(self, message: dict[str, Any], body: dict[str, Any]) -> Any:
                reply = super()._stream_reply(message, body)
                return type(reply)(stream=reply.stream[:-1], headers=reply.headers)

        with Truncating([gr.text("first"), gr.text("second")]) as server:
            model = AnthropicModel(MODEL, api_key=SECRET, base_url=server.url, retry=FAST)
            run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        retries = run.events.of_kind("model_retry")
        assert retries and "ended before its message_stop" in retries[0].data["message"]

    def test_an_error_mid_stream_that_is_no_retry_case_fails_in_one_line(
        self, serve: Any, tmp_path: Path
    ) -> None:
        refused = Fault.stream_error(
            gr.text(LONG), error_type="invalid_request_error", message=f"bad key {SECRET}"
        )
        server, model = serve([refused, gr.text("never")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and len(server.requests) == 1
        assert "Anthropic API error mid-stream (invalid_request_error): bad key" in run.reason
        assert SECRET not in run.reason and "\n" not in run.reason
        assert not run.events.of_kind("model_retry")

    def test_errors_mid_stream_that_never_stop_give_up_after_the_retries(
        self, serve: Any, tmp_path: Path
    ) -> None:
        broken = [Fault.stream_error(gr.text(LONG)) for _ in range(4)]
        server, model = serve(broken)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and len(server.requests) == 4
        assert "still failed after 3 retries (messages.create): StreamInterrupted" in run.reason


class TestCancellation:
    @pytest.mark.parametrize("interrupted", [False, True])
    async def test_cancel_closes_a_stream_in_flight(
        self, serve: Any, tmp_path: Path, interrupted: bool
    ) -> None:
        server, model = serve([Fault.drip(0.25, then=gr.text(LONG))], chunk_chars=4)
        run, deltas = watched(agent_at(tmp_path, model))
        await eventually(lambda: any(d.kind == "text" for d in deltas))
        started = time.monotonic()
        run.cancel("stopped by the person", interrupted=interrupted)
        await asyncio.wait_for(run.wait(), timeout=2.0)
        assert run.status == ("interrupted" if interrupted else "cancelled")
        assert time.monotonic() - started < 1.0
        await eventually(lambda: server.disconnects == 1, within=1.0)
        assert len(said(deltas, 1)) < len(LONG) // 4  # it was cut, not read to its end
        assert not run.events.of_kind("model_call")
