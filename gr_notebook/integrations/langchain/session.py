"""One LangChain agent session as a gr run (a
:class:`~gr_notebook.integrations.hosted_session.HostedSession`), fed by the middleware's hooks.

LangChain's ``create_agent`` makes the model calls and runs the tools; the middleware sees
each model call (``wrap_model_call``: a turn, its tokens from ``usage_metadata``) and each
tool call (``wrap_tool_call``). The policies read gr's own tools where the middleware offers
them, and stand-ins under LangChain's names for the app's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gr_notebook.agent import Agent
from gr_notebook.harness import LANGCHAIN
from gr_notebook.integrations.hosted_session import HostedSession
from gr_notebook.messages import Usage
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.workflow.workspace import Workspace

__all__ = ["ModelCall", "Session"]


class ModelCall:
    """What one model call reported: its usage (as gr counts it), text and tool calls."""

    __slots__ = ("duration_s", "model", "stop_reason", "text", "tool_calls", "usage")

    def __init__(
        self,
        usage: Usage,
        *,
        text: str,
        tool_calls: int,
        model: str,
        stop_reason: str,
        duration_s: float,
    ) -> None:
        self.usage, self.text, self.tool_calls = usage, text, tool_calls
        self.model, self.stop_reason, self.duration_s = model, stop_reason, duration_s


class Session(HostedSession):
    """The run behind one LangChain agent session; built by ``guardrail_middleware``."""

    harness = LANGCHAIN
    placeholder = "langchain"
    again = (
        "a guardrail middleware records one session: build the agent again with "
        "middleware=[guardrail_middleware(agent)] for the next one"
    )
    described = "(a LangChain agent session)"

    def __init__(
        self,
        agent: Agent,
        workspace: Workspace,
        offered: Sequence[Tool],
        *,
        tools: Iterable[str] | None,
        model: str,
        instructions: str,
    ) -> None:
        self.offered = {t.name: t for t in offered}
        """gr's own tools the middleware offers to LangChain, by name."""
        super().__init__(
            agent,
            workspace,
            tools=tools,
            assumed=self.offered,
            model=model,
            instructions=instructions,
        )

    def policy_tools(self, names: Iterable[str]) -> list[Tool]:
        """gr's own tools where the middleware offers them, stand-ins for LangChain's
        (under their own names)."""
        return [self.tool(n) for n in sorted(set(names))]

    def tool(self, name: str) -> Tool:
        return self.offered.get(name) or _stub(name)

    def tools_hint(self, names: Sequence[str]) -> str:
        return (
            f"This LangChain agent's tools are {', '.join(sorted(names)) or 'none'}: give "
            "create_agent(tools=[...]) the tool, or let the middleware offer gr's file tools "
            "(guardrail_middleware(agent, gr_tools=True), the default)"
        )

    def call_made(self, call: ModelCall) -> None:
        """One model call: its tokens (every one, cached or not), cost, ``model_call``; a
        capped session whose model has no price ends ``failed``, and LangChain hears the
        ConfigError."""
        usage = call.usage
        prompt = usage.input_tokens + usage.cache_creation_input_tokens
        prompt += usage.cache_read_input_tokens
        self.state.tokens += prompt + usage.output_tokens
        refused = self.model_call(
            usage,
            prompt_tokens=prompt,
            model=call.model,
            stop_reason=call.stop_reason,
            tool_calls=call.tool_calls,
            text=call.text,
            duration_s=call.duration_s,
        )
        if refused is not None:
            raise refused


def _stub(name: str) -> Tool:
    return Tool(name, f"a LangChain tool, as gr's {name}", {}, _not_run_here)


def _not_run_here(_context: object, _params: object) -> ToolOutput:
    raise RuntimeError("a LangChain tool runs in LangChain, not in gr")
