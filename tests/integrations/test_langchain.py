"""``guardrail_middleware(agent)``: a LangChain agent session under an agent's guardrails is
one gr run (events, store, DataFrames, lint); a denied call never runs; asks, gr's own tools,
the wrap-up order, shadow guardrails; and the errors that say what to do."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

import gr_notebook as gr
from gr_notebook.display.render import render_run_card, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.history.store import Store
from gr_notebook.integrations.langchain import EXTRA, guardrail_middleware
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.secrets import key_forms
from tests.integrations.conftest import native_run
from tests.integrations.langchain_kit import langchain_session, tool_model

SCRIPT = [
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.tool_call("read_file", path="data.md"),
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.text("Done."),
]


def agent_at(ws: Path, **kwargs: Any) -> gr.Agent:
    ws.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("store", ws.parent / "store.sqlite")
    kwargs.setdefault("self_regulation", False)
    return gr.Agent(workspace=ws, **kwargs)


def counted(ws: Path, name: str = "deploy") -> BaseTool:
    """A LangChain tool that counts its runs in a file of its own."""
    counter = ws.parent / f"{name}.count"

    @tool(name)
    def run_it(target: str) -> str:
        """Deploy the target."""
        with counter.open("a") as f:
            f.write("x")
        return f"deployed {target}"

    return run_it


def runs_of(ws: Path, name: str = "deploy") -> int:
    counter = ws.parent / f"{name}.count"
    return len(counter.read_text()) if counter.exists() else 0


class DenyDeploy:
    name = "no_deploy"

    def check(self, tool: Any, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if tool.name == "deploy":
            return gr.PolicyDecision.deny("deploys wait for the release window; stop here")
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


async def test_the_session_is_one_history_in_the_log_and_the_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, policies=[gr.ReadBeforeWritePolicy()])
    (ws / "data.md").write_text("old\n")
    session = await langchain_session(agent, SCRIPT, ws)
    run = session.run
    assert run.status == "ended" and run.done and run.harness.name == "langchain"
    assert run.turns == 4
    kinds = [e.kind for e in run.events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("model_call") == 4 and kinds.count("tool_call") == 3
    assert run.tool_calls_df()["tool"].tolist() == ["write_file", "read_file", "write_file"]
    assert run.policy_df()["decision"].tolist() == ["deny", "allow", "allow"]
    assert gr.lint_guidance(run) == []
    assert run.instructions == "Do the job."
    with Store(tmp_path / "store.sqlite") as store:
        [row] = [r for r in store.runs() if r["run_id"] == run.run_id]
        assert row["status"] == "ended"
        stored = [e.kind for e in store.events(run.run_id)]
    assert stored == kinds
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert runs.loc[runs.run_id == run.run_id, "status"].item() == "ended"
    assert await run.wait() is run
    # the dashboard shows what ran the model, and none of gr's todo list
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    state = tracker.snapshot(run)
    assert "a LangChain agent" in render_run_card(state, turns=4, phases_completed=0)
    shown = text_dashboard(state)
    assert "Tool calls" in shown and "todo" not in shown.lower()


async def test_a_live_policy_replays_to_its_live_decisions(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first_read = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    session = await langchain_session(agent_at(ws, policies=[first_read]), SCRIPT, ws)
    live = session.run.policy_df()["decision"].tolist()
    assert live == ["deny", "allow", "deny"]  # the read of a file not yet written failed
    replay = gr.replay_guardrails(
        [session.run.run_id], store=tmp_path / "store.sqlite", policies=[first_read]
    )
    assert replay.df["tool"].tolist() == ["write_file", "read_file", "write_file"]
    assert (replay.df["decision"] == replay.df["live"]).all()


async def test_tokens_come_from_usage_metadata(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    replies = iter(
        [
            AIMessage(
                "",
                tool_calls=[{"name": "read_file", "args": {"path": "a.md"}, "id": "c1"}],
                usage_metadata={
                    "input_tokens": 100,
                    "output_tokens": 10,
                    "total_tokens": 110,
                    "input_token_details": {"cache_read": 60},
                },
                response_metadata={"model_name": "claude-sonnet-4-6"},
            ),
            AIMessage(
                "Done.",
                usage_metadata={"input_tokens": 120, "output_tokens": 5, "total_tokens": 125},
            ),
        ]
    )
    (ws.mkdir(parents=True), (ws / "a.md").write_text("a"))
    model = tool_model([])
    model.messages = replies
    mw = guardrail_middleware(agent_at(ws, store=False), cwd=ws)
    await create_agent(model, middleware=[mw]).ainvoke({"messages": [HumanMessage("go")]})
    first, second = (e.data for e in mw.run.events.of_kind("model_call"))
    assert (first["input_tokens"], first["cache_read_tokens"], first["output_tokens"]) == (
        40,
        60,
        10,
    )
    assert first["model"] == "claude-sonnet-4-6" and first["cost_usd"] > 0  # priced
    assert second["tokens_used"] == 110 + 125  # every token, cached or not, as gr counts


@pytest.mark.parametrize("sync", [False, True])
async def test_a_denied_call_never_runs(tmp_path: Path, sync: bool) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, policies=[DenyDeploy()], store=False)
    script = [
        gr.tool_calls([("deploy", {"target": "prod"}), ("read_file", {"path": "a.md"})]),
        gr.tool_call("deploy", target="prod"),
        gr.text("Stopped: deploys wait for the release window."),
    ]
    (ws / "a.md").write_text("a")
    session = await langchain_session(agent, script, ws, tools=[counted(ws)], sync=sync)
    assert runs_of(ws) == 0
    denied = [m for m in session.messages if isinstance(m, ToolMessage) and m.name == "deploy"]
    assert len(denied) == 2
    assert all(m.status == "error" and "release window" in m.text for m in denied)
    read = [m for m in session.messages if isinstance(m, ToolMessage) and m.name == "read_file"]
    assert [m.status for m in read] == ["success"]
    rows = session.run.policy_df()
    assert rows["tool"].tolist() == ["deploy", "read_file", "deploy"]
    assert rows["decision"].tolist() == ["deny", "allow", "deny"]


async def test_an_allowed_call_runs_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    session = await langchain_session(
        agent_at(ws, store=False),
        [gr.tool_call("deploy", target="prod"), gr.text("Deployed.")],
        ws,
        tools=[counted(ws)],
    )
    assert runs_of(ws) == 1
    assert session.run.tool_calls_df()["tool"].tolist() == ["deploy"]


@pytest.mark.parametrize("sync", [False, True])
async def test_a_turns_calls_meet_the_guardrails_in_the_models_order(
    tmp_path: Path, sync: bool
) -> None:
    """LangChain runs a turn's calls in parallel; gr's loop runs them in order, so the
    read before the write lets the write through."""
    ws = tmp_path / "ws"
    agent = agent_at(ws, policies=[gr.ReadBeforeWritePolicy()], store=False)
    (ws / "data.md").write_text("old\n")
    script = [
        gr.tool_calls(
            [
                ("read_file", {"path": "data.md"}),
                ("write_file", {"path": "data.md", "content": "n"}),
            ]
        ),
        gr.text("Done."),
    ]
    session = await langchain_session(agent, script, ws, sync=sync)
    assert session.run.policy_df()["decision"].tolist() == ["allow", "allow"]
    assert (ws / "data.md").read_text() == "n"


@pytest.mark.parametrize(("answer", "runs"), [(True, 1), (False, 0)])
@pytest.mark.parametrize("sync", [False, True])
async def test_an_ask_goes_to_the_agents_confirmer(
    tmp_path: Path, answer: bool, runs: int, sync: bool
) -> None:
    ws = tmp_path / "ws"
    asked: list[gr.ApprovalRequest] = []

    def confirm(request: gr.ApprovalRequest) -> bool:
        asked.append(request)
        return answer

    ask = gr.ApprovalPolicy(when=lambda name, params: name == "deploy")
    agent = agent_at(ws, policies=[ask], confirm=confirm, store=False)
    script = [gr.tool_call("deploy", target="prod"), gr.text("Done.")]
    session = await langchain_session(agent, script, ws, tools=[counted(ws)], sync=sync)
    assert runs_of(ws) == runs
    assert [r.tool for r in asked] == ["deploy"]
    approvals = session.run.approvals_df()
    assert approvals["decision"].tolist() == ["approve" if answer else "deny"]


async def test_an_ask_with_nobody_to_answer_is_a_denial_that_says_so(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ask = gr.ApprovalPolicy(when=lambda name, params: name == "deploy")
    agent = agent_at(ws, policies=[ask], store=False)
    script = [gr.tool_call("deploy", target="prod"), gr.text("Done.")]
    session = await langchain_session(agent, script, ws, tools=[counted(ws)])
    assert runs_of(ws) == 0
    [denied] = [m for m in session.messages if isinstance(m, ToolMessage)]
    assert denied.status == "error" and "nobody is here to give it" in denied.text


async def test_the_desk_is_attended_from_on_run(tmp_path: Path) -> None:
    """``agent.on_run`` hands over the session's run with its desk, as gr's loop does."""
    from tests.guardrails.test_approval import approve_when_asked

    ws = tmp_path / "ws"
    ask = gr.ApprovalPolicy(when=lambda name, params: name == "deploy")
    agent = agent_at(ws, policies=[ask], store=False)
    agent.on_run(approve_when_asked)
    script = [gr.tool_call("deploy", target="prod"), gr.text("Done.")]
    session = await langchain_session(agent, script, ws, tools=[counted(ws)])
    assert runs_of(ws) == 1
    approvals = session.run.approvals_df()
    assert approvals[["asked", "decision", "by"]].values.tolist() == [["desk", "approve", "code"]]


async def test_gr_tools_run_in_the_workspace_with_grs_handlers(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    mw = guardrail_middleware(agent_at(ws, store=False), cwd=ws)
    assert [t.name for t in mw.tools] == ["read_file", "write_file", "edit_file"]
    script = [
        gr.tool_call("write_file", path="notes/a.md", content="hello\n"),
        gr.tool_call("read_file", path="../outside.md"),
        gr.text("Done."),
    ]
    session = await langchain_session(agent_at(ws, store=False), script, ws)
    assert (ws / "notes" / "a.md").read_text() == "hello\n"
    outside = [m for m in session.messages if isinstance(m, ToolMessage)][1]
    assert outside.status == "error"  # gr's workspace refuses a path that leaves it


async def test_the_agents_api_key_a_tool_read_is_redacted_from_the_record(tmp_path: Path) -> None:
    """Decision 383 on another host: the session's record holds no form of the key of the
    agent's model adapter, though the tool read it (the host hands its model the result)."""
    ws = tmp_path / "ws"
    key = "sk-ant-api03-langchain-secret-5e1d0c"
    model = AnthropicModel("claude-sonnet-4-6", api_key=key, base_url="http://127.0.0.1:9")
    ws.mkdir(parents=True)
    (ws / ".env").write_text(f"ANTHROPIC_API_KEY={key}\n")
    script = [gr.tool_call("read_file", path=".env"), gr.text("Done.")]
    session = await langchain_session(agent_at(ws, model=model), script, ws)
    [read] = session.run.events.of_kind("tool_call")
    assert "ANTHROPIC_API_KEY=[redacted]" in read.data["result"]
    with Store(ws.parent / "store.sqlite") as store:
        stored = [e.data for _, e in store.events_of_kind("tool_call")]
    assert not any(form in str(stored) for form in key_forms(key))


