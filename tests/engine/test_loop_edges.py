"""Edge cases of the phase workflow, each once a defect found in review."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gr_notebook as gr
from gr_notebook.messages import TextBlock, ToolResultBlock
from gr_notebook.workflow import TodoItem
from tests.conftest import PHASE_1, PLAN_TWO_PHASES, bootstrap_script, complete_all


def last_result(model: gr.ScriptedModel, request: int) -> ToolResultBlock:
    block = model.requests[request].messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    return block


def test_a_plan_without_phases_still_transitions_cleanly(
    make_agent: Callable[..., gr.Agent],
) -> None:
    script = [
        *bootstrap_script("# Plan\n\nJust do it.\n"),
        gr.tool_call("todo_write", todos=PHASE_1),
        *complete_all(5),
        gr.text("stop"),
    ]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    assert not last_result(model, 15).is_error
    prompt = model.requests[15].messages[-1].content[-1]
    assert isinstance(prompt, TextBlock)
    assert prompt.text.startswith("PHASE TRANSITION: Phase 1")
    assert "the plan has no phases" in prompt.text
    assert not run.events.of_kind("error")


def test_rewind_while_a_transition_is_pending_archives_nothing(
    make_agent: Callable[..., gr.Agent],
) -> None:
    script = [
        *bootstrap_script(),
        gr.tool_call("todo_rewind", issue="the plan is wrong"),
        gr.text("stop"),
    ]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    rewind = model.requests[10].messages[-1].content[-1]
    assert isinstance(rewind, TextBlock)
    # between phases the empty list is the next phase's: the rewind is of Phase 1
    assert "The todo list of Phase 1 'Gather' was already empty" in rewind.text
    assert sorted(p.name for p in (run.workspace.root / "archive").iterdir()) == [
        "phase_00_complete.json"
    ]
    assert "- Phase 1 'Gather': the plan is wrong" in run.workspace.read_text("experiences.md")
    assert list(run.phases_df()["outcome"]) == ["complete"]


def test_a_leftover_complete_plan_is_not_taken_for_this_jobs_completion(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main_plan.md").write_text(
        PLAN_TWO_PHASES.replace("← CURRENT", "✓ COMPLETE").replace(
            "## Phase 2: Write", "## Phase 2: Write ✓ COMPLETE"
        )
    )
    run = make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("a new job")
    assert run.status == "ended" and run.job is None
    assert gr.runs_df(tmp_path / "store.sqlite")["job_status"].iloc[0] == "ended"


def test_todo_write_during_the_bootstrap_closes_the_bootstrap_list(
    make_agent: Callable[..., gr.Agent],
) -> None:
    script = [
        gr.tool_call("write_file", path="main_plan.md", content=PLAN_TWO_PHASES),
        gr.tool_call("todo_write", todos=PHASE_1),
        gr.text("stop"),
    ]
    run = make_agent(gr.ScriptedModel(script)).run_sync("job")
    assert run.workspace.exists("archive/phase_00_replaced.json")
    phases = run.phases_df()
    assert list(phases["phase"]) == [0, 1]
    assert phases["outcome"].iloc[0] == "replaced"
    assert run.todos.phase_label() == "Gather (1 of 2)"


def test_a_list_written_all_done_moves_on_at_once(make_agent: Callable[..., gr.Agent]) -> None:
    done = [{"title": t, "done": True} for t in PHASE_1]
    script = [*bootstrap_script(), gr.tool_call("todo_write", todos=done), gr.text("stop")]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    assert "Every task was written as done" in last_result(model, 10).content
    assert run.workspace.exists("archive/phase_01_complete.json")
    markers = [e.data["marker"] for e in run.events.of_kind("prompt_injected")]
    assert markers == ["PHASE TRANSITION", "PHASE TRANSITION"]


def test_the_final_summary_and_todo_list_show_the_finished_job(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = make_agent("simulated", max_iterations=400).run_sync("## One\n- a\n## Two\n- b\n")
    summary = run.workspace.read_text("workspace_summary.md")
    assert "- 2 of 2 phases complete in main_plan.md" in summary
    assert "- Next: verify the deliverables, write the report, call job_complete()" in summary
    assert run.todos.kind == "job_completion"
    assert run.todos.items[-1] == TodoItem("Call job_complete()", True)
    assert list(run.phases_df()["done"])[-1] == 3
    assert run.events.of_kind("todo_completed")[-1].data["source"] == "job_complete"
