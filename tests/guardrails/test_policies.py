"""Tool policies (seed 002): the protocol, the built-ins, enforcement and run-owned state."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.timeline import TIMELINE_KINDS, describe, worth_a_line
from gr_notebook.errors import ConfigError
from gr_notebook.guardrails import PolicyContext, PolicyMemory
from gr_notebook.messages import ToolResultBlock
from gr_notebook.models import ModelResponse
from gr_notebook.tools import ToolOutput
from gr_notebook.tools.base import object_schema

# -- helpers ------------------------------------------------------------------------------------


def results_of(model: gr.ScriptedModel) -> list[ToolResultBlock]:
    """Every tool_result the model was sent, in order (the last request holds them all,
    unless compaction folded some away; these runs are too short for that)."""
    last = model.requests[-1]
    return [b for m in last.messages for b in m.content if isinstance(b, ToolResultBlock)]


def run_calls(
    make_agent: Callable[..., gr.Agent], calls: list[ModelResponse], **kwargs: Any
) -> tuple[gr.Run, list[ToolResultBlock]]:
    model = gr.ScriptedModel([*calls, gr.text("done")])
    kwargs.setdefault("stuck_turns", None)
    run = make_agent(model, **kwargs).run_sync("job")
    return run, results_of(model)


def context_for(ws: gr.Workspace, name: str = "p") -> PolicyContext:
    return PolicyContext(ws, PolicyMemory(name))


def tool(name: str) -> gr.Tool:
    return gr.Tool(name, f"The {name} tool.", object_schema(), lambda ctx, p: f"{name} ran")


def write(ws: gr.Workspace, name: str, text: str = "x") -> None:
    ws.write_text(name, text)


# -- PolicyDecision, PolicyState ----------------------------------------------------------------


def test_policy_decision_values() -> None:
    assert gr.PolicyDecision.allow() == gr.PolicyDecision(True, None)
    denied = gr.PolicyDecision.deny("read it first")
    assert (denied.allowed, denied.reason) == (False, "read it first")


@pytest.mark.parametrize("verdict", ["deny", "ask"])
@pytest.mark.parametrize("bad", [None, 42, ["read it first"]])
def test_a_reason_that_is_not_text_is_a_clear_error(verdict: str, bad: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        getattr(gr.PolicyDecision, verdict)(bad)
    message = str(caught.value)
    assert f"PolicyDecision.{verdict}" in message and "reason" in message and "text" in message
    assert f"PolicyDecision.{verdict}('" in message and type(bad).__name__ in message


def test_policy_state_carries_the_spec_fields(make_agent: Callable[..., gr.Agent]) -> None:
    policy = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    run, _ = run_calls(
        make_agent,
        [gr.tool_call("read_file", path="instructions.md")],
        policies=[policy, gr.ReadBeforeWritePolicy()],
    )
    state = run.policy_state("sequential_dependency")
    assert state == gr.guardrails.PolicyState(
        "sequential_dependency", frozenset({"read_file"}), frozenset()
    )
    reads = run.policy_state("read_before_write")
    assert reads.invoked_keys == {("read_file", "instructions.md")}
    with pytest.raises(gr.RunError, match="no policy named 'nope'"):
        run.policy_state("nope")


# -- SequentialDependencyPolicy -----------------------------------------------------------------


def test_sequential_dependency_spec_example(tmp_path: Path) -> None:
    policy = gr.SequentialDependencyPolicy(
        dependencies={"deploy": frozenset({"test", "build"}), "build": frozenset({"lint"})}
    )
    ctx = context_for(gr.Workspace(tmp_path))
    deploy, build, lint = tool("deploy"), tool("build"), tool("lint")
    denied = policy.check(deploy, {}, context=ctx)
    assert not denied.allowed
    assert denied.reason is not None and "requires build, test to have succeeded" in denied.reason
    assert not policy.check(build, {}, context=ctx).allowed
    assert policy.check(lint, {}, context=ctx).allowed  # no prerequisites
    policy.on_result(lint, {}, ToolOutput("ok"), context=ctx)
    assert policy.check(build, {}, context=ctx).allowed
    policy.on_result(build, {}, ToolOutput("ok"), context=ctx)
    reason = policy.check(deploy, {}, context=ctx).reason
    assert reason is not None and "requires test to have" in reason  # only what is missing


@pytest.mark.parametrize(
    "deps",
    [
        {"a": {"a"}},
        {"a": {"b"}, "b": {"a"}},
        {"deploy": {"build"}, "build": {"test"}, "test": {"deploy"}},
    ],
)
def test_a_dependency_cycle_is_rejected_when_built(deps: dict[str, set[str]]) -> None:
    with pytest.raises(gr.ConfigError, match="cycle"):
        gr.SequentialDependencyPolicy(deps)


def test_cycle_message_names_the_cycle() -> None:
    with pytest.raises(gr.ConfigError, match="a → b → a"):
        gr.SequentialDependencyPolicy({"a": {"b"}, "b": {"a"}})


def test_a_string_of_prerequisites_is_a_clear_error() -> None:
    with pytest.raises(gr.ConfigError, match="give a set of tool names"):
        gr.SequentialDependencyPolicy({"build": "lint"})


def test_unknown_tool_names_are_caught_when_the_agent_starts(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """Built, the agent may yet run where its tools live (a LangChain app, an SDK session);
    on gr's loop its tools are its own, so a name none of them has is a typo."""
    agent = make_agent(policies=[gr.SequentialDependencyPolicy({"deploy": {"read_file"}})])
    with pytest.raises(gr.ConfigError, match="does not have: deploy"):
        agent.run_sync("job")


