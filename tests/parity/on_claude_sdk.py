"""Runtime 2: the Claude Agent SDK, through the Claude Code CLI it bundles, against the local
Messages API server, with the agent's guardrails as the session's hooks.

The counting tools are the enforcement matrix's in-process SDK MCP tools
(``mcp__count__lookup``), which the bridge reads as the agent's toolset tools (``lookup``).
They are pre-approved, except those an approval policy asks about: for those the CLI must
ask ``can_use_tool``, which the guardrails answer.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks, local_env
from gr_notebook.models import ModelResponse
from gr_notebook.testing import MessagesServer
from tests.enforcement.counting import LOCAL_TOOLS, Counter, gr_tools
from tests.enforcement.drive_claude_sdk import (
    SDK_SERVER,
    claude_name,
    claude_turns,
    sdk_tools,
    side_request,
)
from tests.parity.runtime import Observed, observed, refused
from tests.parity.scenarios import Case


class ClaudeAgentSDK:
    key = "claude-sdk"
    name = "Claude Agent SDK (CLI)"

    async def play(self, case: Case, root: Path) -> Observed:
        from claude_agent_sdk import create_sdk_mcp_server

        counter = Counter(root / "counts")
        ws = root / "ws"
        ws.mkdir(parents=True, exist_ok=True)
        toolset = gr.Toolset(gr_tools(counter), name=SDK_SERVER)
        try:  # the agent's own model makes no call here: None needs no price
            agent = gr.Agent(
                None, workspace=ws, tools=[toolset], store=False, **case.agent_options()
            )
            hooks = guardrail_hooks(agent, cwd=ws, model=f"claude-agent-sdk:{case.model}")
        except ConfigError as exc:
            return refused(exc, counter)
        allowed = [claude_name(t) for t in LOCAL_TOOLS if t not in case.asked_tools]
        with MessagesServer(sdk_script(case), side=side_request) as server:
            options = hooks.options(
                permission_mode="acceptEdits",
                model=case.model,
                env=local_env(server.url, root / "claude-config"),
                tools=[],
                mcp_servers={
                    SDK_SERVER: create_sdk_mcp_server(SDK_SERVER, tools=sdk_tools(counter))
                },
                allowed_tools=allowed,
            )
            try:
                async for _ in hooks.query("Do the job.", options=options):
                    pass
            except Exception:  # the run records how it ended; the cell shows it
                if not hooks.run.done:
                    raise
        return observed(hooks.run, counter)


def sdk_script(case: Case) -> list[Any]:
    """The script with Claude's names for the local tools, each reply with the case's usage."""
    out: list[ModelResponse] = [
        gr.text(step) if isinstance(step, str) else claude_turns([step])[0] for step in case.script
    ]
    return [replace(r, usage=case.usage) for r in out] if case.usage else out


RUNTIME = ClaudeAgentSDK()
