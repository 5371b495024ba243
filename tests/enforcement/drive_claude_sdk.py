"""Runtime 4: the Claude Agent SDK, through the Claude Code CLI it bundles, against the local
Messages API server, with the agent's guardrails as the session's hooks.

The local tools are in-process SDK MCP tools (``mcp__count__lookup``), which the bridge reads
as the agent's own toolset tools (``lookup``); the MCP scenario adds the real MCP server over
stdio. Every tool is pre-approved (``allowed_tools``), so nothing but the guardrails' hook
stands between a call and its execution: a denied call that runs zero times was stopped by
the hook, and the allowed one, run once, shows that the permissions let calls through.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.guardrails.policy import ToolPolicy
from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks, local_env
from gr_notebook.messages import ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.testing import MessagesServer
from tests.enforcement.counting import LOCAL_TOOLS, MCP_SERVER, SCHEMA, Counter, gr_tools
from tests.enforcement.driver import KnownGap, NotApplicable, Played, decisions_of
from tests.enforcement.gr_loop import FINAL, MCP_SCRIPT, results_in_messages
from tests.enforcement.scenarios import Scenario, Turn, policy_for

MODEL = "claude-sonnet-4-6"
SDK_SERVER = "count"
"""The in-process SDK MCP server of the local tools."""
DELEGATE = "Agent"
"""Claude Code's tool that starts a subagent (``Task`` before CLI 2.1.x)."""
SUBAGENT = "records-auditor"


def claude_name(tool: str) -> str:
    return f"mcp__{SDK_SERVER}__{tool}" if tool in LOCAL_TOOLS else tool


def claude_turns(turns: Sequence[Turn]) -> list[ModelResponse]:
    return [
        ModelResponse(
            tuple(ToolUseBlock(c.id, claude_name(c.tool), c.input) for c in turn), "tool_use"
        )
        for turn in turns
    ]


class Router:
    """The CLI's requests in the order they come: the main thread's answered from its script,
    a subagent's (its request lacks the delegating tool) from the subagent's."""

    def __init__(self, main: Sequence[ModelResponse], sub: Sequence[ModelResponse] = ()) -> None:
        self.main, self.sub = deque(main), deque(sub)

    def __call__(self, body: dict[str, Any]) -> ModelResponse:
        queue = self.main if DELEGATE in _tool_names(body) or not self.sub else self.sub
        return queue.popleft()

    def script(self) -> list[Any]:
        """One entry per turn (the server numbers them, and so names each reply apart)."""
        return [self] * (len(self.main) + len(self.sub))


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {str(t.get("name")) for t in body.get("tools") or ()}


def side_request(body: dict[str, Any]) -> ModelResponse | None:
    """A request with no tools is the CLI's own (a title, a summary), not a turn."""
    return None if body.get("tools") else gr.text("(a side request)")


