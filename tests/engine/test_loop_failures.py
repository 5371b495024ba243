"""Bad input gets a clear error the model can act on, and nothing is lost."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ScriptExhausted
from gr_notebook.history.store import Store
from gr_notebook.messages import TextBlock, ToolResultBlock
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.workflow import TodoList
from tests.conftest import PHASE_1, bootstrap_script, full_job_script


def last_result(model: gr.ScriptedModel, request: int) -> ToolResultBlock:
    return model.requests[request].messages[-1].content[0]  # type: ignore[return-value]


def test_unknown_tool_is_an_error_result_and_the_run_goes_on(
    make_agent: Callable[..., gr.Agent],
) -> None:
    model = gr.ScriptedModel([gr.tool_call("teleport", to="mars"), gr.text("ok")])
    run = make_agent(model).run_sync("job")
    result = last_result(model, 1)
    assert result.is_error
    assert "Unknown tool 'teleport'" in result.content and "todo_complete" in result.content
    assert run.status == "ended"


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (gr.tool_call("read_file"), "missing required argument 'path'"),
        (gr.tool_call("read_file", path=3), "'path' must be a string, got integer 3"),
        (gr.tool_call("todo_write", todos="a, b"), "'todos' must be an array, got string"),
        (gr.tool_call("todo_write", todos=[{"done": True}]), "'todos[0]' must be a string or"),
        (gr.tool_call("todo_rewind", issue=""), "'issue' must not be empty"),
        (gr.tool_call("todo_complete", force=True), "unexpected argument 'force'"),
        (
            gr.tool_call("job_complete", summary="s", confidence=1.5),
            "'confidence' must be at most 1, got 1.5",
        ),
        (
            gr.tool_call("job_complete", summary="s", confidence=-0.1),
            "'confidence' must be at least 0, got -0.1",
        ),
        (
            gr.tool_call("job_complete", summary="s", confidence="high"),
            "'confidence' must be a number, got string",
        ),
    ],
)
def test_arguments_failing_the_schema_are_error_results(
    make_agent: Callable[..., gr.Agent], call: ModelResponse, fragment: str
) -> None:
    model = gr.ScriptedModel([call, gr.text("ok")])
    run = make_agent(model).run_sync("job")
    result = last_result(model, 1)
    assert result.is_error
    assert fragment in result.content
    assert run.job is None  # an invalid job_complete does not end the job


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "link/passwd"])
def test_paths_outside_the_workspace_are_refused(
    make_agent: Callable[..., gr.Agent], tmp_path: Path, path: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "link").symlink_to("/etc")
    model = gr.ScriptedModel(
        [
            gr.tool_call("read_file", path=path),
            gr.tool_call("write_file", path=path, content="pwned"),
            gr.text("ok"),
        ]
    )
    make_agent(model).run_sync("job")
    for request in (1, 2):
        result = last_result(model, request)
        assert result.is_error
        assert "outside the workspace" in result.content or "absolute path" in result.content
    assert not (tmp_path / "x").exists()


def test_a_tool_that_raises_becomes_an_error_result(make_agent: Callable[..., gr.Agent]) -> None:
    def explode(ctx: gr.tools.ToolContext, params: Mapping[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    tool = gr.Tool("explode", "Always fails.", {"type": "object", "properties": {}}, explode)
    model = gr.ScriptedModel([gr.tool_call("explode"), gr.tool_call("list_files"), gr.text("ok")])
    run = make_agent(model, tools=[tool]).run_sync("job")
    result = last_result(model, 1)
    assert result.is_error and "RuntimeError: disk on fire" in result.content
    [error] = run.events.of_kind("error")
    assert error.data["source"] == "tool" and error.data["tool"] == "explode"
    assert run.status == "ended" and not last_result(model, 2).is_error


def test_a_tool_raising_tool_error_says_its_message(make_agent: Callable[..., gr.Agent]) -> None:
    def picky(ctx: gr.tools.ToolContext, params: Mapping[str, Any]) -> str:
        raise gr.ToolError("the index is stale; call refresh_index() first")

    tool = gr.Tool("picky", "Needs a fresh index.", {"type": "object"}, picky)
    model = gr.ScriptedModel([gr.tool_call("picky"), gr.text("ok")])
    run = make_agent(model, tools=[tool]).run_sync("job")
    assert last_result(model, 1).content == "Error: the index is stale; call refresh_index() first"
    assert not run.events.of_kind("error")


def test_todo_complete_on_an_empty_list(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("archive_and_reset"), gr.tool_call("todo_complete"), gr.text("ok")]
    )
    make_agent(model).run_sync("job")
    result = last_result(model, 2)
    assert result.is_error and "todo_write" in result.content


def test_a_scripted_model_that_runs_dry_fails_the_run(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files")])
    run = make_agent(model).run_sync("job")
    assert run.status == "failed"
    assert isinstance(run.error, ScriptExhausted)
    assert "ran out of responses" in str(run.error) and "add more responses" in str(run.error)
    assert len(model.requests) == 2


def test_a_model_that_raises_mid_phase_leaves_everything_intact(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    def boom(request: ModelRequest) -> ModelResponse:
        raise ConnectionError("the model service went away")

    script: list[Any] = [
        *bootstrap_script(),
        gr.tool_call("todo_write", todos=PHASE_1),
        gr.tool_call("write_file", path="work/a.md", content="gathered a"),
        gr.tool_call("todo_complete"),
        boom,
    ]
    run = make_agent(gr.ScriptedModel(script)).run_sync("job")
    assert run.status == "failed"
    assert "ConnectionError: the model service went away" in (run.reason or "")
    assert run.workspace.read_text("work/a.md") == "gathered a"
    assert run.workspace.exists("archive/phase_00_complete.json")
    todos = json.loads(run.workspace.read_text("todos.json"))
    assert [i["done"] for i in todos["items"]] == [True, False, False, False, False]
    with Store(tmp_path / "store.sqlite") as store:
        stored = store.events(run.run_id)
        [row] = store.runs()
    assert [e.kind for e in stored] == [e.kind for e in run.events]
    assert stored[-1].kind == "run_finished" and stored[-1].data["status"] == "failed"
    assert row["status"] == "failed" and "went away" in row["error"]
    assert row["job_status"] == "failed"


def test_corrupt_todos_json_is_moved_aside_and_reported(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todos.json").write_text('{"items": [ {"title": "half-writ')
    run = make_agent(gr.ScriptedModel([gr.text("ok")])).run_sync("job")
    assert (ws / "todos.json.corrupt").read_text() == '{"items": [ {"title": "half-writ'
    [error] = run.events.of_kind("error")
    assert "todos.json is not valid JSON" in error.data["message"]
    assert "moved aside to todos.json.corrupt" in error.data["message"]
    assert run.todos.kind == "bootstrap"


def test_a_hand_broken_plan_gives_warnings_the_model_sees(
    make_agent: Callable[..., gr.Agent],
) -> None:
    broken = "# Plan\n\n## Phase one - Gather\n- [ ] a\n\n## Phase 2: Write\n- [ ] b\n"
    script = [*bootstrap_script(broken), gr.text("stop")]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    write_result = last_result(model, 7)
    assert not write_result.is_error
    assert "could not read the phase heading '## Phase one - Gather'" in write_result.content
    assert "Phase 2 'Write' has 1 step(s)" in write_result.content
    transition = model.requests[9].messages[-1].text
    assert "Fix these problems in the plan" in transition
    assert run.workspace.read_text("main_plan.md") == broken  # nothing was rewritten


def test_the_iteration_cap_ends_the_run(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files")] * 10)
    run = make_agent(model, max_iterations=4, stuck_turns=None).run_sync("job")
    assert run.status == "budget_exhausted"
    assert "iteration cap of 4" in (run.reason or "")
    assert len(model.requests) == 4


def test_stuck_detection_forces_a_progress_check(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files")] * 6 + [gr.text("ok")])
    run = make_agent(model, stuck_turns=3).run_sync("job")
    checks = run.events.of_kind("progress_check")
    assert [e.turn for e in checks] == [3, 6]
    prompt = model.requests[3].messages[-1].content[-1]
    assert isinstance(prompt, TextBlock)
    assert prompt.text.startswith("PROGRESS CHECK: your todo list has not changed for 3 turns")
    assert "todo_rewind" in prompt.text


def test_a_custom_stuck_detector_replaces_the_default(make_agent: Callable[..., gr.Agent]) -> None:
    seen: list[int] = []

    def detector(turn: int, todos: TodoList) -> str | None:
        seen.append(turn)
        return "PROGRESS CHECK: custom" if turn == 1 else None

    model = gr.ScriptedModel([gr.tool_call("list_files")] * 2 + [gr.text("ok")])
    run = make_agent(model, stuck_detector=detector).run_sync("job")
    assert seen == [0, 1, 2]
    assert len(run.events.of_kind("progress_check")) == 1


def test_calls_after_job_complete_are_not_run(make_agent: Callable[..., gr.Agent]) -> None:
    response = gr.tool_calls(
        [
            ("job_complete", {"summary": "done", "confidence": 0.5}),
            ("write_file", {"path": "late.md", "content": "too late"}),
        ]
    )
    run = make_agent(gr.ScriptedModel([response])).run_sync("job")
    assert run.status == "completed"
    assert not run.workspace.exists("late.md")
    calls = run.tool_calls_df()
    assert list(calls["is_error"]) == [False, True]


def test_cancel_cuts_a_hanging_model_call(make_agent: Callable[..., gr.Agent]) -> None:
    started = asyncio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent = make_agent(hang)

    async def main() -> gr.Run:
        run = agent.start("job")
        await asyncio.wait_for(started.wait(), 5)
        run.cancel()
        return await asyncio.wait_for(run.wait(), 5)

    run = asyncio.run(main())
    assert run.status == "cancelled"
    assert run.events[-1].kind == "run_finished"
    assert run.events[-1].data["status"] == "cancelled"


def test_a_raising_subscriber_is_reported_and_never_breaks_the_run(
    make_agent: Callable[..., gr.Agent],
) -> None:
    agent = make_agent(gr.ScriptedModel([gr.tool_call("list_files"), gr.text("ok")]))

    def broken(event: gr.Event) -> None:
        if event.kind == "tool_call":
            raise ValueError("widget exploded")

    async def main() -> gr.Run:
        run = agent.start("job")
        run.subscribe(broken)
        return await run.wait()

    run = asyncio.run(main())
    assert run.status == "ended"
    [error] = run.events.of_kind("error")
    assert error.data["source"] == "subscriber" and error.data["message"] == "widget exploded"


def test_an_earlier_runs_todo_list_is_archived_not_overwritten(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    earlier = TodoList.of(["Left over"], phase_number=3, phase_total=4, phase_name="Old")
    (ws / "todos.json").write_text(json.dumps(earlier.to_json()))
    run = make_agent(gr.ScriptedModel([gr.text("ok")])).run_sync("job")
    archived = json.loads(run.workspace.read_text("archive/phase_03_superseded.json"))
    assert archived["items"] == [{"title": "Left over", "done": False}]
    assert run.todos.kind == "bootstrap"


def test_non_utf8_file_names_are_shown_escaped_and_the_job_completes(
    tmp_path: Path, make_agent: Callable[..., gr.Agent]
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (Path(os.fsdecode(os.fsencode(root) + b"/caf\xe9.txt"))).write_bytes(b"# Menu\n")
    written_by_a_tool = gr.tool_call("write_file", path="na\udcefve.md", content="# Naive\n")
    model = gr.ScriptedModel([written_by_a_tool, *full_job_script()])
    run = make_agent(model).run_sync("job")
    assert [e.data for e in run.events.of_kind("error")] == []
    assert run.status == "completed" and run.job is not None
    summary = (root / "workspace_summary.md").read_text(encoding="utf-8")
    assert "| caf\\xe9.txt | Menu |" in summary
    assert "| na\\xefve.md | Naive |" in summary


@pytest.mark.parametrize("confidence", [float("nan"), float("inf"), float("-inf")])
def test_job_complete_refuses_a_confidence_that_is_not_a_number_in_range(
    make_agent: Callable[..., gr.Agent], confidence: float
) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("job_complete", summary="done", confidence=confidence), gr.text("ok")]
    )
    run = make_agent(model).run_sync("job")
    result = last_result(model, 1)
    assert result.is_error and "'confidence' must be" in result.content
    assert run.job is None


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"deeper": value}
    return value


@pytest.mark.parametrize("tool", ["write_file", "todo_write", "no_such_tool"])
def test_deeply_nested_tool_input_is_an_error_result_not_a_failed_run(
    make_agent: Callable[..., gr.Agent], tool: str
) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call(tool, path="a.md", content=_nested(1000)), gr.text("ok")]
    )
    run = make_agent(model).run_sync("job")
    assert run.status == "ended", run.error
    result = last_result(model, 1)
    assert result.is_error and "nested" in result.content
    [call] = run.events.of_kind("tool_call")
    assert call["is_error"] and len(json.dumps(dict(call.data))) < 10_000
