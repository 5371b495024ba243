"""Extended thinking end to end: the real SDK, the local Messages API server and the loop.

The server signs every thinking block it sends and refuses one that comes back changed, so a
run that completes has sent each block back exactly as it came; dropping or altering one gets
the API's own 400.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.timeline import describe
from gr_notebook.errors import ConfigError, ModelError
from gr_notebook.messages import (
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.base import ModelRequest, ModelResponse, ToolSpec
from gr_notebook.models.catalog import (
    CONTEXT_1M_BETA,
    INTERLEAVED_THINKING_BETA,
    MODELS,
    facts_of,
)
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from tests.conftest import agent_at

KEY = "sk-ant-api03-test-thinking-0000"
READ = gr.tool_call("read_file", path="instructions.md")


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


def model_on(
    server: MessagesServer, model: str = "claude-sonnet-4-6", **options: Any
) -> AnthropicModel:
    retry = RetryPolicy(max_retries=0)
    return AnthropicModel(model, api_key=KEY, base_url=server.url, retry=retry, **options)


def thought(text: str, *blocks: Any, stop: str = "tool_use") -> ModelResponse:
    return ModelResponse((ThinkingBlock(text, ""), *blocks), stop)  # type: ignore[arg-type]


def assistants(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


# -- the argument ---------------------------------------------------------------------------


def test_the_argument_reads_as_a_budget_adaptive_or_a_value() -> None:
    # Summarized by default: Opus 4.7 and later would otherwise send empty thinking, and the
    # dashboard would show nothing (decision 273); None leaves it to the model.
    assert gr.models.Thinking(4096).param() == {
        "type": "enabled",
        "budget_tokens": 4096,
        "display": "summarized",
    }
    assert gr.models.Thinking().param() == {"type": "adaptive", "display": "summarized"}
    assert gr.models.Thinking("adaptive", display=None).param() == {"type": "adaptive"}
    budgeted = AnthropicModel("claude-sonnet-4-5", api_key=KEY, thinking=4096)
    assert budgeted.thinking == gr.models.Thinking(4096)
    assert "thinking=Thinking(budget=4096" in repr(budgeted)
    adaptive = AnthropicModel("claude-opus-4-7", api_key=KEY, thinking="adaptive")
    assert adaptive.thinking == gr.models.Thinking("adaptive")
    off = AnthropicModel("claude-sonnet-4-5", api_key=KEY)
    assert off.thinking is None and "thinking" not in off.request_params(_request())


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"model": "claude-3-5-haiku", "thinking": 4096}, "claude-3-5-haiku has no extended"),
        ({"model": "claude-sonnet-4-5", "thinking": "adaptive"}, "claude-opus-4-7"),
        ({"model": "claude-opus-4-8", "thinking": 4096}, "pass thinking='adaptive'"),
        ({"thinking": 512}, "smallest thinking budget is 1024"),
        ({"thinking": 8192}, "must be below max_tokens (8192)"),
        ({"thinking": 8000, "max_tokens": 4096}, "max_tokens=16192"),
        ({"thinking": True}, "a token budget (e.g. thinking=4096) or 'adaptive'"),
        ({"thinking": "deep"}, "got 'deep'"),
        ({"thinking": 2.5}, "a token budget (e.g. thinking=4096) or 'adaptive', got 2.5"),
    ],
)
def test_bad_thinking_is_one_line_that_says_what_to_pass(
    options: dict[str, Any], says: str
) -> None:
    model = options.pop("model", "claude-sonnet-4-5")
    with pytest.raises(ConfigError) as raised:
        AnthropicModel(model, api_key=KEY, **options)
    message = str(raised.value)
    assert says in message and "\n" not in message


def test_a_bad_display_and_the_openai_adapter_are_refused_with_a_line() -> None:
    with pytest.raises(ConfigError, match="display is 'summarized' or 'omitted'"):
        gr.models.Thinking(4096, display="full")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"gr\.AnthropicModel\(model, thinking=4096\)"):
        gr.OpenAIModel("qwen2.5:7b", base_url="http://localhost:11434/v1", thinking=4096)


def test_a_model_the_catalog_lacks_may_think_either_way() -> None:
    for thinking in (4096, "adaptive"):
        model = AnthropicModel("claude-next-9", api_key=KEY, thinking=thinking)
        assert model.thinking is not None


def test_a_budget_asks_for_interleaved_thinking_where_the_model_needs_the_header() -> None:
    def betas(model: AnthropicModel) -> str | None:
        headers = model._timeout().get("extra_headers") or {}
        return headers.get("anthropic-beta")

    assert betas(AnthropicModel("claude-sonnet-4-5", api_key=KEY, thinking=4096)) == (
        INTERLEAVED_THINKING_BETA
    )
    # adaptive thinking interleaves by itself; Claude 3.7 does not interleave at all
    assert betas(AnthropicModel("claude-opus-4-6", api_key=KEY, thinking="adaptive")) is None
    assert betas(AnthropicModel("claude-3-7-sonnet", api_key=KEY, thinking=4096)) is None
    both = AnthropicModel("claude-sonnet-4-6", api_key=KEY, thinking=4096, context_1m=True)
    assert betas(both) == f"{CONTEXT_1M_BETA},{INTERLEAVED_THINKING_BETA}"


def _request(*messages: Message) -> ModelRequest:
    spec = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
    return ModelRequest((), messages or (Message.user("go"),), (spec,))


# -- the tool loop, end to end ----------------------------------------------------------------


def test_a_tool_loop_sends_every_thinking_block_back_unchanged(
    server: MessagesServer, tmp_path: Path
) -> None:
    server.add(
        thought("I should read the instructions first.", TextBlock("Reading."), READ.content[0])
    )
    server.add(gr.tool_call("list_files"))  # the server thinks on its own
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server, thinking=2048)).run_sync("job")
    assert run.status == "ended"
    requests = [r for r in server.requests if r.path == "/v1/messages"]
    sent = {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}
    assert all(r.body["thinking"] == sent for r in requests)
    assert all(r.headers["anthropic-beta"] == INTERLEAVED_THINKING_BETA for r in requests)
    second, third = (assistants(r.body) for r in requests[1:])
    opening = second[0][0]
    assert opening["type"] == "thinking" and opening["signature"]
    assert opening["thinking"] == "I should read the instructions first."
    # every later request carries each block exactly as the first request after it did
    assert third[0] == second[0]
    assert [content[0]["type"] for content in third] == ["thinking", "thinking"]
    assert [b["type"] for b in third[0]] == ["thinking", "text", "tool_use"]
    # recorded, one event a reply, after its model call
    kinds = [e.kind for e in run.events if e.kind in ("model_call", "thinking")]
    assert kinds == ["model_call", "thinking"] * 3
    frame = run.thinking_df()
    assert list(frame.columns) == ["seq", "turn", "phase", "blocks", "redacted", "chars", "text"]
    assert list(frame["text"]) == [
        "I should read the instructions first.",
        "Thinking through turn 2.",
        "Thinking through turn 3.",
    ]
    assert list(frame["turn"]) == [1, 2, 3] and set(frame["blocks"]) == {1}


def test_a_dropped_or_altered_thinking_block_gets_the_apis_400(server: MessagesServer) -> None:
    server.add(thought("Read it.", ToolUseBlock("toolu_1", "read_file", {})))
    server.add(gr.text("never served"))
    model = model_on(server, thinking=2048)

    async def scenario() -> list[str]:
        first = await model.complete(_request())
        block, use = first.content
        assert isinstance(block, ThinkingBlock) and block.signature
        answered = Message.user(ToolResultBlock("toolu_1", "the instructions"))
        errors = []
        for kept in ((use,), (ThinkingBlock(block.thinking + "!", block.signature), use)):
            asked = Message.user("go")
            try:
                await model.complete(_request(asked, Message("assistant", kept), answered))
            except ModelError as failed:
                errors.append(str(failed))
        return errors

    dropped, altered = asyncio.run(scenario())
    assert "400 invalid_request_error" in dropped
    assert dropped.endswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
        "We recommend you include thinking blocks from previous turns. To avoid this "
        "requirement, disable `thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )
    assert altered.endswith("messages.1.content.0: Invalid `signature` in `thinking` block")
    assert server.remaining == 1  # refused before a turn was spent


def test_redacted_thinking_goes_back_unchanged_and_is_recorded_without_its_data(
    server: MessagesServer, tmp_path: Path
) -> None:
    server.add(ModelResponse((RedactedThinkingBlock(""), READ.content[0]), "tool_use"))
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server, thinking=2048)).run_sync("job")
    assert run.status == "ended"
    [[redacted, _]] = assistants(server.requests[1].body)
    assert redacted["type"] == "redacted_thinking" and len(redacted["data"]) > 40
    first, _ = run.events.of_kind("thinking")
    assert (first["blocks"], first["redacted"], first["text"], first["chars"]) == (0, 1, "", 0)
    assert redacted["data"] not in str(dict(first.data))
    assert Message.from_json(server.requests[1].body["messages"][1]).thinking == (
        RedactedThinkingBlock(redacted["data"]),
    )


def test_adaptive_thinking_with_the_text_omitted(server: MessagesServer, tmp_path: Path) -> None:
    server.add(READ)
    server.add(gr.text("done"))
    model = model_on(server, "claude-opus-4-7", thinking=gr.models.Thinking(display="omitted"))
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "ended"
    body = server.requests[1].body
    assert body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert "anthropic-beta" not in server.requests[1].headers
    [[block, _]] = assistants(body)
    assert block["thinking"] == "" and block["signature"]
    line = describe(run.events.of_kind("thinking")[0])
    assert line == "Thought: 1 block with no text shown"


def test_a_paused_turn_keeps_its_thinking_through_the_continuation(
    server: MessagesServer, tmp_path: Path
) -> None:
    server.add(thought("Search first.", TextBlock("Searching the web."), stop="pause_turn"))
    server.add(thought("Now read.", READ.content[0]))
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server, thinking=2048)).run_sync("job")
    assert run.status == "ended"
    paused = server.requests[1].body["messages"][-1]
    assert paused["role"] == "assistant"
    assert [b["type"] for b in paused["content"]] == ["thinking", "text"]
    assert paused["content"][0]["thinking"] == "Search first."
    [joined] = assistants(server.requests[2].body)
    assert [b["type"] for b in joined] == ["thinking", "text", "thinking", "tool_use"]
    assert joined[:2] == paused["content"]  # sent again exactly as the API paused it
    first, _ = run.events.of_kind("thinking")  # the paused turn is one turn, one event
    assert first["text"] == "Search first.\n\nNow read."


def test_a_tool_use_cut_at_max_tokens_keeps_its_thinking(
    server: MessagesServer, tmp_path: Path
) -> None:
    cut = ToolUseBlock("toolu_cut", "write_file", {"path": "a.md", "content": "hal"})
    server.add(ModelResponse((cut,), "max_tokens"))
    server.add(gr.text("done"))
    run = agent_at(tmp_path, model_on(server, thinking=2048)).run_sync("job")
    assert run.status == "ended"
    body = server.requests[1].body
    [[opening, use]] = assistants(body)
    assert opening["type"] == "thinking" and use["id"] == "toolu_cut"
    [result] = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["is_error"] is True


def test_thinking_counts_in_the_output_and_the_context(tmp_path: Path) -> None:
    def turns(thinking: int | None) -> Any:
        with MessagesServer([READ, READ, gr.text("done")]) as server:
            model = model_on(server, thinking=thinking)
            return agent_at(tmp_path / str(thinking), model).run_sync("job").turns_df()

    plain, thinking = turns(None), turns(2048)
    # the server bills the thinking block as output, as the API does
    assert (thinking["output_tokens"] > plain["output_tokens"]).all()
    # and the context estimate counts the blocks sent back
    assert thinking["layer5_tokens"][2] > plain["layer5_tokens"][2]


def test_the_catalog_says_which_models_think_and_how() -> None:
    def having(kind: str) -> set[str]:
        return {name for name, facts in MODELS.items() if facts.thinking == kind}

    assert having("none") == {"claude-3-5-haiku", "claude-3-opus", "claude-3-haiku"}
    assert having("adaptive") == {
        "claude-fable-5-1",
        "claude-fable-5",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-opus-4-8",
        "claude-opus-4-7",
    }
    assert having("both") == {"claude-opus-4-6", "claude-sonnet-4-6"}
    assert {n for n, f in MODELS.items() if not f.interleaved_beta and f.thinking != "none"} == {
        "claude-3-7-sonnet",
        *having("adaptive"),
    }
    assert facts_of("claude-opus-4-6-20260205").thinking == "both"
    assert facts_of("claude-next-9").thinking == "both"  # unknown: the API decides