# -- ReadBeforeWritePolicy ----------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> gr.Workspace:
    return gr.Workspace(tmp_path / "ws")


def rbw_call(
    policy: gr.ReadBeforeWritePolicy, ctx: PolicyContext, name: str, path: str
) -> gr.PolicyDecision:
    """Check a call and, when allowed, record it as a successful one."""
    t = tool(name)
    decision = policy.check(t, {"path": path}, context=ctx)
    if decision.allowed:
        policy.on_result(t, {"path": path}, ToolOutput("ok"), context=ctx)
    return decision


def test_read_before_write_spec_example(ws: gr.Workspace) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    write(ws, "config.yaml")
    assert rbw_call(policy, ctx, "write_file", "new.txt").allowed  # doesn't exist
    denied = rbw_call(policy, ctx, "write_file", "config.yaml")  # exists, not read
    assert not denied.allowed
    assert denied.reason is not None and "read_file('config.yaml')" in denied.reason
    assert rbw_call(policy, ctx, "read_file", "config.yaml").allowed  # records path
    assert rbw_call(policy, ctx, "write_file", "config.yaml").allowed  # was read


@pytest.mark.parametrize("spelling", ["./a.txt", "a/../a.txt", "/a.txt", "a.txt", ".//a.txt"])
def test_paths_are_canonicalised_against_the_workspace(ws: gr.Workspace, spelling: str) -> None:
    """WINK fault: a read of ``a.txt`` did not count for a write of ``./a.txt``."""
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    write(ws, "a.txt")
    assert rbw_call(policy, ctx, "read_file", "a.txt").allowed
    assert rbw_call(policy, ctx, "write_file", spelling).allowed


@pytest.mark.parametrize("path", ["../../etc/passwd", "../outside.txt", "a/../../b.txt"])
def test_a_path_that_escapes_the_workspace_is_denied(ws: gr.Workspace, path: str) -> None:
    """WINK fault: ``../../etc/passwd`` counted as a new file and was allowed."""
    decision = rbw_call(gr.ReadBeforeWritePolicy(), context_for(ws), "write_file", path)
    assert not decision.allowed
    assert decision.reason is not None and "outside the workspace" in decision.reason


