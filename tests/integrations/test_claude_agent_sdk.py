"""``guardrail_hooks(agent)``: one history for an SDK session (events, store, DataFrames, the
lint, the dashboard), the options it builds, and the errors that say what to do."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

import gr_notebook as gr
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.history.store import Store
from gr_notebook.integrations.claude_agent_sdk import ToolAlias, guardrail_hooks, local_env
from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.testing import MessagesServer
from tests.integrations.conftest import MODEL, claude_script, sdk_session, side_request

SCRIPT = [
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.tool_call("read_file", path="data.md"),
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.text("Done."),
]


def agent_at(ws: Path, **kwargs: Any) -> gr.Agent:
    ws.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("store", ws.parent / "store.sqlite")
    return gr.Agent(workspace=ws, self_regulation=False, **kwargs)


async def test_the_session_is_one_history_in_the_log_and_the_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, policies=[gr.ReadBeforeWritePolicy()])
    (ws / "data.md").write_text("old\n")
    session = await sdk_session(agent, SCRIPT, ws)
    run = session.run
    assert run.status == "ended" and run.done
    assert run.turns == 4 and run.summary()["turns"] == 4
    kinds = [e.kind for e in run.events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("model_call") == 4 and kinds.count("tool_call") == 3
    assert {e.data["model"] for e in run.events.of_kind("model_call")} == {MODEL}
    assert run.tool_calls_df()["tool"].tolist() == ["Write", "Read", "Write"]
    assert gr.lint_guidance(run) == []
    # The run's total is the session's own (each reply reports its output tokens only once
    # its stream ends, after the SDK has passed the reply on).
    result = session.messages[-1]
    total = sum(result.usage[k] for k in ("input_tokens", "output_tokens"))
    total += sum(
        result.usage.get(k, 0) for k in ("cache_creation_input_tokens", "cache_read_input_tokens")
    )
    assert run.events.of_kind("run_finished")[0].data["tokens_used"] == total > 0
    with Store(tmp_path / "store.sqlite") as store:
        [row] = [r for r in store.runs() if r["run_id"] == run.run_id]
        assert row["status"] == "ended" and row["model"] == f"claude-agent-sdk:{MODEL}"
        stored = [e.kind for e in store.events(run.run_id)]
    assert stored == kinds
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert runs.loc[runs.run_id == run.run_id, "status"].item() == "ended"
    assert (ws / ".gr").is_dir()  # the workspace lock was taken and released
    await run.wait()


@pytest.mark.parametrize("streamed", [True, False])
async def test_each_model_call_is_one_turn_with_its_tool_uses(
    tmp_path: Path, streamed: bool
) -> None:
    """The CLI passes a reply on block by block; with the API's stream events (the default)
    the model call is whole, its final output tokens included; without them its first block
    stands for it, and the session's total settles the tokens."""
    ws = tmp_path / "ws"
    hooks = guardrail_hooks(agent_at(ws, store=False), cwd=ws)
    reply = ModelResponse(
        (
            TextBlock("Writing both files."),
            ToolUseBlock("", "write_file", {"path": "a.md", "content": "a\n"}),
            ToolUseBlock("", "write_file", {"path": "b.md", "content": "b\n"}),
        ),
        "tool_use",
    )
    script = claude_script([reply, gr.text("Done.")], ws)
    with MessagesServer(script, side=side_request) as server:
        seen = [
            type(m).__name__
            async for m in hooks.query(
                "job",
                permission_mode="acceptEdits",
                tools=["Write"],
                model=MODEL,
                env=local_env(server.url, tmp_path / "config"),
                **({} if streamed else {"include_partial_messages": False}),
            )
        ]
    assert "StreamEvent" not in seen  # used, not passed on: the caller did not ask for them
    calls = [e.data for e in hooks.run.events.of_kind("model_call")]
    assert calls[0]["tool_calls"] == (2 if streamed else 0)  # else: the first block, text
    assert [e.turn for e in hooks.run.events.of_kind("model_call")] == [1, 2]
    assert [e.turn for e in hooks.run.events.of_kind("tool_call")] == [1, 1]
    if streamed:
        assert calls[0]["text"] == "Writing both files." and calls[0]["output_tokens"] > 1
        assert calls[0]["stop_reason"] == "tool_use"


