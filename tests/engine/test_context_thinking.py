"""Compaction and pruning with thinking blocks: the blocks go with the turns they belong to,
and a pruned tool loop still opens with its thinking, as the Messages API asks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.engine import context as context_module
from gr_notebook.engine.context import ContextManager
from gr_notebook.messages import Message, ThinkingBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from gr_notebook.workflow import TodoList
from tests.conftest import agent_at, full_job_script

READ = gr.tool_call("read_file", path="instructions.md")
SUMMARY = gr.tool_call(
    "summarize_progress",
    key_findings=["read it"],
    files_examined=["instructions.md"],
    next_steps=["report"],
)


def step(i: int, *, thinks: bool) -> list[Message]:
    """One call of the tool loop: the assistant's (thinking and) tool use, and its result."""
    thought = (ThinkingBlock(f"step {i}", f"sig-{i}"),) if thinks else ()
    use = ToolUseBlock(f"toolu_{i}", "read_file", {"path": "a.md"})
    return [Message("assistant", (*thought, use)), Message.user(ToolResultBlock(use.id, "ok"))]


def conversation(*thinks: bool, opening: str = "go") -> ContextManager:
    manager = ContextManager()
    manager.append(Message.user(opening))
    for i, thinking in enumerate(thinks):
        for message in step(i, thinks=thinking):
            manager.append(message)
    return manager


def kept_steps(manager: ContextManager) -> list[str]:
    return [m.tool_uses[0].id for m in manager.messages if m.role == "assistant"]


def test_a_loop_that_thinks_at_every_call_is_pruned_as_before() -> None:
    thinking, plain = conversation(*[True] * 6), conversation(*[False] * 6)
    thinking.prune("progress")
    plain.prune("progress")
    assert kept_steps(thinking) == kept_steps(plain) == ["toolu_4", "toolu_5"]
    assert thinking.messages[0].opens_with_thinking


def test_a_cut_at_a_call_without_thinking_moves_on_to_the_next_that_has_it() -> None:
    manager = conversation(True, True, True, True, False, True)
    stats = manager.prune("progress")
    assert kept_steps(manager) == ["toolu_5"]  # fewer kept, never more than five
    assert manager.messages[0].opens_with_thinking and stats.messages_removed == 11


def test_a_loop_that_thought_only_at_its_start_keeps_that_start() -> None:
    manager = conversation(True, False, False, False, False, False)
    manager.prune("progress")
    assert kept_steps(manager) == [f"toolu_{i}" for i in range(6)]
    request = manager.assemble("system", TodoList(), (), turn=9)
    summary, opener = request.messages[:2]
    assert summary.role == "user" and summary.text.startswith("progress")
    assert opener.opens_with_thinking and opener.thinking == (ThinkingBlock("step 0", "sig-0"),)


def test_a_cut_before_the_running_loop_changes_nothing() -> None:
    manager = conversation(True, True)
    manager.append(Message.assistant("A pause to report."))
    manager.append(Message.user("Go on."))  # a new loop starts after this turn
    for message in step(7, thinks=False) + step(8, thinks=False):
        manager.append(message)
    manager.prune("progress")
    assert [m.role for m in manager.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert kept_steps(manager) == ["toolu_7", "toolu_8"]


def test_thinking_counts_in_the_estimate_and_goes_with_its_messages() -> None:
    thinking, plain = conversation(*[True] * 6), conversation(*[False] * 6)
    before = thinking.assemble("s", TodoList(), (), turn=1).layer_tokens[4]
    assert before > plain.assemble("s", TodoList(), (), turn=1).layer_tokens[4]
    stats = thinking.prune("progress")
    kept = sum(m.thinking != () for m in thinking.messages)
    assert kept == 2 and stats.tokens_after < stats.tokens_before
    thinking.compact("recap")
    assert (
        thinking.messages == ()
        and thinking.assemble("s", TodoList(), (), turn=2).layer_tokens[4] == 0
    )


# -- through the loop and the local server, which refuses a loop that lost its thinking ------


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


def claude(server: MessagesServer) -> AnthropicModel:
    return AnthropicModel(
        "claude-3-7-sonnet",
        api_key="sk-ant-api03-test-prune-0000",
        base_url=server.url,
        retry=RetryPolicy(max_retries=0),
        thinking=2048,
    )


def quiet(response: ModelResponse) -> ModelResponse:
    """A reply in which the model did not think (Claude 3.7 after a tool result)."""
    return ModelResponse(response.content, response.stop_reason, extra={"thinking": False})


def script(*, thinks_once: bool) -> list[ModelResponse]:
    later = [quiet(READ)] * 7 + [quiet(SUMMARY)] if thinks_once else [READ] * 7 + [SUMMARY]
    return [READ, *later, gr.text("done")]


@pytest.mark.parametrize("thinks_once", [False, True])
def test_a_pruned_run_keeps_the_thinking_its_tool_loop_needs(
    server: MessagesServer, tmp_path: Path, thinks_once: bool
) -> None:
    for turn in script(thinks_once=thinks_once):
        server.add(turn)
    run = agent_at(tmp_path, claude(server)).run_sync("job")
    assert run.status == "ended", run.reason
    [pruned] = run.events.of_kind("conversation_pruned")
    after = server.requests[-1].body["messages"]
    assert after[0]["content"][0]["text"].startswith("PROGRESS SUMMARY")
    assert after[1]["role"] == "assistant" and after[1]["content"][0]["type"] == "thinking"
    before = server.requests[-2].body["messages"]
    if thinks_once:  # the loop's only thought is at its start: the window reaches back to it
        assert after[1] == before[1] and pruned["messages_removed"] == 1
    else:  # a thought at every call: the last five messages, as without thinking
        assert len(after) < len(before) and pruned["messages_removed"] > 5


def test_without_the_rule_the_api_refuses_the_pruned_loop(
    server: MessagesServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context_module, "_opening_thought", lambda messages, start: start)
    for turn in script(thinks_once=True):
        server.add(turn)
    run = agent_at(tmp_path, claude(server)).run_sync("job")
    assert run.status == "failed"
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(run.reason)


def test_a_whole_job_with_thinking_compacts_at_each_phase(
    server: MessagesServer, tmp_path: Path
) -> None:
    for turn in full_job_script():
        server.add(turn)
    run = agent_at(tmp_path, claude(server)).run_sync("job")
    assert run.status == "completed"
    assert len(run.events.of_kind("compaction")) >= 2
    assert len(run.events.of_kind("thinking")) == len(run.events.of_kind("model_call"))
