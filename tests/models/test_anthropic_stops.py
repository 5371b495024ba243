"""Stop reasons through the real SDK and the local Messages API server: ``pause_turn`` is
continued inside one turn, and ``max_tokens`` in a tool use is refused with a result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.messages import TextBlock, ToolUseBlock, Usage
from gr_notebook.models.anthropic_model import MAX_PAUSE_CONTINUATIONS, AnthropicModel
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from tests.conftest import agent_at

KEY = "sk-ant-api03-test-stops-0000"


def paused(text: str, usage: Usage | None = None) -> ModelResponse:
    return ModelResponse((TextBlock(text),), "pause_turn", usage)  # type: ignore[arg-type]


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


def model_on(server: MessagesServer) -> AnthropicModel:
    retry = RetryPolicy(max_retries=0)
    return AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url, retry=retry)


def test_pause_turn_is_continued_within_one_turn(server: MessagesServer, tmp_path: Path) -> None:
    server.add(paused("Searching the web.", Usage(100, 10)))
    write = ToolUseBlock("", "write_file", {"path": "a.md", "content": "x"})
    server.add(ModelResponse((write,), "tool_use", Usage(120, 20)))
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server)).run_sync("job")
    assert run.status == "ended"
    first, again, _ = (r.body for r in server.requests)
    # The request again, with the paused content appended as the last (assistant) message.
    assert again["messages"][:-1] == first["messages"]
    assert again["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching the web."}],
    }
    calls = [e.data for e in run.events.of_kind("model_call")]
    assert len(calls) == 2  # one turn for the paused segment and its continuation
    assert (calls[0]["input_tokens"], calls[0]["output_tokens"]) == (220, 30)
    assert calls[0]["stop_reason"] == "tool_use"
    assert (tmp_path / "ws" / "a.md").read_text() == "x"


def test_a_turn_paused_without_end_fails_the_run(server: MessagesServer, tmp_path: Path) -> None:
    for i in range(MAX_PAUSE_CONTINUATIONS + 1):
        server.add(paused(f"step {i}"))
    run = agent_at(tmp_path, model_on(server)).run_sync("job")
    assert run.status == "failed"
    assert "pause_turn" in str(run.reason)
    assert len(server.requests) == MAX_PAUSE_CONTINUATIONS + 1


def test_max_tokens_in_a_tool_use_gets_an_error_result(
    server: MessagesServer, tmp_path: Path
) -> None:
    write = ToolUseBlock("toolu_cut", "write_file", {"path": "a.md", "content": "hal"})
    server.add(ModelResponse((write,), "max_tokens"))
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server)).run_sync("job")
    assert run.status == "ended"
    assert not (tmp_path / "ws" / "a.md").exists()
    last = server.requests[1].body["messages"][-1]
    [result] = [b for b in last["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_cut"
    assert result["is_error"] is True
    assert "cut off at the output token limit" in str(result["content"])