async def test_a_live_session_on_the_dashboard(tmp_path: Path) -> None:
    from gr_notebook.jupyter.widgets import Dashboard

    ws = tmp_path / "ws"
    agent = agent_at(ws, store=False)
    hooks = guardrail_hooks(agent, cwd=ws)
    dash = Dashboard(hooks.run)  # opened before the session starts, as in a notebook
    with MessagesServer(claude_script([*SCRIPT[:1], gr.text("Done.")], ws), side=side_request) as s:
        async for _ in hooks.query(
            "job",
            permission_mode="acceptEdits",
            tools=["Write"],
            model=MODEL,
            env=local_env(s.url, tmp_path / "config"),
        ):
            pass
    assert hooks.run.status == "ended"
    shown = repr(dash)
    assert hooks.run.run_id in shown and ": ended" in shown
    dash.close()


async def test_a_person_stops_the_session_at_the_next_hook(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, store=False)
    script = [gr.tool_call("write_file", path=f"{i}.md", content="x\n") for i in range(5)]
    hooks = guardrail_hooks(agent, cwd=ws)
    replies = 0
    with MessagesServer(claude_script(script, ws), side=side_request) as s:
        async for message in hooks.query(
            "job",
            permission_mode="acceptEdits",
            tools=["Write"],
            model=MODEL,
            env=local_env(s.url, tmp_path / "config"),
        ):
            # The CLI hands on one message per content block (thinking, then the call).
            content = getattr(message, "content", None) or []
            replies += any(type(block).__name__ == "ToolUseBlock" for block in content)
            if replies == 2:  # the second reply's write: the person stops the run first
                hooks.run.cancel("enough")
    assert hooks.run.status == "cancelled" and hooks.run.reason == "enough"
    assert sorted(p.name for p in ws.glob("*.md")) == ["0.md"]  # the second write never ran


def _refused_live(run: gr.Run) -> list[str]:
    """Every control but a stop, tried on a live session through the API and the magics."""
    from IPython.core.error import UsageError
    from IPython.testing import globalipapp

    refusals = []
    for name, control in [
        ("pause", run.pause),
        ("unpause", run.unpause),
        ("rewind", lambda: run.rewind("the approach fails")),
        ("add a todo", lambda: run.add_todo("Check the glossary")),
        ("complete a todo", run.complete_todo),
    ]:
        with pytest.raises(RunError) as refused:
            control()
        assert str(refused.value).startswith(f"cannot {name}: run {run.run_id} is a Claude")
        refusals.append(str(refused.value))
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "gr_notebook")
    ip.user_ns["session_run"] = run
    try:
        for magic, line in [
            ("agent", "pause --run session_run"),
            ("rewind", "The approach fails --run session_run"),
            ("todo", "add Check the glossary --run session_run"),
            ("todo", "complete --run session_run"),
        ]:
            with pytest.raises(UsageError) as refused:
                ip.run_line_magic(magic, line)
            refusals.append(str(refused.value))
    finally:
        del ip.user_ns["session_run"]
    return refusals


async def test_a_live_session_refuses_every_control_but_a_stop(tmp_path: Path) -> None:
    """Its Loop never runs: a pause would read "pausing" until the session ended, a todo
    edit would put a task nobody has on its timeline. Each says to stop it instead."""
    ws = tmp_path / "ws"
    hooks = guardrail_hooks(agent_at(ws, store=False), cwd=ws)
    refusals: list[str] = []
    script = [gr.tool_call("write_file", path=f"{i}.md", content="x\n") for i in range(2)]
    with MessagesServer(claude_script([*script, gr.text("Done.")], ws), side=side_request) as s:
        async for message in hooks.query(
            "job",
            permission_mode="acceptEdits",
            tools=["Write"],
            model=MODEL,
            env=local_env(s.url, tmp_path / "config"),
        ):
            content = getattr(message, "content", None) or []
            if not refusals and any(type(b).__name__ == "ToolUseBlock" for b in content):
                refusals = _refused_live(hooks.run)
                assert hooks.run.status == "running"
    assert len(refusals) == 9
    assert all("outside gr's loop; stop it instead" in r for r in refusals), refusals
    assert hooks.run.status == "ended"  # the model's own stop, never held at "pausing"
    assert not [e for e in hooks.run.events if e.kind in ("todos_written", "todo_completed")]
    assert not [e for e in hooks.run.events if e.kind in ("rewind", "run_paused")]
    with pytest.raises(RunError, match="outside gr's loop; start a new run"):
        hooks.run.pause()  # the same refusal once it has ended, with what to do then