async def test_a_tool_that_raises_is_an_error_the_model_reads(tmp_path: Path) -> None:
    ws = tmp_path / "ws"

    @tool("flaky")
    def flaky(target: str) -> str:
        """Fails."""
        raise RuntimeError("disk full")

    script = [gr.tool_call("flaky", target="x"), gr.text("Done.")]
    session = await langchain_session(agent_at(ws, store=False), script, ws, tools=[flaky])
    [failed] = [m for m in session.messages if isinstance(m, ToolMessage)]
    assert failed.status == "error" and "RuntimeError: disk full" in failed.text
    assert session.run.status == "ended"
    assert session.run.events.of_kind("error")[0].data["message"] == "disk full"


async def test_the_wrap_up_order_at_80_percent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, max_iterations=5, self_regulation=True, store=False)
    script = [gr.tool_call("write_file", path=f"{i}.md", content="x") for i in range(4)]
    session = await langchain_session(agent, [*script, gr.text("Done: 4 files.")], ws)
    told = [m for m in session.model.seen[4] if isinstance(m, HumanMessage)]
    assert "WARNING: Low on resources" in told[-1].text
    assert "job_complete" not in told[-1].text  # a LangChain agent has no gr tools for it
    [order] = session.run.events.of_kind("prompt_injected")
    assert order.turn == 4
    assert session.run.status == "ended"
    assert gr.lint_guidance(session.run) == []


