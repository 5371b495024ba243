"""``guardrail_middleware(agent)``: an agent's guardrails as LangChain v1 middleware.

The returned middleware goes in ``create_agent(model, tools=[...], middleware=[mw])``; its
``run`` is the :class:`gr.Run <gr_notebook.Run>` that records the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from gr_notebook.agent import Agent
from gr_notebook.errors import ConfigError
from gr_notebook.integrations.extras import load_extra
from gr_notebook.integrations.hosted_session import session_root
from gr_notebook.tools.toolset import flatten_tools
from gr_notebook.workflow.workspace import Workspace

if TYPE_CHECKING:
    from gr_notebook.integrations.langchain.middleware import GuardrailMiddleware

__all__ = ["EXTRA", "FILE_TOOLS", "guardrail_middleware", "load_langchain"]

EXTRA = "pip install 'gr-notebook[langchain]'"

FILE_TOOLS = ("read_file", "write_file", "edit_file")
"""gr's file tools, which the middleware offers to the LangChain agent by default."""


def load_langchain() -> ModuleType:
    """The ``langchain`` module (v1, with its agent middleware), or a one-line error that
    names the extra."""
    return load_extra(
        "langchain",
        needs=("langchain.agents.middleware",),  # v1's middleware
        what="LangChain (v1, with langchain.agents.middleware)",
        extra=EXTRA,
    )


def guardrail_middleware(
    agent: Agent,
    *,
    cwd: str | os.PathLike[str] | None = None,
    tools: Iterable[str] | None = None,
    gr_tools: bool = True,
    model: str = "langchain",
    instructions: str = "",
) -> GuardrailMiddleware:
    """The agent's guardrails (policies, toolset policies, feedback providers, completion
    checker, budget, interventions, shadow guardrails) as middleware for one LangChain
    agent session.

    ``cwd`` is the workspace gr's tools and the guardrails read (default: the agent's
    workspace, else the current directory). ``tools`` names the LangChain agent's tools,
    checked against the policies now (else at the first model call). ``gr_tools`` offers
    gr's file tools (``read_file``, ``write_file``, ``edit_file``) and the agent's own tools
    to the LangChain agent through the middleware. ``model`` names the model in the record
    until a reply names it.
    """
    load_langchain()
    root = session_root(agent, cwd, "guardrail_middleware")
    if agent.mcp_servers:  # ignored in silence, they would look connected and guarded
        servers = ", ".join(s.name for s in agent.mcp_servers)
        raise ConfigError(
            f"guardrail_middleware does not connect the agent's MCP servers ({servers}): load "
            "their tools in LangChain (langchain-mcp-adapters) and give them to "
            "create_agent(tools=[...]), then build the gr.Agent without mcp_servers=; its "
            "policies read the tools under the names LangChain gives them"
        )
    from gr_notebook.integrations.langchain.middleware import GuardrailMiddleware
    from gr_notebook.integrations.langchain.session import Session
    from gr_notebook.integrations.langchain.tools import as_langchain

    offered = []
    if gr_tools:
        own = [t for t in (agent.registry.get(n) for n in FILE_TOOLS) if t is not None]
        offered = [*own, *flatten_tools(agent.user_tools)]
    names = None if tools is None else [*tools, *(t.name for t in offered)]
    session = Session(
        agent,
        Workspace(root),
        offered,
        tools=names,
        model=model,
        instructions=instructions,
    )
    return GuardrailMiddleware(session, as_langchain(offered, session.state))
