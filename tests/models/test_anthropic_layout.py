"""Layer 2 at the tail of the request when caching: the wire layout the server receives, the
layer on every request, and what it does to the cache and cost figures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models.anthropic_layout import tail_text
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.base import ModelRequest, SystemBlock, ToolSpec
from gr_notebook.models.pricing import DEFAULT_PRICES
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from gr_notebook.testing.request_rules import MAX_CACHE_BREAKPOINTS
from tests.conftest import agent_at, full_job_script

MODEL = "claude-sonnet-4-6"
TAG = '<context layer="2" name="todo">'
LAYER2 = "## Todo list\n- [ ] a"


def model(**options: Any) -> AnthropicModel:
    return AnthropicModel(MODEL, api_key="sk-ant-test", **options)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(
        system=(SystemBlock(2, LAYER2), SystemBlock(1, "You are careful.")),
        messages=messages
        or (
            Message.user("Start the job."),
            Message("assistant", (ToolUseBlock("toolu_1", "read_file", {"path": "a"}),)),
            Message("user", (ToolResultBlock("toolu_1", "text of a"),)),
        ),
        tools=(ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),),
    )


def breakpoints(body: Any) -> int:
    if isinstance(body, dict):
        return int(body.get("cache_control") is not None) + sum(
            breakpoints(v) for k, v in body.items() if k != "cache_control"
        )
    if isinstance(body, list):
        return sum(breakpoints(v) for v in body)
    return 0


def tail_blocks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(message, block) positions of every block that carries layer 2."""
    return [
        (i, j)
        for i, message in enumerate(body["messages"])
        for j, block in enumerate(message["content"])
        if block.get("type") == "text" and TAG in block.get("text", "")
    ]


class TestWireLayout:
    def test_layer_2_is_a_tagged_block_after_the_tool_results(self) -> None:
        params = model().request_params(request())
        assert params["system"] == [
            {"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}
        ]
        *_, last = params["messages"]
        result, tail = last["content"]
        assert result["type"] == "tool_result"
        assert result["cache_control"] == {"type": "ephemeral"}  # the end of the conversation
        assert tail == {"type": "text", "text": tail_text(LAYER2)}  # after it: never cached
        assert tail["text"].startswith(TAG) and LAYER2 in tail["text"]

    def test_breakpoints_tools_and_layer_1_then_both_conversation_ends(self) -> None:
        params = model().request_params(request())
        first, _, last = params["messages"]
        assert first["content"][-1]["cache_control"] == {"type": "ephemeral"}  # last request's end
        assert "cache_control" not in last["content"][-1]
        assert breakpoints(params) == 3 <= MAX_CACHE_BREAKPOINTS

    def test_a_long_conversation_still_has_three_breakpoints(self) -> None:
        turns: list[Message] = [Message.user("Start.")]
        for k in range(30):
            turns.append(Message("assistant", (ToolUseBlock(f"toolu_{k}", "read_file", {}),)))
            turns.append(Message("user", (ToolResultBlock(f"toolu_{k}", "ok"),)))
        assert breakpoints(model().request_params(request(*turns))) == 3

    def test_the_system_placement_and_no_cache_keep_layer_2_a_system_block(self) -> None:
        for options in ({"layer2": "system"}, {"cache": False}):
            params = model(**options).request_params(request())
            assert [b["text"] for b in params["system"]] == ["You are careful.", LAYER2]
            assert tail_blocks(params) == []

    def test_without_a_last_user_turn_layer_2_stays_in_system(self) -> None:
        params = model().request_params(
            request(Message.user("hi"), Message("assistant", (TextBlock("Sure"),)))
        )
        assert [b["text"] for b in params["system"]] == ["You are careful.", LAYER2]

    def test_the_request_itself_is_unchanged(self) -> None:
        original = request()
        model().request_params(original)
        assert original.messages[-1].content == (ToolResultBlock("toolu_1", "text of a"),)

    def test_an_unknown_placement_says_what_to_use(self) -> None:
        with pytest.raises(ConfigError, match="'tail'"):
            model(layer2="end")


@pytest.fixture
def served() -> Iterator[list[MessagesServer]]:
    servers: list[MessagesServer] = []
    yield servers
    for server in servers:
        server.close()


def run_on_server(
    servers: list[MessagesServer], tmp_path: Path, layer2: str
) -> tuple[gr.Run, MessagesServer]:
    server = MessagesServer(full_job_script(), min_cacheable_tokens=512).start()
    servers.append(server)
    claude = AnthropicModel(
        MODEL,
        api_key="sk-ant-test",
        base_url=server.url,
        layer2=layer2,  # type: ignore[arg-type]
        retry=RetryPolicy(base_s=0),
    )
    return agent_at(tmp_path, claude).run_sync("job"), server


class TestOnTheServer:
    def test_every_request_carries_the_current_layer_2_once_at_the_tail(
        self, served: list[MessagesServer], tmp_path: Path
    ) -> None:
        run, server = run_on_server(served, tmp_path, "tail")
        assert run.status == "completed"
        bodies = [r.body for r in server.requests if r.path == "/v1/messages"]
        assert len(bodies) == run.turns
        for body in bodies:
            assert body is not None
            [layer1] = body["system"]
            assert "cache_control" in layer1 and TAG not in layer1["text"]
            assert tail_blocks(body) == [
                (len(body["messages"]) - 1, len(body["messages"][-1]["content"]) - 1)
            ]  # exactly one copy, at the very end: no stale todo list left in the conversation
            assert body["messages"][-1]["role"] == "user"
            assert "cache_control" in body["messages"][-1]["content"][-2]
            assert breakpoints(body) <= MAX_CACHE_BREAKPOINTS
        displays = {b["messages"][-1]["content"][-1]["text"] for b in bodies if b}
        assert len(displays) > 1  # the layer tracks the todo list as it changes

    def test_the_tail_reads_the_conversation_and_costs_less(
        self, served: list[MessagesServer], tmp_path: Path
    ) -> None:
        tail, _ = run_on_server(served, tmp_path / "tail", "tail")
        old, _ = run_on_server(served, tmp_path / "old", "system")
        new_df, old_df = tail.turns_df(), old.turns_df()
        assert new_df.cache_read_tokens.sum() > old_df.cache_read_tokens.sum()
        assert new_df.cost_usd.sum() < old_df.cost_usd.sum()
        price = DEFAULT_PRICES[MODEL]
        expected = (
            new_df.input_tokens * price.input
            + new_df.output_tokens * price.output
            + new_df.cache_write_tokens * price.cache_write  # the 5-minute premium, 1.25x
            + new_df.cache_read_tokens * price.cache_read
        ) / 1e6
        assert new_df.cost_usd.to_list() == pytest.approx(expected.to_list())
        assert price.cache_write == pytest.approx(1.25 * price.input)