def test_a_symlink_out_of_the_workspace_is_denied(ws: gr.Workspace, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", ws.root / "link.txt")
    decision = rbw_call(gr.ReadBeforeWritePolicy(), context_for(ws), "write_file", "link.txt")
    assert not decision.allowed
    assert decision.reason is not None and "symlink" in decision.reason


def test_a_file_changed_since_it_was_read_must_be_read_again(ws: gr.Workspace) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    write(ws, "a.txt", "one")
    assert rbw_call(policy, ctx, "read_file", "a.txt").allowed
    write(ws, "a.txt", "two, longer")  # changed by someone else: size differs
    denied = rbw_call(policy, ctx, "write_file", "a.txt")
    assert not denied.allowed
    assert denied.reason is not None and "changed since you last read it" in denied.reason
    assert rbw_call(policy, ctx, "read_file", "a.txt").allowed
    assert rbw_call(policy, ctx, "write_file", "a.txt").allowed


def test_same_size_change_is_caught_by_mtime(ws: gr.Workspace) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    write(ws, "a.txt", "one")
    rbw_call(policy, ctx, "read_file", "a.txt")
    path = ws.root / "a.txt"
    path.write_text("two")  # same size
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert not rbw_call(policy, ctx, "write_file", "a.txt").allowed


def test_the_agents_own_write_counts_as_known(ws: gr.Workspace) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    assert rbw_call(policy, ctx, "write_file", "new.txt").allowed  # created
    write(ws, "new.txt", "as the write tool left it")
    policy.on_result(tool("write_file"), {"path": "new.txt"}, ToolOutput("ok"), context=ctx)
    assert rbw_call(policy, ctx, "write_file", "new.txt").allowed
    assert rbw_call(policy, ctx, "edit_file", "new.txt").allowed


@pytest.mark.parametrize("mount", ["/workspace", "/workspace/", "workspace", "workspace/"])
def test_mount_prefix_with_or_without_trailing_slash(ws: gr.Workspace, mount: str) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(mount_point=mount), context_for(ws)
    write(ws, "config.yaml")
    assert not rbw_call(policy, ctx, "write_file", "/workspace/config.yaml").allowed
    assert rbw_call(policy, ctx, "read_file", "/workspace/config.yaml").allowed
    assert rbw_call(policy, ctx, "write_file", "config.yaml").allowed
    assert rbw_call(policy, ctx, "write_file", "/workspace/config.yaml").allowed


def test_other_tools_and_pathless_calls_are_not_governed(ws: gr.Workspace) -> None:
    policy, ctx = gr.ReadBeforeWritePolicy(), context_for(ws)
    assert policy.check(tool("list_files"), {"path": "x"}, context=ctx).allowed
    assert policy.check(tool("write_file"), {}, context=ctx).allowed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"write_tools": ()}, "write_tools is empty"),
        ({"read_tools": "read_file"}, "not a string"),
        ({"read_tools": {"x"}, "write_tools": {"x"}}, "both a read and a write tool"),
    ],
)
def test_read_before_write_configuration_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(gr.ConfigError, match=message):
        gr.ReadBeforeWritePolicy(**kwargs)


# -- enforcement in the loop --------------------------------------------------------------------


