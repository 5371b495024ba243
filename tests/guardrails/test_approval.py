"""A person approves a tool call: the policy, who answers, the wait's limits, the events."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.events import ApprovalAnsweredEvent, ApprovalRequestedEvent, ToolCallEvent
from gr_notebook.guardrails import ApprovalAnswer, ApprovalRequest, ConfirmationRequest
from gr_notebook.jupyter.magics import status_line

WRITE = ("write_file", {"path": "a.txt", "content": "hello"})


def scripted(*calls: tuple[str, Mapping[str, Any]]) -> gr.ScriptedModel:
    return gr.ScriptedModel([*(gr.tool_calls([c]) for c in calls), gr.text("done")])


def agent_with(
    make_agent: Callable[..., gr.Agent],
    model: Any,
    policy: gr.ApprovalPolicy | None = None,
    **kwargs: Any,
) -> gr.Agent:
    kwargs.setdefault("stuck_turns", None)
    kwargs.setdefault("self_regulation", False)
    return make_agent(model, policies=[policy or gr.ApprovalPolicy(tools=["write_file"])], **kwargs)


def calls_of(run: gr.Run) -> list[ToolCallEvent]:
    return [e for e in run.events if isinstance(e, ToolCallEvent)]


def answers_of(run: gr.Run) -> list[ApprovalAnsweredEvent]:
    return [e for e in run.events if isinstance(e, ApprovalAnsweredEvent)]


async def pending(run: gr.Run) -> ApprovalRequest:
    for _ in range(1000):
        if run.approvals.pending:
            return run.approvals.pending[0]
        await asyncio.sleep(0)
    raise AssertionError("no request came")


# -- the policy ---------------------------------------------------------------------------------


def test_approval_policy_checks_its_arguments(make_agent: Callable[..., gr.Agent]) -> None:
    with pytest.raises(ConfigError, match=r"tools=\['write_file'\]"):
        gr.ApprovalPolicy(tools="write_file")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="asks for nothing"):
        gr.ApprovalPolicy()
    with pytest.raises(ConfigError, match="when takes a function"):
        gr.ApprovalPolicy(when="yes")  # type: ignore[arg-type]
    for bad in (-1, math.nan, 0):
        with pytest.raises(ConfigError, match="timeout_s"):
            gr.ApprovalPolicy(tools=["write_file"], timeout_s=bad)
    with pytest.raises(ConfigError, match="write_flie"):
        make_agent(policies=[gr.ApprovalPolicy(tools=["write_flie"])]).run_sync("job")


def test_a_denial_wins_over_an_ask(make_agent: Callable[..., gr.Agent]) -> None:
    class Never:
        name = "never"

        def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
            return gr.PolicyDecision.deny("never write")

        def on_result(self, *args: Any, **kwargs: Any) -> None: ...

    model = scripted(WRITE)
    agent = make_agent(
        model,
        policies=[gr.ApprovalPolicy(tools=["write_file"]), Never()],
        confirm=lambda req: True,
        self_regulation=False,
        stuck_turns=None,
    )
    run = agent.run_sync("job")
    assert not answers_of(run)
    assert "never write" in calls_of(run)[0].result
    assert run.policy_df()["decision"].tolist() == ["deny"]


def test_when_picks_the_calls_and_a_raising_rule_asks(
    make_agent: Callable[..., gr.Agent],
) -> None:
    def rule(tool: str, params: Mapping[str, Any]) -> bool:
        if params.get("path") == "boom.txt":
            raise ValueError("boom")
        return str(params.get("path", "")).endswith(".py")

    model = scripted(
        ("write_file", {"path": "a.txt", "content": "x"}),
        ("write_file", {"path": "b.py", "content": "x"}),
        ("write_file", {"path": "boom.txt", "content": "x"}),
    )
    asked: list[ApprovalRequest] = []
    run = agent_with(
        make_agent, model, gr.ApprovalPolicy(when=rule), confirm=lambda r: asked.append(r) or True
    ).run_sync("job")
    assert [r.input["path"] for r in asked] == ["b.py", "boom.txt"]
    assert "failed on this call (ValueError: boom)" in asked[1].reason
    assert all(not c.is_error for c in calls_of(run))


JOB_OF_FOUR = """\
# Notes on tea
## Gather
- Note green tea
- Note black tea
## Write
- Write the summary
- Write the glossary
"""


@pytest.mark.parametrize("include_bookkeeping", [False, True])
def test_the_loops_own_files_are_not_asked_about_unless_asked_for(
    make_agent: Callable[..., gr.Agent], include_bookkeeping: bool
) -> None:
    asked: list[str] = []
    policy = gr.ApprovalPolicy(tools=["write_file"], include_bookkeeping=include_bookkeeping)
    run = agent_with(
        make_agent,
        "simulated",
        policy,
        plan_file="plans/strategy.md",
        confirm=lambda r: asked.append(r.input["path"]) or True,
    ).run_sync(JOB_OF_FOUR)
    assert run.status == "completed"
    assert len([p for p in asked if p.startswith("work/")]) >= 4  # the work is asked about
    own = {"plans/strategy.md", "todos.json", "notes.md", "experiences.md", "workspace_summary.md"}
    if include_bookkeeping:
        assert "plans/strategy.md" in asked
    else:  # never the plan file the agent names, nor the loop's other files
        assert not own & set(asked) and not [p for p in asked if p.startswith("archive/")]
    with pytest.raises(ConfigError, match="include_bookkeeping takes True or False"):
        gr.ApprovalPolicy(tools=["write_file"], include_bookkeeping="yes")  # type: ignore[arg-type]


def test_a_call_is_bookkeeping_only_when_every_path_it_names_is(tmp_path: Path) -> None:
    from gr_notebook.guardrails.policy import PolicyContext, PolicyMemory
    from gr_notebook.tools import Tool

    policy = gr.ApprovalPolicy(tools=["write_file"])
    tool = Tool("write_file", "writes", {"type": "object"}, lambda **k: "")
    context = PolicyContext(gr.Workspace(tmp_path), PolicyMemory("approval"))
    verdicts = {
        path: policy.check(tool, {"path": path, "content": ""}, context=context).verdict
        for path in (
            "main_plan.md",
            "./todos.json",
            "/notes.md",
            "archive/phase_01.md",
            "workspace_summary.md",
            "experiences.md",
            "notes.md/../report.md",
            "archives/x.md",
            "../main_plan.md",
        )
    }
    assert verdicts == {
        "main_plan.md": "allow",
        "./todos.json": "allow",
        "/notes.md": "allow",
        "archive/phase_01.md": "allow",
        "workspace_summary.md": "allow",
        "experiences.md": "allow",
        "notes.md/../report.md": "ask",
        "archives/x.md": "ask",
        "../main_plan.md": "ask",  # outside the workspace: not the plan, so a person sees it
    }


# -- who answers --------------------------------------------------------------------------------


def test_nobody_to_ask_denies_and_says_so(make_agent: Callable[..., gr.Agent]) -> None:
    model = scripted(WRITE)
    run = agent_with(make_agent, model).run_sync("job")
    call = calls_of(run)[0]
    assert call.is_error and "nobody is here to give it" in call.result
    assert "Do not call write_file again" in call.result
    assert not run.workspace.exists("a.txt")
    df = run.approvals_df()
    assert df[["asked", "decision", "by"]].values.tolist() == [["nobody", "deny", "nobody"]]
    assert run.policy_df()["decision"].tolist() == ["ask"]
    assert run.events_df().query("kind == 'policy_decision'")["needs_approval"].tolist() == [True]


def test_confirmer_approves_and_old_confirmers_read_the_request(
    make_agent: Callable[..., gr.Agent],
) -> None:
    seen: list[ConfirmationRequest] = []

    def old_style(request: ConfirmationRequest) -> bool:  # written for budgets
        seen.append(request)
        return request.operation.startswith("tool:")

    run = agent_with(make_agent, scripted(WRITE), confirm=old_style).run_sync("job")
    assert run.workspace.read_text("a.txt") == "hello"
    assert seen[0].operation == "tool:write_file" and seen[0].description
    row = run.approvals_df().iloc[0]
    assert (row["asked"], row["decision"], row["by"]) == ("confirmer", "approve", "confirmer")
    assert row["waited_s"] >= 0


def test_confirm_without_self_regulation_is_accepted(make_agent: Callable[..., gr.Agent]) -> None:
    agent = make_agent(self_regulation=False, confirm=lambda r: True)
    assert agent.definition().confirm is not None
    with pytest.raises(ConfigError, match="belong to self-regulation"):
        make_agent(self_regulation=False, confirm_above_tokens=10)


def test_a_denial_with_a_reason_reaches_the_model(make_agent: Callable[..., gr.Agent]) -> None:
    model = scripted(WRITE)
    confirm = lambda r: ApprovalAnswer.deny("write to notes.md instead")  # noqa: E731
    run = agent_with(make_agent, model, confirm=confirm).run_sync("job")
    result = calls_of(run)[0].result
    assert "a person denied this write_file call" in result
    assert "Their reason: write to notes.md instead" in result
    assert not run.workspace.exists("a.txt")
    sent = [b for m in model.requests[-1].messages for b in m.content]
    assert any("write to notes.md instead" in str(getattr(b, "content", "")) for b in sent)
    assert run.guidance_df()["source"].tolist().count("approval:approval") == 1


def test_the_literal_agent_follows_the_persons_reason(
    make_agent: Callable[..., gr.Agent],
) -> None:
    denied: list[str] = []

    def confirm(request: ConfirmationRequest) -> object:
        if isinstance(request, ApprovalRequest) and not denied:
            denied.append(request.request_id)
            return ApprovalAnswer.deny("wrap up now and call job_complete with what is done")
        return True

    agent = make_agent(
        "simulated:literal",
        policies=[gr.ApprovalPolicy(tools=["write_file"])],
        confirm=confirm,
        self_regulation=False,
    )
    run = agent.run_sync("Write a short note about apples in notes.md.")
    events = list(run.events)
    at = next(i for i, e in enumerate(events) if isinstance(e, ApprovalAnsweredEvent))
    after = [e.tool for e in events[at:] if isinstance(e, ToolCallEvent)]
    assert after[0] == "write_file"  # the denied call itself
    assert after[1] == "job_complete"  # the next move is what the person said
    assert gr.lint_guidance(run) == []  # the person's order is theirs to give


def test_an_edit_runs_and_the_model_is_told(make_agent: Callable[..., gr.Agent]) -> None:
    edits = iter([{"path": 3}, {"path": "b.txt", "content": "edited"}])
    asked: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer.edit(next(edits))

    run = agent_with(make_agent, scripted(WRITE), confirm=confirm).run_sync("job")
    assert asked[1].problem and "path" in asked[1].problem  # asked again, shown the problem
    assert run.workspace.read_text("b.txt") == "edited" and not run.workspace.exists("a.txt")
    call = calls_of(run)[0]
    assert call.input == {"path": "b.txt", "content": "edited"}
    assert call.result.startswith("A person edited this call's input before it ran")
    df = run.approvals_df()
    assert df["decision"].tolist() == ["edit", "edit"]
    assert df["edit_problem"].notna().tolist() == [True, False]


def test_a_confirmer_whose_edits_keep_failing_denies(make_agent: Callable[..., gr.Agent]) -> None:
    run = agent_with(
        make_agent, scripted(WRITE), confirm=lambda r: ApprovalAnswer.edit({"path": 3})
    ).run_sync("job")
    assert calls_of(run)[0].is_error
    assert len(run.approvals_df()) == 3


# -- the desk: the dashboard's and code's answers ---------------------------------------------


async def test_the_desk_answers_and_a_late_answer_is_refused(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = agent_with(make_agent, scripted(WRITE), confirm=lambda r: False).start("job")
    seen: list[tuple[str, str]] = []
    run.approvals.watch(lambda req, what: seen.append((req.request_id, what)))
    request = await pending(run)
    assert request.tool == "write_file" and request.input == dict(WRITE[1])
    run.approvals.approve()
    await run.wait()
    assert run.workspace.read_text("a.txt") == "hello"
    assert seen == [(request.request_id, "asked"), (request.request_id, "answered")]
    with pytest.raises(RunError, match="is no longer waiting: it was answered"):
        run.approvals.deny("too late", request.request_id)
    with pytest.raises(RunError, match="nothing to approve"):
        run.approvals.approve()
    assert run.approvals_df()["by"].tolist() == ["code"]  # a cell answered, not a click


async def test_a_timeout_denies(make_agent: Callable[..., gr.Agent]) -> None:
    policy = gr.ApprovalPolicy(tools=["write_file"], timeout_s=0.01)
    run = agent_with(make_agent, scripted(WRITE), policy).start("job")
    run.approvals.watch(lambda req, what: None)
    await run.wait()
    assert "nobody answered within 0.01 s" in calls_of(run)[0].result
    assert run.approvals_df()["by"].tolist() == ["timeout"]
    request_id = run.approvals_df()["request_id"][0]
    with pytest.raises(RunError, match="it was timed out"):
        run.approvals.approve(request_id)


async def test_the_deadline_keeps_counting_while_a_call_waits(
    make_agent: Callable[..., gr.Agent],
) -> None:
    clock = gr.FakeClock()

    def slow_turn(request: object) -> object:
        clock.advance(59.95)  # the model took its time: 0.05 s of the limit are left
        return gr.tool_calls([WRITE])

    model = gr.ScriptedModel([slow_turn, gr.tool_calls([WRITE]), gr.text("x")])
    agent = agent_with(make_agent, model, budget=gr.Budget(deadline_s=60), clock=clock)
    run = agent.start("job")

    def watch(request: ApprovalRequest, what: str) -> None:
        if what != "asked":
            clock.advance(1)  # while nobody answered, the limit ran out

    run.approvals.watch(watch)
    await run.wait()
    assert run.approvals_df()["by"].tolist() == ["deadline"]
    assert "time limit ran out" in calls_of(run)[0].result
    assert run.status == "budget_exhausted"


async def test_stop_ends_the_wait_and_the_call_does_not_run(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = agent_with(make_agent, scripted(WRITE)).start("job")
    run.approvals.watch(lambda req, what: None)
    request = await pending(run)
    run.cancel("stopped by the person")
    await run.wait()
    assert run.status == "cancelled"
    assert not run.workspace.exists("a.txt") and not calls_of(run)
    assert [(a.decision, a.by) for a in answers_of(run)] == [("deny", "stop")]
    with pytest.raises(RunError, match="no longer waiting: it was withdrawn"):
        run.approvals.approve(request.request_id)


async def test_a_background_run_is_answered_from_the_desk_with_an_edit(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = agent_with(make_agent, scripted(WRITE)).start("job")
    run.approvals.watch(lambda req, what: None)
    await pending(run)
    run.approvals.edit({"path": "a.txt"})  # content is required
    again = await pending(run)
    assert again.problem and "content" in again.problem
    run.approvals.edit({"path": "a.txt", "content": "fixed"})
    await run.wait()
    assert run.workspace.read_text("a.txt") == "fixed"


def test_answers_are_checked() -> None:
    with pytest.raises(RunError, match="whole new input as a dict"):
        ApprovalAnswer.edit("path=a.txt")  # type: ignore[arg-type]
    with pytest.raises(RunError, match="'approve', 'deny' or 'edit'"):
        ApprovalAnswer("yes")  # type: ignore[arg-type]


def test_events_name_the_call(make_agent: Callable[..., gr.Agent]) -> None:
    run = agent_with(make_agent, scripted(WRITE), confirm=lambda r: True).run_sync("job")
    asked = next(e for e in run.events if isinstance(e, ApprovalRequestedEvent))
    call = calls_of(run)[0]
    assert asked.tool_use_id == call.tool_use_id == answers_of(run)[0].tool_use_id
    store_events = run.store.events(run.run_id)  # type: ignore[union-attr]
    kinds = [e.kind for e in store_events]
    assert "approval_requested" in kinds and "approval_answered" in kinds
    from gr_notebook.history.analysis import approvals_df

    assert len(approvals_df(store_events)) == 1


def test_a_shadow_approval_policy_would_ask_and_nothing_waits(
    make_agent: Callable[..., gr.Agent],
) -> None:
    model = scripted(WRITE)
    agent = make_agent(
        model,
        shadow=[gr.ApprovalPolicy(tools=["write_file"])],
        self_regulation=False,
        stuck_turns=None,
    )
    run = agent.run_sync("job")
    assert run.workspace.read_text("a.txt") == "hello" and run.approvals_df().empty
    rows = run.shadow_df()
    assert rows[["live", "decision"]].values.tolist() == [["allow", "ask"]]


async def test_a_cell_awaits_the_next_request_then_answers_it(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = agent_with(make_agent, scripted(WRITE)).start("job")
    request = await run.approvals.requested(timeout_s=10)  # nothing else attends the desk
    assert request.tool == "write_file" and run.approvals.pending == (request,)
    assert await run.approvals.requested() is request  # already waiting: at once
    line = status_line(run)
    assert "Waiting for approval: write_file (" in line and "run.approvals.approve()" in line
    run.approvals.approve()
    await run.wait()
    assert run.workspace.read_text("a.txt") == "hello"
    assert "Waiting for approval" not in status_line(run)
    with pytest.raises(RunError, match=r"no tool call asked for approval within 0\.01 s"):
        await run.approvals.requested(timeout_s=0.01)


async def test_two_asks_in_one_turn_are_awaited_and_answered_in_turn(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """Notebook 10's pattern, twice: the second ``requested()`` is the second call's request,
    never the one just answered, and answering it twice says it was answered."""
    second = ("write_file", {"path": "b.txt", "content": "world"})
    model = gr.ScriptedModel([gr.tool_calls([WRITE, second]), gr.text("done")])
    run = agent_with(make_agent, model).start("job")
    first = await run.approvals.requested(timeout_s=10)
    run.approvals.approve()
    with pytest.raises(RunError, match=r"'approval-1' \(write_file\) was answered"):
        run.approvals.approve(first.request_id)
    request = await run.approvals.requested(timeout_s=10)
    assert (first.input["path"], request.input["path"]) == ("a.txt", "b.txt")
    run.approvals.approve()
    await asyncio.wait_for(run.wait(), 10)
    assert run.workspace.read_text("b.txt") == "world"
    assert run.approvals_df()[["decision", "by"]].values.tolist() == [["approve", "code"]] * 2


def test_a_confirmers_answer_after_the_timeout_is_a_denial_by_timeout(
    make_agent: Callable[..., gr.Agent],
) -> None:
    clock = gr.FakeClock()

    def slow_yes(request: ApprovalRequest) -> bool:
        clock.advance(5)  # a person at a blocking prompt took 5 s of the 1 s allowed
        return True

    policy = gr.ApprovalPolicy(tools=["write_file"], timeout_s=1)
    agent = agent_with(make_agent, scripted(WRITE), policy, confirm=slow_yes, clock=clock)
    run = agent.run_sync("job")
    assert not run.workspace.exists("a.txt")
    assert "nobody answered within 1 s" in calls_of(run)[0].result
    assert run.approvals_df()[["decision", "by"]].values.tolist() == [["deny", "timeout"]]


def approve_when_asked(run: gr.Run) -> None:
    """An ``on_run`` callback that attends the desk and approves each request as it comes."""

    def answer(request: ApprovalRequest, what: str) -> None:
        if what == "asked":
            run.approvals.approve(request.request_id)

    run.approvals.watch(answer)


def test_the_desk_is_attended_from_on_run(make_agent: Callable[..., gr.Agent]) -> None:
    agent = agent_with(make_agent, scripted(WRITE))
    agent.on_run(approve_when_asked)
    run = agent.run_sync("job")
    assert run.workspace.read_text("a.txt") == "hello"
    assert run.approvals_df()[["asked", "decision", "by"]].values.tolist() == [
        ["desk", "approve", "code"]
    ]
