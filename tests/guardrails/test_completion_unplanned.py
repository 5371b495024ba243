"""``PlanBasedChecker`` on a job that was never planned: no plan is not a finished plan.

A rewind during the bootstrap archives the bootstrap list; the model then has no plan and
no todos, and a stop must be refused with an order it can follow, not read as "everything
is done".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.guardrails.completion import StopKind
from gr_notebook.harness import CLAUDE_AGENT_SDK
from gr_notebook.models import ModelResponse
from gr_notebook.models.base import ModelRequest
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.prompts import BOOTSTRAP_TODOS
from gr_notebook.workflow.todos import TodoItem, TodoList
from tests.conftest import PLAN_TWO_PHASES, bootstrap_script
from tests.guardrails.test_completion import INSTRUCTIONS, context


@pytest.mark.parametrize("stop", ["end_turn", "job_complete"])
def test_no_plan_and_no_todos_is_not_a_finished_job(tmp_path: Path, stop: StopKind) -> None:
    result = gr.PlanBasedChecker().check(context(tmp_path, stop=stop))
    assert not result.complete
    assert result.feedback == (
        "<blocker>\n"
        "The job has no plan yet: main_plan.md is missing or cannot be read, and the todo list "
        "is empty, so nothing shows that the job is done.\n"
        "Write main_plan.md with the job's phases: each a '## Phase N: Name' heading followed "
        "by its steps as '- [ ] step' lines, with '← CURRENT' after the heading of the first "
        "phase. Then write the todo list for that phase with todo_write(todos=[...]) and work "
        "through it before you stop.\n"
        "</blocker>"
    )


def test_a_plan_file_without_phases_is_no_plan(tmp_path: Path) -> None:
    plan = Plan.parse("# Execution Plan\n\nSome notes, no phases.\n")
    result = gr.PlanBasedChecker().check(context(tmp_path, plan=plan, plan_file="plan.md"))
    assert not result.complete and result.feedback is not None
    assert "The job has no plan yet: plan.md has no phases" in result.feedback
    assert "Write plan.md with the job's phases" in result.feedback


def test_done_todos_without_a_plan_are_not_a_finished_job(tmp_path: Path) -> None:
    todos = TodoList.of([TodoItem("Task 1", True), TodoItem("Task 2", True)])
    result = gr.PlanBasedChecker().check(context(tmp_path, todos=todos))
    assert not result.complete and result.feedback is not None
    assert "main_plan.md is missing or cannot be read" in result.feedback
    assert "todo list is empty" not in result.feedback


def test_pending_todos_without_a_plan_name_both_and_never_a_plan_to_revise(
    tmp_path: Path,
) -> None:
    """Bootstrap half done: the todos left are listed, and the order does not ask to revise
    a plan that does not exist."""
    items = [TodoItem(t, i < 2) for i, t in enumerate(BOOTSTRAP_TODOS)]
    todos = TodoList.of(items, phase_name="Bootstrap", kind="bootstrap")
    result = gr.PlanBasedChecker().check(context(tmp_path, todos=todos))
    assert not result.complete and result.feedback is not None
    lines = result.feedback.splitlines()
    assert lines[1].startswith("3 of 5 todos in Bootstrap are unfinished: Read instructions.md")
    assert "main_plan.md is missing or cannot be read" in result.feedback
    assert "revise the plan" not in result.feedback
    assert "Finish them (todo_complete() after each), and write main_plan.md with" in (
        result.feedback
    )


def test_another_harness_is_told_what_its_model_can_do(tmp_path: Path) -> None:
    result = gr.PlanBasedChecker().check(context(tmp_path, harness=CLAUDE_AGENT_SDK))
    assert not result.complete and result.feedback is not None
    assert "todo" not in result.feedback
    assert "Write main_plan.md with the job's phases" in result.feedback
    assert "mark each step '- [x]' when it is done" in result.feedback


def test_a_finished_plan_still_completes(tmp_path: Path) -> None:
    plan = Plan.parse(PLAN_TWO_PHASES).with_status(1, "complete").with_status(2, "complete")
    assert gr.PlanBasedChecker().check(context(tmp_path, plan=plan)).complete


def test_no_checker_still_ends_without_a_claim(make_agent: Callable[..., gr.Agent]) -> None:
    """Without a checker nothing judged the stop: an unplanned stop still ends ``ended``
    (decision 305), not ``completed`` and not refused."""
    script = [gr.tool_call("todo_rewind", issue="The task is unclear."), gr.text("All done.")]
    run = make_agent(gr.ScriptedModel(script), stuck_turns=None).run_sync(INSTRUCTIONS)
    assert run.status == "ended" and run.job is None


# -- through the real path: a rewind empties the bootstrap list --------------------------------


def test_a_rewind_that_empties_the_bootstrap_list_does_not_complete(
    make_agent: Callable[..., gr.Agent],
) -> None:
    script = [
        gr.tool_call("todo_rewind", issue="The instructions are unclear; start again."),
        gr.text("All done."),
        gr.text("All done."),
    ]
    run = make_agent(
        gr.ScriptedModel(script),
        task_completion_checker=gr.PlanBasedChecker(),
        max_refusals=2,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    assert run.events.of_kind("rewind")
    assert run.status == "incomplete" and run.job is None
    [first, _] = run.events.of_kind("completion_check")
    assert first["complete"] is False
    assert "The job has no plan yet: main_plan.md is missing or cannot be read" in first["feedback"]
    refusal = [e["text"] for e in run.events.of_kind("prompt_injected")][-1]
    assert refusal.startswith("STOP REFUSED")
    assert "Write main_plan.md with the job's phases" in refusal


def test_after_the_refusal_a_model_that_plans_completes(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """The order is one the model can follow: it plans, works the plan, and the stop goes
    through as before."""
    done = PLAN_TWO_PHASES.replace("← CURRENT", "✓ COMPLETE").replace(
        "## Phase 2: Write", "## Phase 2: Write ✓ COMPLETE"
    )
    script = [
        gr.tool_call("todo_rewind", issue="The instructions are unclear; start again."),
        gr.text("All done."),
        gr.tool_call("write_file", path="main_plan.md", content=done.replace("[ ]", "[x]")),
        gr.text("All done."),
    ]
    run = make_agent(
        gr.ScriptedModel(script),
        task_completion_checker=gr.PlanBasedChecker(),
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    assert [c["complete"] for c in run.events.of_kind("completion_check")] == [False, True]
    assert run.status == "completed"


def test_a_planned_bootstrap_is_unaffected(make_agent: Callable[..., gr.Agent]) -> None:
    """A run that does plan: the bootstrap done and a phase left, the stop is refused for
    the plan's steps, as before, with no word of a missing plan."""
    script = [*bootstrap_script(), gr.text("All done.")]
    run = make_agent(
        gr.ScriptedModel(script),
        task_completion_checker=gr.PlanBasedChecker(),
        max_refusals=1,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    [check] = run.events.of_kind("completion_check")
    assert "The plan has 10 unfinished steps in 2 phases" in check["feedback"]
    assert "no plan" not in check["feedback"]


def test_the_refusal_names_the_agents_plan_file(make_agent: Callable[..., gr.Agent]) -> None:
    script = [gr.tool_call("todo_rewind", issue="Start again."), gr.text("All done.")]
    run = make_agent(
        gr.ScriptedModel(script),
        task_completion_checker=gr.PlanBasedChecker(),
        plan_file="plans/job.md",
        max_refusals=1,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    [check] = run.events.of_kind("completion_check")
    assert "plans/job.md is missing or cannot be read" in check["feedback"]
    assert "Write plans/job.md with the job's phases" in check["feedback"]
    assert "main_plan.md" not in check["feedback"]


def test_a_model_that_obeys_literally_plans_and_finishes(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """The rewind and the stop are scripted; from the refusal on, the ``literal`` profile
    (which does what it reads) answers: it plans, works the plan and completes, and the
    run's orders never contradict each other."""
    literal = gr.SimulatedModel("literal")

    async def obey(request: ModelRequest) -> ModelResponse:
        return await literal.complete(request)

    script = [
        gr.tool_call("todo_rewind", issue="The instructions are unclear; start again."),
        gr.text("All done."),
        *[obey] * 150,
    ]
    run = make_agent(
        gr.ScriptedModel(script), task_completion_checker=gr.PlanBasedChecker()
    ).run_sync(INSTRUCTIONS)
    checks = run.events.of_kind("completion_check")
    assert checks[0]["complete"] is False and checks[-1]["complete"] is True
    assert run.status == "completed" and run.job is not None
    assert run.plan is not None and run.plan.phases
    assert gr.lint_guidance(run) == []