async def test_shadow_guardrails_decide_and_are_recorded(tmp_path: Path) -> None:
    """As on gr's own loop: the shadow denies the unread write, and nothing obeys it."""

    def rows(run: gr.Run) -> list[tuple[Any, ...]]:
        frame = run.shadow_df()
        return [tuple(r) for r in frame[["turn", "kind", "tool", "live", "decision"]].values]

    def make(model: Any, ws: Path) -> gr.Agent:
        return agent_at(ws, shadow=[gr.ReadBeforeWritePolicy()], store=False, model=model)

    native_ws, ws = tmp_path / "native" / "ws", tmp_path / "lc" / "ws"
    for where in (native_ws, ws):
        where.mkdir(parents=True)
        (where / "data.md").write_text("old\n")
    native = await native_run(make, SCRIPT, native_ws)
    session = await langchain_session(make(None, ws), SCRIPT, ws)
    assert rows(session.run) == rows(native) != []
    assert (ws / "data.md").read_text() == "new\n"  # the first write ran: nothing obeys it
    assert set(session.run.policy_df()["mode"]) == {"shadow"}  # no live policy decided


def test_the_extra_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    with pytest.raises(ConfigError, match=r"pip install 'gr-notebook\[langchain\]'") as caught:
        guardrail_middleware(agent_at(tmp_path / "ws", store=False))
    assert EXTRA in str(caught.value)


