"""Hostile servers against both adapters (issue 28): a stream that never ends is bounded by
``timeout=``, streamed or not; a malformed stream (invalid UTF-8, a delta for a block that
never started) is retried as a malformed reply is; a streamed reply cut at the token limit,
or stopped by a content filter, reaches the loop as it does without streaming; and a
timeout that is not a finite number of seconds is refused up front."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.messages import TextBlock
from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.openai_model import OpenAIModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import ChatServer, Fault, MessagesServer
from gr_notebook.testing.chat_server import RAW_MESSAGE
from tests.conftest import agent_at

SECRET = "sk-ant-api03-SECRET-do-not-leak-7f3a9c"
CLAUDE = "claude-sonnet-4-6"
LOCAL = "qwen2.5:7b"
FAST = RetryPolicy(max_retries=2, base_s=0.01, max_s=0.05)
#: The bound every hang must end within: generous, for a loaded 2-core machine.
WITHIN = 10.0


@pytest.fixture
def claude() -> Iterator[Callable[..., tuple[MessagesServer, AnthropicModel]]]:
    servers: list[MessagesServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[MessagesServer, AnthropicModel]:
        server = MessagesServer(turns, chunk_chars=8).start()
        servers.append(server)
        options.setdefault("retry", FAST)
        return server, AnthropicModel(CLAUDE, api_key=SECRET, base_url=server.url, **options)

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def local() -> Iterator[Callable[..., tuple[ChatServer, OpenAIModel]]]:
    servers: list[ChatServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[ChatServer, OpenAIModel]:
        server = ChatServer(turns, chunk_chars=8).start()
        servers.append(server)
        options.setdefault("retry", FAST)
        return server, OpenAIModel(LOCAL, base_url=f"{server.url}/v1", **options)

    yield start
    for server in servers:
        server.close()


async def finished(agent: gr.Agent, instructions: str = "job") -> tuple[gr.Run, float]:
    """Run the agent; a run still going after ``WITHIN`` seconds is stopped and fails the
    test (rather than hanging it). Returns the run and the seconds it took."""
    run = agent.start(instructions)
    started = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.shield(run.wait()), WITHIN)
    except TimeoutError:
        run.cancel("the test gave up")
        await asyncio.wait_for(run.wait(), WITHIN)
        pytest.fail(f"the run was still going after {WITHIN} s: the request never ended")
    return run, time.monotonic() - started


def retries(run: gr.Run) -> list[dict[str, Any]]:
    return [dict(e.data) for e in run.events.of_kind("model_retry")]


def sse(name: str, data: bytes) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


# -- 1. a stream that never ends ---------------------------------------------------------------


class TestTimeoutBoundsTheWholeRequest:
    """A server that keeps sending (a ``ping``, an empty chunk, a blank) every 0.1 s never
    trips a read timeout; ``timeout=`` bounds the whole request all the same."""

    @pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
    async def test_anthropic_an_endless_answer_is_retried(
        self, claude: Any, tmp_path: Path, stream: bool
    ) -> None:
        server, model = claude(
            [Fault.endless(gr.text("never ends"), every=0.1), gr.text("done")],
            timeout=2.0,  # the retried answer too must come within it, on a loaded machine
            stream=stream,
        )
        run, took = await finished(agent_at(tmp_path, model, max_iterations=1))
        assert run.status != "failed" and server.remaining == 0
        [retry] = retries(run)
        assert retry["error_type"] == "RequestTimedOut"
        assert "no complete answer within timeout=2 s" in retry["message"]
        assert took < WITHIN
        assert server.disconnects == 1  # the endless answer's connection was closed

    @pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
    async def test_openai_an_endless_answer_is_retried(
        self, local: Any, tmp_path: Path, stream: bool
    ) -> None:
        server, model = local(
            [Fault.endless(gr.text("never ends"), every=0.1), gr.text("done")],
            timeout=2.0,
            stream=stream,
        )
        run, _ = await finished(agent_at(tmp_path, model, max_iterations=1))
        assert run.status != "failed" and server.remaining == 0
        assert [r["error_type"] for r in retries(run)] == ["RequestTimedOut"]
        assert server.disconnects == 1

    async def test_when_every_try_times_out_the_run_fails_and_says_what_to_do(
        self, claude: Any, local: Any, tmp_path: Path
    ) -> None:
        endless = Fault.endless(gr.text("never ends"), every=0.1)
        once = RetryPolicy(max_retries=1, base_s=0.01)
        for name, serve in (("a", claude), ("b", local)):
            _, model = serve([endless, endless], timeout=0.3, retry=once)
            run, _ = await finished(agent_at(tmp_path / name, model))
            assert run.status == "failed"
            assert "still failed after 1 retry" in str(run.reason)
            assert "no complete answer within timeout=0.3 s" in str(run.reason)
            assert "start the job again to resume it" in str(run.reason)

    async def test_a_slow_answer_within_the_timeout_is_not_cut(
        self, claude: Any, tmp_path: Path
    ) -> None:
        _, model = claude([Fault.drip(0.02, then=gr.text("slow but sure " * 4))], timeout=5.0)
        run, _ = await finished(agent_at(tmp_path, model, max_iterations=1))
        assert run.status != "failed" and not retries(run)

    async def test_a_stop_during_an_endless_stream_is_still_honoured_at_once(
        self, claude: Any, tmp_path: Path
    ) -> None:
        server, model = claude([Fault.endless(gr.text("never"), every=0.1)], timeout=30.0)
        run = agent_at(tmp_path, model).start("job")
        deadline = time.monotonic() + WITHIN
        while not server.requests:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        run.cancel("stopped by the person")
        await asyncio.wait_for(run.wait(), WITHIN)
        assert run.status == "cancelled" and not retries(run)


# -- 20. a timeout that is not a finite number of seconds -------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 0, -1.0, "5", True])
def test_a_timeout_that_is_not_finite_seconds_is_refused_at_once(bad: object) -> None:
    for build in (
        lambda: AnthropicModel(CLAUDE, api_key=SECRET, timeout=bad),  # type: ignore[arg-type]
        lambda: OpenAIModel(LOCAL, base_url="http://127.0.0.1:1/v1", timeout=bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError, match="timeout is seconds per request") as refused:
            build()
        assert repr(bad) in str(refused.value) and "\n" not in str(refused.value)


# -- 12. Anthropic: a malformed stream ---------------------------------------------------------


class TestAnthropicMalformedStream:
    def test_a_delta_for_a_block_that_never_started_is_retried(
        self, claude: Any, tmp_path: Path
    ) -> None:
        stray = sse(
            "content_block_delta",
            b'{"type": "content_block_delta", "index": 7, '
            b'"delta": {"type": "text_delta", "text": "stray"}}',
        )
        server, model = claude([Fault.inject(stray, gr.text("lost")), gr.text("done")])
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        [retry] = retries(run)
        assert retry["error_type"] == "StreamInterrupted"
        assert "a content block or tool call that never started" in retry["message"]

    def test_invalid_utf8_in_a_tool_input_is_retried(self, claude: Any, tmp_path: Path) -> None:
        garbled = sse(
            "content_block_delta",
            b'{"type": "content_block_delta", "index": 0, '
            b'"delta": {"type": "input_json_delta", "partial_json": "{\\"path\\": \\"\xff\xfe"}}',
        )
        call = gr.tool_call("read_file", path="notes.md")
        server, model = claude([Fault.inject(garbled, call, after=3), gr.text("done")])
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        [retry] = retries(run)
        assert retry["error_type"] == "StreamInterrupted"
        assert "not valid UTF-8" in retry["message"]

    def test_a_tool_input_that_is_not_json_is_retried(self, claude: Any, tmp_path: Path) -> None:
        broken = sse(
            "content_block_delta",
            b'{"type": "content_block_delta", "index": 0, '
            b'"delta": {"type": "input_json_delta", "partial_json": "}}}"}}',
        )
        call = gr.tool_call("read_file", path="notes.md")
        server, model = claude([Fault.inject(broken, call, after=3), gr.text("done")])
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        [retry] = retries(run)
        assert retry["error_type"] == "StreamInterrupted"
        assert "Unable to parse tool parameter JSON" in retry["message"]

    def test_when_it_stays_malformed_the_run_fails_with_a_model_error(
        self, claude: Any, tmp_path: Path
    ) -> None:
        stray = sse(
            "content_block_delta",
            b'{"type": "content_block_delta", "index": 3, '
            b'"delta": {"type": "text_delta", "text": "stray"}}',
        )
        _, model = claude([Fault.inject(stray, gr.text("lost"))] * 3)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed"
        assert "the Anthropic API still failed after 2 retries" in str(run.reason)
        [error] = run.events.of_kind("error")
        assert error.data["error_type"] == "ModelError"

    def test_a_body_that_is_not_utf8_is_retried_without_streaming(
        self, claude: Any, tmp_path: Path
    ) -> None:
        _, model = claude(
            [Fault.inject(b'{"id": "\xff\xfe"}', gr.text("lost")), gr.text("done")], stream=False
        )
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and len(retries(run)) == 1


# -- 10. OpenAI: invalid UTF-8 in streamed tool arguments -------------------------------------


def _chunk(delta: bytes) -> bytes:
    head = b'{"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, '
    choice = b'"model": "m", "choices": [{"index": 0, "delta": ' + delta
    return b"data: " + head + choice + b', "finish_reason": null}]}\n\n'


class TestOpenAIMalformedStream:
    def test_invalid_utf8_in_tool_arguments_is_retried(self, local: Any, tmp_path: Path) -> None:
        garbled = _chunk(b'{"tool_calls": [{"index": 0, "function": {"arguments": "\xff\xfe"}}]}')
        call = gr.tool_call("read_file", path="notes.md")
        # after the role chunk and the call's head: the arguments' first piece is garbled
        server, model = local([Fault.inject(garbled, call, after=2), gr.text("done")])
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        [retry] = retries(run)
        assert retry["error_type"] == "StreamInterrupted"
        assert "not valid UTF-8" in retry["message"]

    def test_a_call_to_a_choice_that_never_started_is_retried(
        self, local: Any, tmp_path: Path
    ) -> None:
        stray = _chunk(b'{"tool_calls": [{"index": 4, "function": {"arguments": "{}"}}]}')
        server, model = local([Fault.inject(stray, gr.text("lost"), after=1), gr.text("done")])
        run = agent_at(tmp_path, model, max_iterations=1).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        assert [r["error_type"] for r in retries(run)] == ["StreamInterrupted"]


# -- 11 and 22. OpenAI: a streamed finish at the token limit, or by a content filter ----------


class TestOpenAIStreamedFinishes:
    @pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
    def test_a_reply_cut_at_the_token_limit_is_continued(
        self, local: Any, tmp_path: Path, stream: bool
    ) -> None:
        cut = ModelResponse((TextBlock("The summary so far: the notes s"),), "max_tokens")
        server, model = local([cut, gr.text("done")], stream=stream)
        run = agent_at(tmp_path, model, max_iterations=3).run_sync("job")
        assert run.status != "failed" and server.remaining == 0
        [second] = [r.body for r in server.requests][1:]
        told = [m["content"] for m in second["messages"] if m["role"] == "user"]
        assert any("cut off at the token limit; continue" in t for t in told)
        assert not run.events.of_kind("error")

    @pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
    def test_a_filtered_reply_is_a_refusal(self, local: Any, tmp_path: Path, stream: bool) -> None:
        said = {"role": "assistant", "content": "I can't help with that."}
        filtered = ModelResponse((), "refusal", extra={RAW_MESSAGE: said})
        _, model = local([filtered], stream=stream)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed"
        assert "the model refused: I can't help with that." in str(run.reason)
        recorded = json.dumps([dict(e.data) for e in run.events], default=str)
        assert "FinishReasonError" not in recorded

    @pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
    def test_a_reply_filtered_to_nothing_fails_with_a_model_error(
        self, local: Any, tmp_path: Path, stream: bool
    ) -> None:
        nothing = {"role": "assistant", "content": None}
        filtered = ModelResponse((), "refusal", extra={RAW_MESSAGE: nothing})
        server, model = local([filtered, gr.text("never")], stream=stream)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and len(server.requests) == 1  # not asked again
        assert "content filter" in str(run.reason)
        [error] = run.events.of_kind("error")
        assert error.data["error_type"] == "ModelError"