class ClaudeAgentSDKDriver:
    key = "claude-sdk"
    name = "Claude Agent SDK (CLI)"

    def __init__(self, policy_of: Callable[[Scenario], ToolPolicy] = policy_for) -> None:
        self._policy_of = policy_of

    def limit(self, scenario: Scenario) -> NotApplicable | KnownGap | None:
        return None

    async def play(self, scenario: Scenario, root: Path) -> Played:
        counter = Counter(root / "counts")
        (root / "ws").mkdir(parents=True, exist_ok=True)
        if scenario.delegated:
            delegate = ToolUseBlock(
                "toolu_delegate",
                DELEGATE,
                {
                    "description": "Audit the records",
                    "prompt": "Look the records up and report.",
                    "subagent_type": SUBAGENT,
                    "run_in_background": False,
                },
            )
            # in the foreground, the subagent's calls all come before the main thread's answer
            router = Router(
                [ModelResponse((delegate,), "tool_use"), gr.text(FINAL)],
                [*claude_turns(scenario.turns), gr.text("The audit is done.")],
            )
        else:
            router = Router([*claude_turns(scenario.turns), gr.text(FINAL)])
        # one server for both sessions of a resume: it signs the thinking blocks it sends and
        # checks them when they come back, as the API does, across sessions
        with MessagesServer(router.script(), side=side_request) as server:
            first, session_id = await self._session(scenario, root, counter, server)
            runs = [first]
            if scenario.resumed:
                # the same agent's guardrails in fresh hooks; the CLI resumes the session
                router = Router([*claude_turns(scenario.resumed), gr.text(FINAL)])
                for entry in router.script():
                    server.add(entry)
                before = len(server.requests)
                again, resumed_id = await self._session(
                    scenario, root, counter, server, resume=session_id
                )
                assert resumed_id == session_id, (resumed_id, session_id)
                turn = next(r.body for r in server.requests[before:] if r.body.get("tools"))
                earlier = {c.id for t in scenario.turns for c in t}
                assert earlier <= set(results_in_messages(turn["messages"])), "it restarted"
                runs.append(again)
        bodies = [r.body for r in server.requests if r.path == "/v1/messages"]
        told = results_in_messages(m for b in bodies for m in b.get("messages", ()))
        decisions = decisions_of(*runs)
        if (DELEGATE, True) in decisions:  # the denial reached the subagent's conversation
            for call in scenario.denied_calls:
                readers = [b for b in bodies if call.id in results_in_messages(b["messages"])]
                assert readers, f"no request carried the result of {call.id}"
                assert all(DELEGATE not in _tool_names(b) for b in readers), "not a subagent's"
        return Played(counter.all_runs(dict.fromkeys(scenario.tools)), told, decisions)

    async def _session(
        self,
        scenario: Scenario,
        root: Path,
        counter: Counter,
        server: MessagesServer,
        **fields: Any,
    ) -> tuple[gr.Run, str]:
        from claude_agent_sdk import AgentDefinition, create_sdk_mcp_server

        ws = root / "ws"
        toolset = gr.Toolset(gr_tools(counter), name=SDK_SERVER)
        agent = gr.Agent(
            gr.ScriptedModel([]),
            workspace=ws,
            tools=[toolset],
            policies=[self._policy_of(scenario)],
            store=False,
            self_regulation=False,
            interventions=None,
        )
        hooks = guardrail_hooks(agent, cwd=ws, model=f"claude-agent-sdk:{MODEL}")
        servers: dict[str, Any] = {
            SDK_SERVER: create_sdk_mcp_server(SDK_SERVER, tools=sdk_tools(counter))
        }
        allowed = [claude_name(t) for t in LOCAL_TOOLS]
        if scenario.mcp:
            servers[MCP_SERVER] = {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(MCP_SCRIPT), str(counter.root)],
            }
            allowed += [f"mcp__{MCP_SERVER}__{t}" for t in ("query", "drop_table")]
        if scenario.delegated:
            fields["agents"] = {
                SUBAGENT: AgentDefinition(
                    description="Audits the records.",
                    prompt="You audit records with the tools you have.",
                    tools=[claude_name(t) for t in LOCAL_TOOLS],
                )
            }
        # every tool pre-approved on purpose: the hook alone stands between a call and its
        # run (the SDK warns that can_use_tool is then never asked; no policy here asks)
        options = hooks.options(
            permission_mode="acceptEdits",
            model=MODEL,
            env=local_env(server.url, root / "claude-config"),
            tools=[DELEGATE] if scenario.delegated else [],
            mcp_servers=servers,
            allowed_tools=allowed,
            **fields,
        )
        messages = [m async for m in hooks.query("Do the job.", options=options)]
        result = messages[-1]
        assert type(result).__name__ == "ResultMessage" and not result.is_error, result
        return hooks.run, str(result.session_id)


def sdk_tools(counter: Counter) -> list[Any]:
    """The local tools as in-process SDK MCP tools; each execution counts."""
    from claude_agent_sdk import tool

    def make(name: str, description: str) -> Any:
        async def handler(args: dict[str, Any]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": counter.record(name, args)}]}

        return tool(name, description, dict(SCHEMA))(handler)

    return [make(name, description) for name, description in LOCAL_TOOLS.items()]


DRIVER = ClaudeAgentSDKDriver()