async def test_a_model_that_cannot_call_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    mw = guardrail_middleware(agent_at(ws, store=False), cwd=ws)
    model = GenericFakeChatModel(messages=iter([AIMessage("hi")]))
    app = create_agent(model, middleware=[mw])
    with pytest.raises(ConfigError, match="cannot call tools") as caught:
        await app.ainvoke({"messages": [HumanMessage("go")]})
    assert "init_chat_model" in str(caught.value) and "\n" not in str(caught.value)
    assert mw.run.status == "failed"


async def test_a_failing_model_ends_the_run_failed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"

    class Broken(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise TimeoutError("the provider timed out")

    mw = guardrail_middleware(agent_at(ws, store=False), cwd=ws)
    app = create_agent(Broken(messages=iter([])), middleware=[mw])
    with pytest.raises(TimeoutError):
        await app.ainvoke({"messages": [HumanMessage("go")]})
    assert mw.run.status == "failed" and "the provider timed out" in (mw.run.reason or "")
    # the workspace lock was released: the next session in it starts
    again = await langchain_session(agent_at(ws, store=False), [gr.text("Done.")], ws)
    assert again.run.status == "ended"


def test_a_policy_names_a_tool_the_agent_does_not_have(tmp_path: Path) -> None:
    needs_read = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    agent = agent_at(tmp_path / "ws", policies=[needs_read], store=False)
    with pytest.raises(ConfigError) as caught:
        guardrail_middleware(agent, tools=["search"], gr_tools=False)
    message = str(caught.value)
    assert "read_file" in message and "create_agent(tools=" in message


async def test_a_policy_names_a_tool_the_started_agent_lacks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    needs_read = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})
    mw = guardrail_middleware(agent_at(ws, policies=[needs_read], store=False), gr_tools=False)
    app = create_agent(tool_model([gr.text("hi")]), tools=[counted(ws)], middleware=[mw])
    with pytest.raises(ConfigError, match="read_file"):
        app.invoke({"messages": [HumanMessage("go")]})
    assert mw.run.status == "failed"


