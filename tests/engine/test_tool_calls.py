"""Tool execution as its own step: results and the turn's effects as values, for every tool.

A tool takes part by what it declares (``reads``, ``ends_job``) and the effects it returns,
never by its name: these tests give each effect to a tool a person writes.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.engine.state import RunState
from gr_notebook.engine.tool_calls import TurnEffects, call_tools
from gr_notebook.guardrails import TaskCompletionResult
from gr_notebook.messages import ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.tools import (
    CORE_TOOLS,
    CompactContext,
    CompleteJob,
    PruneConversation,
    ResetPolicies,
    Rewound,
    ToolOutput,
    ToolRegistry,
)
from gr_notebook.tools.base import object_schema
from gr_notebook.workflow.phases import JobResult
from tests.conftest import agent_at

ENGINE = Path(gr.__file__).parent / "engine"


def tool(name: str, handler: Any, **declared: Any) -> gr.Tool:
    return gr.Tool(name, f"The {name} tool.", object_schema(), handler, **declared)


def returning(*effects: Any, text: str = "ok", is_error: bool = False) -> Any:
    return lambda ctx, params: ToolOutput(text, is_error, effects=effects)


def run_with(tmp_path: Path, calls: list[ModelResponse], *tools: gr.Tool, **kw: Any) -> gr.Run:
    kw.setdefault("stuck_turns", None)
    model = gr.ScriptedModel([*calls, gr.text("done")])
    return agent_at(tmp_path, model, tools=tools, **kw).run_sync("job")


# -- the step on its own ---------------------------------------------------------------------


def test_call_tools_returns_the_results_and_the_turns_effects(tmp_path: Path) -> None:
    finish = JobResult("finished by my tool", source="model")
    registry = ToolRegistry(
        [
            *CORE_TOOLS,
            tool("squash", returning(PruneConversation("short", {"why": "test"}))),
            tool("tidy", returning(CompactContext(), Rewound("a new way"))),
            tool("finish", returning(CompleteJob(finish))),
        ]
    )
    definition = gr.Agent(store=False, tools=list(registry)[len(CORE_TOOLS) :]).definition()
    state = RunState(definition, workspace=gr.Workspace(tmp_path / "ws"), clock=gr.FakeClock())
    state.phases.start()
    uses = [
        ToolUseBlock("t0", "todo_write", {"todos": ["a", "b"]}),  # the workflow's compaction
        ToolUseBlock("t1", "squash"),
        ToolUseBlock("t2", "tidy"),
        ToolUseBlock("t3", "finish"),
        ToolUseBlock("t4", "list_files"),
    ]
    effects = asyncio.run(call_tools(uses, state, registry))
    assert isinstance(effects, TurnEffects)
    assert [r.tool_use_id for r in effects.results] == ["t0", "t1", "t2", "t3", "t4"]
    assert effects.prune == PruneConversation("short", {"why": "test"})
    assert effects.compaction_due and effects.rewinds == ("a new way",)
    assert not state.phases.compaction_due  # taken with the tool's own ask: one compaction
    assert (effects.job, effects.job_tool) == (finish, "finish")
    assert state.phases.job == finish  # recorded as part of the call
    not_run = effects.results[-1]
    assert (
        not_run.is_error and not_run.content == "Not run: the job was already completed by finish."
    )
    assert effects.worked and effects.give_up is None and not effects.policies_reset


def test_the_workflows_compaction_comes_back_as_an_effect(tmp_path: Path) -> None:
    definition = gr.Agent(store=False).definition()
    state = RunState(definition, workspace=gr.Workspace(tmp_path / "ws"), clock=gr.FakeClock())
    state.phases.start()
    write = ToolUseBlock("t1", "todo_write", {"todos": ["a", "b"]})  # ends the bootstrap early
    effects = asyncio.run(call_tools([write], state, definition.registry))
    assert effects.compaction_due
    assert not state.phases.compaction_due  # handed over, not left as a flag to poll


# -- each effect, from a tool a person writes ---------------------------------------------------


def test_a_tool_that_ends_the_job_is_judged_and_completes_the_run(tmp_path: Path) -> None:
    result = JobResult("shipped", confidence=0.9)
    calls: list[str] = []

    def ship(ctx: gr.tools.ToolContext, params: Mapping[str, Any]) -> ToolOutput:
        calls.append("ran")
        return ToolOutput("Shipped.", effects=(CompleteJob(result),))

    answers = iter([TaskCompletionResult.incomplete("not yet"), TaskCompletionResult.ok()])
    run = run_with(
        tmp_path,
        [gr.tool_call("ship"), gr.tool_call("ship")],
        tool("ship", ship, ends_job=True),
        task_completion_checker=lambda context: next(answers),
    )
    assert calls == ["ran"]  # the refused call did not run
    checks = run.events.of_kind("completion_check")
    assert [(c["stop"], c["complete"]) for c in checks] == [
        ("job_complete", False),
        ("job_complete", True),
    ]
    assert (run.status, run.reason) == ("completed", "ship was called")
    assert run.job == result and run.events.of_kind("job_complete")[0]["summary"] == "shipped"


def test_a_tool_can_prune_the_conversation(tmp_path: Path) -> None:
    run = run_with(
        tmp_path,
        [gr.tool_call("list_files")] * 8 + [gr.tool_call("squash")],
        tool("squash", returning(PruneConversation("what I learned", key_findings=["kept"]))),
    )
    [pruned] = run.events.of_kind("conversation_pruned")
    assert pruned["key_findings"] == ["kept"] and pruned["messages_removed"] > 0
    assert pruned["turn"] == pruned.turn == 9  # written now: the turn of the pruning
    assert run.status == "ended"


def test_a_tool_can_ask_for_a_compaction_only_when_compaction_is_on(tmp_path: Path) -> None:
    calls = [gr.tool_call("list_files"), gr.tool_call("fold")]
    fold = tool("fold", returning(CompactContext()))
    assert len(run_with(tmp_path / "on", calls, fold).events.of_kind("compaction")) == 1
    off = run_with(tmp_path / "off", calls, fold, compaction=False)
    assert off.events.of_kind("compaction") == []


def test_a_tool_can_reset_the_policies_before_its_call_is_recorded(tmp_path: Path) -> None:
    run = run_with(
        tmp_path,
        [gr.tool_call("read_file", path="instructions.md"), gr.tool_call("forget")],
        tool("forget", returning(ResetPolicies())),
        policies=[gr.ReadBeforeWritePolicy()],
    )
    kinds = [e.kind for e in run.events if e.kind in ("policies_reset", "tool_call")]
    assert kinds[-2:] == ["policies_reset", "tool_call"]  # as a rewind's reset is
    [reset] = run.events.of_kind("policies_reset")
    assert reset["source"] == "model" and reset["policies"] == ["read_before_write"]
    assert run.policy_state("read_before_write").invoked_keys == frozenset()


def test_the_effects_of_a_failed_call_are_ignored(tmp_path: Path) -> None:
    broken = tool("broken", returning(CompleteJob(JobResult("no")), is_error=True, text="fail"))
    run = run_with(tmp_path, [gr.tool_call("broken")], broken)
    assert run.job is None and run.reason == "the model ended its turn"


def test_a_tool_that_reads_a_file_gets_the_redundancy_check(tmp_path: Path) -> None:
    def peek(ctx: gr.tools.ToolContext, params: Mapping[str, Any]) -> str:
        return ctx.workspace.read_text(params["file"])

    peeker = gr.Tool(
        "peek",
        "Read a file.",
        object_schema(["file"], file={"type": "string"}),
        peek,
        reads="file",
    )
    run = run_with(tmp_path, [gr.tool_call("peek", file="instructions.md")] * 2, peeker)
    [feedback] = run.events.of_kind("feedback")
    assert feedback["provider"] == "Redundancy" and feedback["tool"] == "peek"
    plain = run_with(
        tmp_path / "plain",
        [gr.tool_call("peek", file="instructions.md")] * 2,
        gr.Tool("peek", "Read a file.", peeker.input_schema, peek),
    )
    assert plain.events.of_kind("feedback") == []  # undeclared, it is not a read


# -- the loop names no tool ---------------------------------------------------------------------


def test_the_loop_and_the_step_name_no_tool_and_poll_no_flag() -> None:
    names = {t.name for t in gr.Agent(store=False).registry}
    for module in ("loop.py", "tool_calls.py"):
        tree = ast.parse((ENGINE / module).read_text())
        literals = {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert not literals & names, f"{module} names tools: {literals & names}"
    loop = ast.parse((ENGINE / "loop.py").read_text())
    polled = [
        ast.unparse(n)
        for n in ast.walk(loop)
        if isinstance(n, ast.Attribute)
        and n.attr in {"job", "pending_prune", "compaction_due"}
        and not (isinstance(n.value, ast.Name) and n.value.id == "effects")
    ]
    assert polled == []  # what a turn did comes from its effects


def test_a_handler_that_records_the_job_itself_ends_the_run(tmp_path: Path) -> None:
    """``ctx.phases.complete_job`` from any tool ends the run after that call, as it always
    did: the calls after it in the turn are not run."""

    def finish(ctx: gr.tools.ToolContext, params: Mapping[str, Any]) -> str:
        ctx.phases.complete_job(JobResult("done by hand"))
        return "recorded"

    model = gr.ScriptedModel(
        [gr.tool_calls([("finish", {}), ("list_files", {})]), gr.text("never asked")]
    )
    run = agent_at(tmp_path, model, tools=[tool("finish", finish)], stuck_turns=None).run_sync(
        "job"
    )
    assert (run.status, run.reason) == ("completed", "finish was called")
    assert run.turns == 1 and run.job is not None and run.job.summary == "done by hand"
    [_, skipped] = run.events.of_kind("tool_call")
    assert (
        skipped["is_error"]
        and "Not run: the job was already completed by finish" in (skipped["result"])
    )


def test_a_job_ended_by_an_undeclared_tool_still_faces_the_completion_check(
    tmp_path: Path,
) -> None:
    answers = iter([TaskCompletionResult.incomplete("one more thing"), TaskCompletionResult.ok()])
    run = run_with(
        tmp_path,
        [gr.tool_call("wrap"), gr.tool_call("wrap")],
        tool("wrap", returning(CompleteJob(JobResult("wrapped")))),  # not declared ends_job
        task_completion_checker=lambda context: next(answers),
    )
    checks = run.events.of_kind("completion_check")
    assert [(c["stop"], c["complete"]) for c in checks] == [
        ("job_complete", False),
        ("job_complete", True),
    ]
    first = run.events.of_kind("tool_call")[0]
    assert first["is_error"] and "one more thing" in first["result"]
    assert (run.status, run.reason) == ("completed", "wrap was called")
    assert run.turns == 2 and run.job is not None and run.job.summary == "wrapped"