def test_a_denial_is_an_error_result_and_the_tool_does_not_run(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    run, results = run_calls(
        make_agent,
        [gr.tool_call("write_file", path="instructions.md", content="clobbered")],
        policies=[gr.ReadBeforeWritePolicy()],
    )
    denied = results[-1]
    assert denied.is_error
    assert denied.content.startswith("Denied by policy 'read_before_write': ")
    assert "read_file('instructions.md')" in denied.content
    assert (tmp_path / "ws" / "instructions.md").read_text() == "job\n"
    event = run.events.of_kind("policy_decision")[-1]
    assert event["allowed"] is False and event["policy"] == "read_before_write"
    assert event["tool"] == "write_file"


class Recorder:
    """A policy that allows or denies as told and records what it was asked."""

    def __init__(self, name: str, *, allow: bool = True, boom: bool = False) -> None:
        self.name, self.allow, self.boom = name, allow, boom
        self.checked: list[str] = []
        self.results: list[tuple[str, bool]] = []

    def check(
        self, tool: gr.Tool, params: Mapping[str, Any], *, context: PolicyContext
    ) -> gr.PolicyDecision:
        self.checked.append(tool.name)
        if self.boom:
            raise RuntimeError("policy bug")
        return gr.PolicyDecision.allow() if self.allow else gr.PolicyDecision.deny("no")

    def on_result(
        self,
        tool: gr.Tool,
        params: Mapping[str, Any],
        result: ToolOutput,
        *,
        context: PolicyContext,
    ) -> None:
        self.results.append((tool.name, result.is_error))
        context.state.record(tool.name)


def test_every_policy_must_allow_and_the_first_denial_wins(
    make_agent: Callable[..., gr.Agent],
) -> None:
    first, second, third = Recorder("first"), Recorder("second", allow=False), Recorder("third")
    _run, results = run_calls(
        make_agent, [gr.tool_call("list_files")], policies=[first, second, third]
    )
    assert results[-1].content == "Denied by policy 'second': no"
    assert first.checked == ["list_files"] and second.checked == ["list_files"]
    assert third.checked == []  # the first denial decides
    assert first.results == []  # nothing ran, so nothing to record


def test_a_policy_that_raises_denies(make_agent: Callable[..., gr.Agent]) -> None:
    run, results = run_calls(
        make_agent, [gr.tool_call("list_files")], policies=[Recorder("buggy", boom=True)]
    )
    assert results[-1].is_error
    assert "failed while checking (RuntimeError: policy bug)" in results[-1].content
    assert run.status == "ended"  # the run goes on


def test_a_policy_that_raises_keeps_its_line_and_its_traceback_is_found(
    make_agent: Callable[..., gr.Agent],
) -> None:
    class BrokenAfter(Recorder):
        def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
            raise KeyError("no such key")

    run, _ = run_calls(
        make_agent,
        [gr.tool_call("list_files")],
        policies=[Recorder("buggy", boom=True)],
    )
    [row] = run.policy_df().to_dict("records")
    assert row["decision"] == "deny" and "RuntimeError: policy bug" in row["reason"]
    trace = row["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert 'raise RuntimeError("policy bug")' in trace
    assert trace.endswith("RuntimeError: policy bug")
    lines = [describe(e) for e in run.events if e.kind in TIMELINE_KINDS and worth_a_line(e)]
    assert [line for line in lines if "policy bug" in line] == [
        "list_files denied by the policy buggy: the policy failed while checking "
        "(RuntimeError: policy bug), so the call was not run"
    ]  # one line, with no traceback in it

    after, _ = run_calls(make_agent, [gr.tool_call("list_files")], policies=[BrokenAfter("late")])
    [error] = after.events.of_kind("error")
    assert error.data["traceback"][-1] == "KeyError: 'no such key'"
    assert any("raise KeyError" in line for line in error.data["traceback"])
    assert after.policy_df()["traceback"].isna().all()  # it allowed; the error is apart


def test_on_result_runs_after_a_successful_call_only(make_agent: Callable[..., gr.Agent]) -> None:
    policy = Recorder("rec")
    run_calls(
        make_agent,
        [gr.tool_call("read_file", path="missing.txt"), gr.tool_call("list_files")],
        policies=[policy],
    )
    assert policy.checked == ["read_file", "list_files"]
    assert policy.results == [("list_files", False)]


def test_toolset_policies_govern_only_their_tools(make_agent: Callable[..., gr.Agent]) -> None:
    deploy = gr.Tool("deploy", "Deploy.", object_schema(), lambda ctx, p: "deployed")
    build = gr.Tool("build", "Build.", object_schema(), lambda ctx, p: "built")
    scoped = Recorder("scoped")
    shipping = gr.Toolset(
        [deploy, build],
        name="shipping",
        policies=[scoped, gr.SequentialDependencyPolicy({"deploy": {"build"}})],
    )
    _run, results = run_calls(
        make_agent,
        [
            gr.tool_call("list_files"),
            gr.tool_call("deploy"),
            gr.tool_call("build"),
            gr.tool_call("deploy"),
        ],
        tools=[shipping],
    )
    assert scoped.checked == ["deploy", "build", "deploy"]  # never list_files
    assert [r.is_error for r in results[-4:]] == [False, True, False, False]
    assert "'deploy' requires build" in results[-3].content


def test_agent_wide_policies_are_asked_before_a_toolsets_own(
    make_agent: Callable[..., gr.Agent],
) -> None:
    """WINK asks a section's policies first; here the agent's own rules come first, so a call
    meets the same gate whichever toolset supplies the tool."""
    agent_wide, scoped = Recorder("agent_wide", allow=False), Recorder("scoped", allow=False)
    toolset = gr.Toolset([tool("build")], policies=[scoped])
    run, results = run_calls(
        make_agent, [gr.tool_call("build")], tools=[toolset], policies=[agent_wide]
    )
    assert results[-1].content == "Denied by policy 'agent_wide': no"
    assert (agent_wide.checked, scoped.checked) == (["build"], [])
    assert run.events.of_kind("policy_decision")[-1]["policies"] == ["agent_wide", "scoped"]


def test_one_policy_object_declared_twice_is_one_history(
    make_agent: Callable[..., gr.Agent],
) -> None:
    shared = Recorder("shared")
    toolset = gr.Toolset([tool("build")], policies=[shared])
    agent = make_agent(gr.ScriptedModel([gr.text("x")]), tools=[toolset], policies=[shared])
    assert [b.key for b in agent.guardrails.bindings] == ["shared"]
    assert len(agent.guardrails.by_tool["build"]) == 1


def test_two_policies_of_one_name_keep_separate_state(make_agent: Callable[..., gr.Agent]) -> None:
    """WINK fault: one PolicyState slice is shared, so the last policy to write wins and the
    other forgets what it saw."""
    a = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    b = gr.SequentialDependencyPolicy({"edit_file": {"list_files"}})
    run, results = run_calls(
        make_agent,
        [
            gr.tool_call("read_file", path="instructions.md"),
            gr.tool_call("list_files"),
            gr.tool_call("write_file", path="out.md", content="x"),
            gr.tool_call("edit_file", path="out.md", old_text="x", new_text="y"),
        ],
        policies=[a, b],
    )
    assert not any(r.is_error for r in results[-4:])
    assert run.policy_state("sequential_dependency").policy_name == "sequential_dependency"
    assert run.policy_state("sequential_dependency#2").invoked_tools == {
        "read_file",
        "list_files",
        "write_file",
        "edit_file",
    }


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ([gr.ReadBeforeWritePolicy], "pass an instance, not the class"),
        ([object()], "is not a tool policy"),
        ("read_before_write", "takes a list"),
    ],
)
def test_bad_policies_are_config_errors(
    make_agent: Callable[..., gr.Agent], policies: Any, message: str
) -> None:
    with pytest.raises(gr.ConfigError, match=message):
        make_agent(policies=policies)