async def test_one_middleware_records_one_session(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    mw = guardrail_middleware(agent_at(ws, store=False), cwd=ws)
    app = create_agent(tool_model([gr.text("one"), gr.text("two")]), middleware=[mw])
    await app.ainvoke({"messages": [HumanMessage("go")]})
    with pytest.raises(RunError, match="records one session"):
        await app.ainvoke({"messages": [HumanMessage("again")]})


def test_it_takes_a_gr_agent() -> None:
    with pytest.raises(ConfigError, match=r"takes a gr\.Agent"):
        guardrail_middleware("agent")  # type: ignore[arg-type]


async def test_langchain_tools_keep_their_names(tmp_path: Path) -> None:
    """Policies and the record read a LangChain tool under its own name, an MCP tool's
    ``mcp__<server>__<tool>`` too: nothing is renamed."""
    ws = tmp_path / "ws"
    script = [gr.tool_call("mcp__files__save", target="a"), gr.text("Done.")]
    agent = agent_at(ws, policies=[DenyDeploy()], store=False)
    session = await langchain_session(agent, script, ws, tools=[counted(ws, "mcp__files__save")])
    assert session.run.tool_calls_df()["tool"].tolist() == ["mcp__files__save"]
    assert session.run.policy_df()["tool"].tolist() == ["mcp__files__save"]
    assert runs_of(ws, "mcp__files__save") == 1


async def test_a_built_in_policy_governs_langchain_only_tools(tmp_path: Path) -> None:
    """The agent names tools that exist only in the LangChain app: the middleware checks them
    against the app's tools, not gr's, and enforces the order."""
    ws = tmp_path / "ws"
    needs_tests = gr.SequentialDependencyPolicy({"deploy": {"run_tests"}})
    agent = agent_at(ws, policies=[needs_tests], store=False)
    script = [
        gr.tool_call("deploy", target="prod"),
        gr.tool_call("run_tests", target="prod"),
        gr.tool_call("deploy", target="prod"),
        gr.text("Deployed after the tests."),
    ]
    tools = [counted(ws), counted(ws, "run_tests")]
    session = await langchain_session(agent, script, ws, tools=tools)
    assert session.run.policy_df()["decision"].tolist() == ["deny", "allow", "allow"]
    assert runs_of(ws) == 1 and runs_of(ws, "run_tests") == 1
    with pytest.raises(ConfigError, match="does not have: deploy, run_tests"):
        agent.run_sync("job")  # on gr's own loop these tools do not exist


def test_an_agents_mcp_servers_are_refused_not_ignored(tmp_path: Path) -> None:
    server = gr.MCPServer("files", command=sys.executable, args=["server.py"])
    agent = agent_at(tmp_path / "ws", mcp_servers=[server], store=False)
    with pytest.raises(ConfigError, match=r"does not connect the agent's MCP servers \(files\)"):
        guardrail_middleware(agent)


class OncePerTarget:
    """A live policy that lets each target be purged once: it remembers what ran."""

    name = "once_per_target"

    def check(self, tool: Any, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if context.state.has_key("purge", str(params.get("target"))):
            return gr.PolicyDecision.deny("this target was purged already; do not purge it again")
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        context.state.record("purge", str(params.get("target")))


class TidyTarget:
    """A shadow on trial that normalises the call in place (the bug it would be live)."""

    name = "tidy_target"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        params["target"] = str(params.get("target", "")).strip()
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.mark.parametrize("sync", [False, True])
async def test_a_shadows_edit_never_reaches_a_live_policys_memory(
    tmp_path: Path, sync: bool
) -> None:
    """The shadow strips ``' users '`` in place; had the live policy remembered the
    shadow's ``'users'``, the second purge of ``' users '`` would run again."""
    ws = tmp_path / "ws"
    agent = agent_at(ws, policies=[OncePerTarget()], shadow=[TidyTarget()], store=False)
    script = [
        gr.tool_call("purge", target=" users "),
        gr.tool_call("purge", target=" users "),
        gr.text("Purged once."),
    ]
    session = await langchain_session(agent, script, ws, tools=[counted(ws, "purge")], sync=sync)
    assert runs_of(ws, "purge") == 1
    assert session.run.policy_state("once_per_target").invoked_keys == {("purge", " users ")}
    live = session.run.policy_df().query("mode == 'live'")
    assert live["decision"].tolist() == ["allow", "deny"]
    errors = [e.data for e in session.run.events.of_kind("error")]
    assert {(e["source"], e["error_type"]) for e in errors} == {("shadow:policy", "TypeError")}


async def test_a_cost_cap_with_an_unpriced_model_is_refused_before_it_spends_more(
    tmp_path: Path,
) -> None:
    """Ten replies of 110,000 tokens each from a model with no price under a $1 cap: the
    first reply ends the run ``failed`` with the ConfigError, and no tool runs."""
    ws = tmp_path / "ws"
    big = {"input_tokens": 110_000, "output_tokens": 10, "total_tokens": 110_010}
    replies = [
        AIMessage(
            "",
            tool_calls=[{"name": "deploy", "args": {"target": f"t{i}"}, "id": f"c{i}"}],
            usage_metadata=big,  # type: ignore[arg-type]
            response_metadata={"model_name": "local-llama-70b"},
        )
        for i in range(10)
    ]
    model = tool_model([])
    model.messages = iter(replies)
    agent = agent_at(ws, budget=gr.Budget(max_cost_usd=1.0), store=False)
    mw = guardrail_middleware(agent, cwd=ws)
    app = create_agent(model, tools=[counted(ws)], middleware=[mw])
    with pytest.raises(ConfigError, match=r"'local-llama-70b' has no price: pass price=gr\.Price"):
        await app.ainvoke({"messages": [HumanMessage("go")]})
    assert runs_of(ws) == 0
    assert mw.run.status == "failed" and isinstance(mw.run.error, ConfigError)
    assert len(mw.run.events.of_kind("model_call")) == 1
    [error] = mw.run.events.of_kind("error")
    assert error.data["source"] == "budget"
    with pytest.raises(ConfigError, match="'local-llama-70b' has no price"):
        guardrail_middleware(agent, cwd=ws, model="local-llama-70b")  # known: refused at once