async def test_hooks_reused_for_a_second_session_block_its_calls(tmp_path: Path) -> None:
    """One hooks object records one session; the PreToolUse hook fails closed on another."""
    from claude_agent_sdk import query

    ws = tmp_path / "ws"
    hooks = guardrail_hooks(agent_at(ws, store=False), cwd=ws)
    write = claude_script([gr.tool_call("write_file", path="a.md", content="a\n")], ws)
    with MessagesServer([*write, gr.text("Done."), *write, gr.text("Done.")]) as server:
        options = hooks.options(
            permission_mode="acceptEdits",
            tools=["Write"],
            model=MODEL,
            env=local_env(server.url, tmp_path / "config"),
        )
        async for message in query(prompt="first", options=options):
            hooks.observe(message)
        assert hooks.run.status == "ended"
        (ws / "a.md").unlink()
        second = [m async for m in query(prompt="second", options=options)]
    results = [
        block
        for message in second
        if type(message).__name__ == "UserMessage"
        for block in message.content
        if type(block).__name__ == "ToolResultBlock"
    ]
    assert not (ws / "a.md").exists()  # blocked: the hook refused a session it does not record
    [result] = results
    assert result.is_error is True
    assert "make one with guardrail_hooks(agent) per session" in str(result.content)
    assert type(second[-1]).__name__ == "ResultMessage"  # and the session stopped there


# -- the options it builds ----------------------------------------------------------------------