# -- state: guardrail_state, restore_guardrail_state, rewind ------------------------------------


def test_guardrail_state_is_json_and_restoring_brings_it_back(
    make_agent: Callable[..., gr.Agent],
) -> None:
    model = gr.ScriptedModel([gr.tool_call("read_file", path="instructions.md"), gr.text("done")])
    run = make_agent(
        model,
        policies=[gr.ReadBeforeWritePolicy()],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("hi"), gr.FeedbackTrigger(every_n_calls=1)
            )
        ],
    ).run_sync("job")
    snap = run.guardrail_state()
    text = json.dumps(snap)
    run._loop.state.guards.reset_policies()  # type: ignore[union-attr]
    assert run.policy_state("read_before_write").invoked_keys == frozenset()
    run.restore_guardrail_state(json.loads(text))
    assert run.policy_state("read_before_write").invoked_keys == {("read_file", "instructions.md")}
    assert run.guardrail_state() == json.loads(text)


def test_guardrail_state_of_another_agent_is_refused_whole(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("x")]), policies=[Recorder("a")]).run_sync("job")
    before = run.guardrail_state()
    with pytest.raises(gr.RunError, match="not a guardrail snapshot"):
        run.restore_guardrail_state({**before, "policies": {"other": {}}})
    with pytest.raises(gr.RunError, match="not a guardrail snapshot"):
        run.restore_guardrail_state({"version": 99})
    with pytest.raises(gr.RunError, match="invoked_keys must be"):
        run.restore_guardrail_state(
            {**before, "policies": {"a": {"invoked_keys": [["only-two", 1]]}}}
        )
    assert run.guardrail_state() == before


def test_todo_rewind_keeps_the_read_history_unless_asked_to_reset(
    make_agent: Callable[..., gr.Agent],
) -> None:
    from tests.conftest import bootstrap_script

    def script(reset: bool) -> list[ModelResponse]:
        return [
            *bootstrap_script(),
            gr.tool_call("todo_rewind", issue="wrong approach", reset_policies=reset),
            gr.text("stop"),
        ]

    for reset, expected in ((False, True), (True, False)):
        model = gr.ScriptedModel(script(reset))
        run = make_agent(model, policies=[gr.ReadBeforeWritePolicy()], workspace=None).run_sync(
            "job"
        )
        keys = run.policy_state("read_before_write").invoked_keys
        assert (("read_file", "instructions.md") in keys) is expected
        assert bool(run.events.of_kind("policies_reset")) is reset
