"""Task-completion checking (seed 002): the checkers, and the spec's ACK scenarios run on
the scripted and the simulated model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.guardrails import (
    Budget,
    CompositeChecker,
    TaskCompletionContext,
    TaskCompletionResult,
)
from gr_notebook.guardrails.completion import StopKind
from gr_notebook.messages import ToolResultBlock, Usage
from gr_notebook.models import Model, ModelResponse
from gr_notebook.models.base import ModelRequest
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoItem, TodoList
from tests.conftest import PLAN_PHASE_1_DONE, PLAN_TWO_PHASES, bootstrap_script, full_job_script

INSTRUCTIONS = "## Gather\n- a\n- b\n- c\n- d\n## Build\n- e\n- f\n- g\n- h\n"

# -- the checkers on their own ------------------------------------------------------------------


def context(
    tmp_path: Path,
    *,
    todos: TodoList | None = None,
    plan: Plan | None = None,
    stop: StopKind = "end_turn",
    **fields: object,
) -> TaskCompletionContext:
    return TaskCompletionContext(
        workspace=gr.Workspace(tmp_path / "ws"),
        todos=todos if todos is not None else TodoList.of([]),
        plan=plan,
        tentative_output="done",
        stop_reason=stop,
        budget=Budget().usage(tokens=0, iterations=1, elapsed_s=0),
        **fields,  # type: ignore[arg-type]
    )


def todo_list(done: int, total: int, **meta: Any) -> TodoList:
    items = [TodoItem(f"Task {i + 1}", i < done) for i in range(total)]
    return TodoList.of(items, phase_number=2, phase_total=3, phase_name="Build", **meta)


def test_result_factories() -> None:
    assert TaskCompletionResult.ok() == TaskCompletionResult(True, None)
    assert TaskCompletionResult.ok("fine").feedback == "fine"
    assert TaskCompletionResult.incomplete("more") == TaskCompletionResult(False, "more")


def test_plan_checker_lists_three_titles_then_dots_with_counts(tmp_path: Path) -> None:
    result = gr.PlanBasedChecker().check(context(tmp_path, todos=todo_list(1, 6)))
    assert not result.complete
    assert result.feedback is not None
    lines = result.feedback.splitlines()
    assert lines[0] == "<blocker>" and lines[-1] == "</blocker>"
    assert lines[1].startswith("5 of 6 todos in Build (2 of 3) are unfinished: ")
    assert lines[1].endswith(": Task 2, Task 3, Task 4, ...")


def test_plan_checker_counts_one_unfinished_todo_in_the_singular(tmp_path: Path) -> None:
    result = gr.PlanBasedChecker().check(context(tmp_path, todos=todo_list(4, 5)))
    assert result.feedback is not None
    assert "1 of 5 todos in Build (2 of 3) is unfinished: Task 5\n" in result.feedback


def test_plan_checker_reads_unfinished_phases_of_the_plan(tmp_path: Path) -> None:
    plan = Plan.parse(PLAN_PHASE_1_DONE)
    result = gr.PlanBasedChecker().check(context(tmp_path, plan=plan))
    assert result.feedback is not None
    assert "The plan has 5 unfinished steps in 1 phase: Write a, Write b, Write c, ..." in (
        result.feedback
    )


def test_plan_checker_passes_when_everything_is_done(tmp_path: Path) -> None:
    plan = Plan.parse(PLAN_TWO_PHASES).with_status(1, "complete").with_status(2, "complete")
    result = gr.PlanBasedChecker().check(context(tmp_path, todos=todo_list(5, 5), plan=plan))
    assert result.complete


def test_plan_checker_lets_job_complete_finish_its_own_list(tmp_path: Path) -> None:
    finale = TodoList.of(
        [
            TodoItem("Verify all deliverables", True),
            TodoItem("Generate summary report", True),
            TodoItem("Call job_complete()"),
        ],
        kind="job_completion",
    )
    plan = Plan.parse(PLAN_TWO_PHASES).with_status(1, "complete").with_status(2, "complete")
    finishing = context(tmp_path, todos=finale, plan=plan, stop="job_complete")
    assert gr.PlanBasedChecker().check(finishing).complete
    assert not gr.PlanBasedChecker().check(context(tmp_path, todos=finale, plan=plan)).complete


def test_file_output_checker(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    checker = gr.FileOutputChecker(["report.md", "out/data.csv", "../escape.md", "d"])
    ctx.workspace.write_text("report.md", "r")
    (ctx.workspace.root / "d").mkdir()
    result = checker.check(ctx)
    assert result.feedback == (
        "<blocker>\n3 of 4 required output files are missing: out/data.csv, ../escape.md, d\n"
        "Create them before you stop.\n</blocker>"
    )
    ctx.workspace.write_text("out/data.csv", "x")
    only = gr.FileOutputChecker(["report.md", "./out/data.csv"]).check(ctx)
    assert only == TaskCompletionResult.ok("All 2 required files exist.")


@pytest.mark.parametrize("files", ["report.md", [], [""]])
def test_file_output_checker_needs_paths(files: Any) -> None:
    with pytest.raises(gr.ConfigError):
        gr.FileOutputChecker(files)


def passes(ctx: TaskCompletionContext) -> TaskCompletionResult:
    return TaskCompletionResult.ok("fine")


def fails(message: str) -> Callable[[TaskCompletionContext], TaskCompletionResult]:
    return lambda ctx: TaskCompletionResult.incomplete(message)


def test_composite_all_must_pass_returns_the_first_failure(tmp_path: Path) -> None:
    calls: list[str] = []

    def never(ctx: TaskCompletionContext) -> TaskCompletionResult:
        calls.append("never")
        raise AssertionError("not reached")

    checker = CompositeChecker([passes, fails("first"), fails("second"), never])
    assert checker.check(context(tmp_path)) == TaskCompletionResult.incomplete("first")
    assert calls == []
    assert CompositeChecker([passes, passes]).check(context(tmp_path)).complete


def test_composite_any_mode_gives_each_failure_on_its_own_line(tmp_path: Path) -> None:
    any_mode = CompositeChecker([fails("one"), fails("two")], all_must_pass=False)
    assert any_mode.check(context(tmp_path)).feedback == "one\ntwo"
    either = CompositeChecker([fails("one"), passes], all_must_pass=False)
    assert either.check(context(tmp_path)).complete


def test_composite_needs_checkers() -> None:
    with pytest.raises(gr.ConfigError, match="at least one checker"):
        CompositeChecker([])
    with pytest.raises(gr.ConfigError, match="check\\(context\\) or a function"):
        CompositeChecker([42])  # type: ignore[list-item]


# -- budgets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"deadline_s": 0}, "deadline_s"),
        ({"deadline_s": float("inf")}, "deadline_s"),
    ],
)
def test_budget_limits_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(gr.ConfigError, match=message):
        Budget(**kwargs)


def test_every_limit_is_exhausted_once_usage_reaches_it() -> None:
    budget = Budget(max_tokens=100, max_iterations=5, deadline_s=60)
    fresh = budget.usage(tokens=99, iterations=4, elapsed_s=59.9)
    assert fresh.exhausted is None
    assert "iteration cap of 5" in str(budget.usage(tokens=0, iterations=5, elapsed_s=0).exhausted)
    assert "token budget of 100" in str(
        budget.usage(tokens=100, iterations=0, elapsed_s=0).exhausted
    )
    assert "deadline of 60 s" in str(budget.usage(tokens=0, iterations=0, elapsed_s=60).exhausted)


def test_max_iterations_is_shorthand_for_the_budget(make_agent: Callable[..., gr.Agent]) -> None:
    assert make_agent(max_iterations=7).budget == Budget(max_iterations=7)
    agent = make_agent(budget=Budget(max_tokens=10, max_iterations=7), max_iterations=7)
    assert agent.budget.max_tokens == 10
    assert agent.budget.max_iterations == 7  # the same limit twice is one limit
    with pytest.raises(gr.ConfigError) as raised:
        make_agent(budget=Budget(max_tokens=10, max_iterations=3), max_iterations=7)
    assert str(raised.value) == (
        "max_iterations=7 and budget=gr.Budget(max_tokens=10, max_iterations=3) disagree; "
        "give the limit once: budget=gr.Budget(max_tokens=10, max_iterations=7) "
        "and no max_iterations="
    )
    with pytest.raises(gr.ConfigError) as raised:
        make_agent(budget=Budget(deadline_s=60), max_iterations=7)
    assert str(raised.value) == (
        "max_iterations=7 and budget=gr.Budget(deadline_s=60) (whose max_iterations defaults "
        "to 200) disagree; give the limit once: budget=gr.Budget(max_iterations=7, "
        "deadline_s=60) and no max_iterations="
    )
    with pytest.raises(gr.ConfigError, match=r"budget takes gr\.Budget"):
        make_agent(budget={"max_tokens": 3}, max_iterations=None)


def test_an_exhausted_deadline_or_token_budget_ends_the_run(
    make_agent: Callable[..., gr.Agent],
) -> None:
    clock = gr.FakeClock()

    def slow(request: ModelRequest) -> ModelResponse:
        clock.advance(40)
        return gr.tool_call("list_files")

    run = make_agent(
        gr.ScriptedModel([slow] * 5),
        budget=Budget(deadline_s=100),
        max_iterations=None,
        clock=clock,
    ).run_sync("job")
    assert (run.status, run.turns) == ("budget_exhausted", 3)
    assert run.reason == "the deadline of 100 s passed (120.0 s elapsed)"
    tokens = make_agent(
        gr.ScriptedModel([gr.tool_call("list_files")] * 50),
        budget=Budget(max_tokens=3_000),
        max_iterations=None,
    ).run_sync("job")
    assert tokens.status == "budget_exhausted" and "token budget of 3,000" in str(tokens.reason)


# -- the ACK scenarios --------------------------------------------------------------------------


def quitting(model: Model, clock: gr.FakeClock | None = None, *, tokens: int = 0) -> Model:
    """The model, with the deadline passing (or the tokens running out) during any reply
    that tries to stop: what 'near-past deadline' means for a run that is under way."""

    async def complete(request: ModelRequest) -> ModelResponse:
        response = await model.complete(request)
        if not response.tool_uses:
            if clock is not None:
                clock.advance(10_000)
            if tokens:
                response = dataclasses.replace(response, usage=Usage(tokens, 0))
        return response

    return gr.FunctionModel(complete, name=model.name)


MODELS = ["scripted", "simulated"]


def early_stopper(kind: str) -> Model:
    if kind == "scripted":
        return gr.ScriptedModel(
            [*bootstrap_script()[:3], gr.text("All done."), *full_job_script()[3:]]
        )
    return gr.SimulatedModel("quitter")


@pytest.mark.parametrize("kind", MODELS)
def test_an_early_stop_is_blocked_while_work_is_incomplete(
    make_agent: Callable[..., gr.Agent], kind: str
) -> None:
    agent = make_agent(
        early_stopper(kind),
        task_completion_checker=gr.PlanBasedChecker(),
        max_iterations=400,
        workspace=None,
        stuck_turns=None,
    )
    run = agent.run_sync(INSTRUCTIONS)
    checks = run.completion_df()
    refused = checks[checks.complete == False]  # noqa: E712
    assert len(refused) >= 1
    assert set(refused.stop) == {"end_turn"} and refused.feedback.str.contains("<blocker>").all()
    assert run.job is not None  # it went back to work and finished the job
    assert run.status == "completed" and bool(checks.complete.iloc[-1]) is True
    prompts = [e["text"] for e in run.events.of_kind("prompt_injected")]
    assert any(p.startswith("STOP REFUSED: the task is not complete") for p in prompts)


@pytest.mark.parametrize("kind", MODELS)
def test_a_stop_is_allowed_once_complete(make_agent: Callable[..., gr.Agent], kind: str) -> None:
    model = gr.ScriptedModel(full_job_script()) if kind == "scripted" else gr.SimulatedModel()
    run = make_agent(
        model, task_completion_checker=gr.PlanBasedChecker(), max_iterations=400, workspace=None
    ).run_sync(INSTRUCTIONS)
    [check] = run.events.of_kind("completion_check")
    assert (check["stop"], check["complete"], check["refusals"]) == ("job_complete", True, 0)
    assert run.status == "completed" and run.job is not None


@pytest.mark.parametrize("kind", MODELS)
def test_the_check_is_bypassed_on_an_exhausted_deadline(
    make_agent: Callable[..., gr.Agent], kind: str
) -> None:
    clock = gr.FakeClock()
    run = make_agent(
        quitting(early_stopper(kind), clock),
        task_completion_checker=gr.PlanBasedChecker(),
        budget=Budget(max_iterations=400, deadline_s=3600),
        max_iterations=None,
        clock=clock,
        workspace=None,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    [check] = run.events.of_kind("completion_check")
    assert check["complete"] is None and "deadline of 3600 s passed" in check["bypassed"]
    # stopped with work left: the limit ended the job, as the deadline between turns does
    assert run.status == "budget_exhausted" and run.job is None
    assert "completion check was bypassed" in str(run.reason)
    assert "deadline of 3600 s passed" in str(run.reason) and "work left" in str(run.reason)


@pytest.mark.parametrize("kind", MODELS)
def test_the_check_is_bypassed_on_an_exhausted_budget(
    make_agent: Callable[..., gr.Agent], kind: str
) -> None:
    run = make_agent(
        quitting(early_stopper(kind), tokens=10**9),
        task_completion_checker=gr.PlanBasedChecker(),
        budget=Budget(max_iterations=400, max_tokens=1_000_000),
        max_iterations=None,
        workspace=None,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    [check] = run.events.of_kind("completion_check")
    assert "token budget of 1,000,000 was used" in check["bypassed"]
    assert run.status == "budget_exhausted" and run.job is None


@pytest.mark.parametrize("kind", MODELS)
def test_a_composite_with_all_must_pass_blocks_on_one_failure(
    make_agent: Callable[..., gr.Agent], kind: str
) -> None:
    model = (
        gr.ScriptedModel(full_job_script() + [gr.text("x")] * 20)
        if kind == "scripted"
        else (gr.SimulatedModel())
    )
    checker = CompositeChecker([gr.PlanBasedChecker(), gr.FileOutputChecker(["never.md"])])
    run = make_agent(
        model,
        task_completion_checker=checker,
        max_iterations=120,
        workspace=None,
        stuck_turns=None,
    ).run_sync(INSTRUCTIONS)
    checks = run.completion_df()
    first = run.events.of_kind("completion_check")[0]
    assert first["stop"] == "job_complete"  # the plan is done: only the file is missing
    assert first["complete"] is False and "never.md" in first["feedback"]
    assert not checks.complete.astype(bool).any()
    assert run.job is None and run.status != "completed"
    if kind == "scripted":  # it only ever tries to stop: 8 refusals in a row end the run
        assert run.status == "incomplete"
        assert len(checks) == 8 and list(checks.refusals) == list(range(1, 9))
        assert str(run.reason).startswith("the stop was refused 8 times in a row")


@pytest.mark.parametrize("kind", MODELS)
def test_with_no_checker_the_agent_stops_freely(
    make_agent: Callable[..., gr.Agent], kind: str
) -> None:
    run = make_agent(early_stopper(kind), max_iterations=400, workspace=None).run_sync(INSTRUCTIONS)
    assert run.status == "ended" and run.job is None
    assert run.reason == "the model ended its turn"
    assert run.events.of_kind("completion_check") == []
    assert run.completion_df().empty


def test_refusals_in_a_row_are_configurable_and_work_breaks_the_streak(
    make_agent: Callable[..., gr.Agent],
) -> None:
    script = [
        gr.text("done"),
        gr.text("done"),
        gr.tool_call("list_files"),
        gr.text("done"),
        gr.text("done"),
        gr.text("done"),
    ]
    run = make_agent(
        gr.ScriptedModel(script),
        task_completion_checker=gr.PlanBasedChecker(),
        max_refusals=3,
        stuck_turns=None,
    ).run_sync("job")
    assert list(run.completion_df().refusals) == [1, 2, 1, 2, 3]
    assert run.status == "incomplete" and run.turns == 6


def test_a_refused_job_complete_is_an_error_result_and_records_no_job(
    make_agent: Callable[..., gr.Agent],
) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("job_complete", summary="s", confidence=0.5), gr.text("ok")]
    )
    run = make_agent(
        model,
        task_completion_checker=gr.FileOutputChecker(["report.md"]),
        max_refusals=2,
        stuck_turns=None,
    ).run_sync("job")
    result = [
        b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ][-1]
    assert result.is_error and result.content.startswith("STOP REFUSED")
    assert "1 of 1 required output file is missing: report.md" in result.content
    assert run.events.of_kind("job_complete") == []
    assert run.status == "incomplete"


def test_a_checker_that_raises_refuses_the_stop(make_agent: Callable[..., gr.Agent]) -> None:
    def broken(ctx: TaskCompletionContext) -> TaskCompletionResult:
        raise KeyError("plan")

    run = make_agent(
        gr.ScriptedModel([gr.text("done")]), task_completion_checker=broken, max_refusals=1
    ).run_sync("job")
    assert run.status == "incomplete"
    assert run.events.of_kind("error")[-1]["source"] == "completion_checker"


def test_the_checker_sees_the_run_as_it_stands(make_agent: Callable[..., gr.Agent]) -> None:
    seen: list[TaskCompletionContext] = []

    def spy(ctx: TaskCompletionContext) -> TaskCompletionResult:
        seen.append(ctx)
        return TaskCompletionResult.ok()

    make_agent(gr.ScriptedModel([gr.text("bye")]), task_completion_checker=spy).run_sync("job")
    [ctx] = seen
    assert (ctx.tentative_output, ctx.stop_reason) == ("bye", "end_turn")
    assert ctx.todos.kind == "bootstrap" and ctx.plan is None
    assert ctx.budget.iterations == 1 and ctx.workspace.exists("instructions.md")


def test_file_output_checker_maps_absolute_paths_inside_the_workspace(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    ctx.workspace.write_text("out/report.md", "r")
    inside = str(ctx.workspace.root / "out" / "report.md")
    assert gr.FileOutputChecker([inside]).check(ctx).complete
    missing = gr.FileOutputChecker([str(ctx.workspace.root / "out" / "other.md")]).check(ctx)
    assert not missing.complete and "missing: out/other.md" in (missing.feedback or "")


def test_file_output_checker_refuses_absolute_paths_outside_the_workspace(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("x")
    with pytest.raises(gr.ConfigError, match="outside the workspace"):
        gr.FileOutputChecker([str(outside)]).check(ctx)


# -- differences from WINK, pinned (docs/decisions/task-completion.md) ---------------------------


def test_an_incomplete_result_without_feedback_still_refuses_the_stop(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """WINK lets such a stop through; here ``complete=False`` decides, and the model is told
    in general words why it goes on."""
    run = make_agent(
        gr.ScriptedModel([gr.text("done"), gr.text("done")]),
        task_completion_checker=lambda ctx: TaskCompletionResult(False),
        max_refusals=2,
    ).run_sync("job")
    assert run.status == "incomplete"
    checks = run.events.of_kind("completion_check")
    assert [c["complete"] for c in checks] == [False, False]
    [refusal] = [e["text"] for e in run.events.of_kind("prompt_injected")]
    assert refusal.startswith("STOP REFUSED: the task is not complete")
    assert "The completion check found unfinished work." in refusal


def test_a_deadline_under_one_second_is_a_deadline(make_agent: Callable[..., gr.Agent]) -> None:
    """WINK refuses a deadline less than a second away; ours is a duration on the agent's
    clock, so half a second is as good a limit as any."""
    clock = gr.FakeClock()

    def slow(request: ModelRequest) -> ModelResponse:
        clock.advance(0.3)
        return gr.tool_call("list_files")

    run = make_agent(
        gr.ScriptedModel([slow] * 5),
        budget=Budget(deadline_s=0.5),
        max_iterations=None,
        clock=clock,
    ).run_sync("job")
    assert (run.status, run.turns) == ("budget_exhausted", 2)
    assert run.reason == "the deadline of 0.5 s passed (0.6 s elapsed)"


def stop_at_the_cap(script: list[ModelResponse], cap: int, **kwargs: Any) -> gr.Agent:
    """A job that ends its last allowed turn by stopping (text, or job_complete)."""
    return gr.Agent(
        gr.ScriptedModel(script),
        max_iterations=cap,
        stuck_turns=None,
        workspace=None,
        **kwargs,
    )


@pytest.mark.parametrize("checker", [None, gr.PlanBasedChecker()], ids=["no-checker", "plan"])
@pytest.mark.parametrize("stop", ["text", "job_complete"])
def test_a_stop_a_spent_limit_lets_through_with_work_left_is_not_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checker: Any, stop: str
) -> None:
    """The last allowed turn stops with the bootstrap unfinished: the same status as a run
    the cap stops between turns, whatever the checker and however the model stops."""
    monkeypatch.chdir(tmp_path)
    job = gr.tool_call("job_complete", summary="Wrapped up.", confidence=0.4)
    last = gr.text("All done.") if stop == "text" else job
    run = stop_at_the_cap(
        [*bootstrap_script()[:2], last], 3, task_completion_checker=checker
    ).run_sync(INSTRUCTIONS)
    assert run.turns == 3
    assert run.status == "budget_exhausted"
    assert (run.job is not None) is (stop == "job_complete")  # reported, yet unfinished
    assert "iteration cap of 3" in str(run.reason)
    cut = stop_at_the_cap([*bootstrap_script()[:2], gr.tool_call("list_files")], 3)
    assert cut.run_sync(INSTRUCTIONS).status == "budget_exhausted"  # the cap between turns
    stored = gr.runs_df("gr_runs/store.sqlite").set_index("run_id")
    assert stored.status[run.run_id] == "budget_exhausted"
    assert stored.job_status[run.run_id] != "completed"  # no column counts it a success


def test_a_job_finished_on_the_last_allowed_turn_is_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = full_job_script()
    run = stop_at_the_cap(script, len(script), task_completion_checker=None).run_sync(INSTRUCTIONS)
    assert run.turns == len(script) and run.job is not None
    assert run.status == "completed"
