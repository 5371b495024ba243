"""Stop reasons the loop handles: a reply cut off at the token limit in a tool use."""

from __future__ import annotations

from pathlib import Path

import gr_notebook as gr
from gr_notebook.messages import TextBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from tests.conftest import agent_at


def cut(*blocks: TextBlock | ToolUseBlock) -> ModelResponse:
    return ModelResponse(tuple(blocks), "max_tokens")


def results_of(model: gr.ScriptedModel, request: int) -> list[ToolResultBlock]:
    last = model.requests[request].messages[-1]
    return [b for b in last.content if isinstance(b, ToolResultBlock)]


def test_a_cut_off_tool_use_is_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    write = ToolUseBlock("", "write_file", {"path": "notes.md", "content": "half a li"})
    model = gr.ScriptedModel([cut(TextBlock("Writing notes."), write), gr.text("done")])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "ended"
    assert not (tmp_path / "ws" / "notes.md").exists()
    [result] = results_of(model, 1)
    assert result.is_error
    assert result.tool_use_id == "toolu_s0000_1"
    assert "cut off at the output token limit" in result.content
    assert "Call write_file again with a shorter input" in result.content
    assert run.events.of_kind("model_call")[0].data["stop_reason"] == "max_tokens"
    assert not run.events.of_kind("tool_call")


def test_whole_calls_before_the_cut_one_run(tmp_path: Path) -> None:
    first = ToolUseBlock("", "write_file", {"path": "a.md", "content": "whole"})
    second = ToolUseBlock("", "write_file", {"path": "b.md", "content": "cu"})
    model = gr.ScriptedModel([cut(first, second), gr.text("done")])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "ended"
    assert (tmp_path / "ws" / "a.md").read_text() == "whole"
    assert not (tmp_path / "ws" / "b.md").exists()
    ran, refused = results_of(model, 1)
    assert (ran.tool_use_id, ran.is_error) == ("toolu_s0000_0", False)
    assert (refused.tool_use_id, refused.is_error) == ("toolu_s0000_1", True)
    assert [e.data["tool"] for e in run.events.of_kind("tool_call")] == ["write_file"]


def test_max_tokens_without_a_tool_use_still_asks_to_continue(tmp_path: Path) -> None:
    model = gr.ScriptedModel([cut(TextBlock("The first half")), gr.text("done")])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "ended"
    last = model.requests[1].messages[-1]
    assert "cut off at the token limit; continue" in last.text