def test_options_carry_the_hooks_the_cwd_and_max_turns(tmp_path: Path) -> None:
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_iterations=7), store=False)
    hooks = guardrail_hooks(agent, tools=["Read", "Write"])
    assert hooks.cwd == (tmp_path / "ws").resolve()  # the agent's workspace

    async def mine(hook_input: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
        return {}

    options = hooks.options(hooks={"PreToolUse": [HookMatcher(hooks=[mine])]}, max_budget_usd=0.5)
    assert isinstance(options, ClaudeAgentOptions)
    assert options.max_turns == 7 and options.max_budget_usd == 0.5
    assert Path(options.cwd or "") == hooks.cwd and options.tools == ["Read", "Write"]
    assert options.hooks is not None
    assert set(options.hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"}
    assert options.hooks["PreToolUse"][0] is hooks.hooks["PreToolUse"][0]  # ours run first
    assert options.hooks["PreToolUse"][1].hooks == [mine]


def test_the_map_of_tools_is_configurable(tmp_path: Path) -> None:
    """MCP tools can stand for gr's file tools, and then meet the same policies."""
    policy = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    agent = agent_at(tmp_path / "ws", policies=[policy], store=False)
    hooks = guardrail_hooks(
        agent,
        tools=["mcp__files__load", "mcp__files__save"],
        tool_map={"mcp__files__load": "read_file", "mcp__files__save": ToolAlias("write_file")},
    )
    assert hooks.options().tools == ["mcp__files__load", "mcp__files__save"]


# -- errors that say what to do ----------------------------------------------------------------


def test_the_extra_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    with pytest.raises(ConfigError, match=r"pip install 'gr-notebook\[claude-agent-sdk\]'"):
        guardrail_hooks(agent_at(tmp_path / "ws", store=False))


def test_a_policy_names_a_tool_the_session_does_not_have(tmp_path: Path) -> None:
    """Policies read Claude Code's Read as read_file: a session without it cannot meet this."""
    needs_read = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    agent = agent_at(tmp_path / "ws", policies=[needs_read], store=False)
    with pytest.raises(ConfigError) as caught:
        guardrail_hooks(agent, tools=["Write", "Bash"])
    message = str(caught.value)
    assert "read_file" in message and "ClaudeAgentOptions(tools=" in message
    assert "\n" not in message


async def test_a_policy_may_name_a_tool_only_the_session_has(tmp_path: Path) -> None:
    """gr's loop has no Bash; the session does, and the policy governs it there."""
    ws = tmp_path / "ws"
    bash_after_read = gr.SequentialDependencyPolicy({"Bash": {"read_file"}})
    agent = agent_at(ws, policies=[bash_after_read], store=False)
    (ws / "a.md").write_text("a")
    script = [
        gr.tool_call("Bash", command="echo ran > out.txt", description="write out.txt"),
        gr.text("Stopped."),
    ]
    session = await sdk_session(agent, script, ws, tools=["Read", "Bash"])
    rows = session.run.policy_df()
    assert rows[["tool", "decision"]].values.tolist() == [["Bash", "deny"]]
    assert "read_file" in rows["reason"].iloc[0] or "Read" in rows["reason"].iloc[0]
    assert not (ws / "out.txt").exists()
    with pytest.raises(ConfigError, match="does not have: Bash"):
        agent.run_sync("job")


async def test_a_policy_names_a_tool_the_started_session_lacks(tmp_path: Path) -> None:
    """Without ``tools=``, the check waits for the session's own list (its init message)."""
    ws = tmp_path / "ws"
    needs_read = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    agent = agent_at(ws, policies=[needs_read], store=False)
    hooks = guardrail_hooks(agent, cwd=ws)
    with MessagesServer([gr.text("hi")]) as server, pytest.raises(ConfigError, match="read_file"):
        async for _ in hooks.query(
            "job",
            permission_mode="acceptEdits",
            tools=["Write", "Bash"],
            model=MODEL,
            env=local_env(server.url, tmp_path / "config"),
        ):
            pass
    assert hooks.run.status == "failed" and "read_file" in (hooks.run.reason or "")
    assert server.requests == []  # stopped at the init message, before any model call


def test_a_sync_callback_where_the_sdk_wants_an_async_one(tmp_path: Path) -> None:
    hooks = guardrail_hooks(agent_at(tmp_path / "ws", store=False))

    def audit(hook_input: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
        return {}

    with pytest.raises(ConfigError, match=r"async def audit\(input, tool_use_id, context\)"):
        hooks.options(hooks={"PostToolUse": [HookMatcher(hooks=[audit])]})

    def allow(name: str, tool_input: Any, context: Any) -> Any:
        return None

    with pytest.raises(ConfigError, match=r"async def allow\(tool_name, input, context\)"):
        hooks.options(can_use_tool=allow)


async def test_the_cli_cannot_start(tmp_path: Path) -> None:
    hooks = guardrail_hooks(agent_at(tmp_path / "ws", store=False))
    with pytest.raises(RunError, match=r"cli_path=") as caught:
        async for _ in hooks.query("job", cli_path=str(tmp_path / "no-such-claude")):
            pass
    assert "\n" not in str(caught.value)
    assert hooks.run.status == "failed"


async def test_options_without_the_hooks_are_refused(tmp_path: Path) -> None:
    hooks = guardrail_hooks(agent_at(tmp_path / "ws", store=False))
    with pytest.raises(ConfigError, match=r"hooks\.options"):
        await hooks.query("job", options=ClaudeAgentOptions(cwd=str(hooks.cwd))).__anext__()
    assert hooks.run.status == "running" and hooks.run.events.of_kind("run_started") == []
    with pytest.raises(ConfigError, match="cwd="):
        hooks.options(cwd=str(tmp_path))


def test_bypass_permissions_is_refused_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gr_notebook.integrations.claude_agent_sdk.bridge as bridge

    monkeypatch.setattr(bridge, "_root", lambda: True)
    hooks = guardrail_hooks(agent_at(tmp_path / "ws", store=False))
    with pytest.raises(ConfigError, match="acceptEdits"):
        hooks.options(permission_mode="bypassPermissions")


def test_a_policy_names_an_mcp_tool_as_claude_code_names_it(tmp_path: Path) -> None:
    """``mcp__<server>__<tool>`` is one name in gr's loop and in the SDK session."""
    approve = gr.ApprovalPolicy(tools=["mcp__s__t"])
    needs_t = gr.SequentialDependencyPolicy({"write_file": {"mcp__s__t"}})
    agent = agent_at(tmp_path / "ws", policies=[approve, needs_t], store=False)
    hooks = guardrail_hooks(agent, tools=["Write", "mcp__s__t"])
    governed = hooks._session.state.guards.spec.by_tool  # type: ignore[attr-defined]
    assert {"mcp__s__t", "write_file"} <= set(governed)
    guardrail_hooks(agent)  # the session's own list is awaited: checked when it names its tools
    with pytest.raises(ConfigError, match="mcp__s__t"):
        guardrail_hooks(agent, tools=["Write", "mcp__s__other"])


def test_the_agents_mcp_servers_are_the_sessions_under_the_same_names(tmp_path: Path) -> None:
    servers = [
        gr.MCPServer("s", command="python", args=["server.py"], env={"K": "v"}),
        gr.MCPServer("web", url="http://127.0.0.1:9/mcp", headers={"Authorization": "x"}),
    ]
    tool = gr.Tool("t", "A toolset tool also called t.", {"type": "object"}, lambda c, p: "")
    agent = agent_at(tmp_path / "ws", store=False, mcp_servers=servers, tools=[gr.Toolset([tool])])
    hooks = guardrail_hooks(agent)
    assert hooks.options().mcp_servers == {
        "s": {"type": "stdio", "command": "python", "args": ["server.py"], "env": {"K": "v"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "x"}},
    }
    names = hooks._session.names  # type: ignore[attr-defined]
    assert names.gr_name("mcp__s__t") == "mcp__s__t"  # the server's t, not the toolset's
    assert names.gr_name("mcp__tools__t") == "t"
