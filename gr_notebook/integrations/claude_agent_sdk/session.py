"""One Claude Agent SDK session as a gr run (a
:class:`~gr_notebook.integrations.hosted_session.HostedSession`), fed by the session's hooks
and message stream.

gr's loop makes the model calls and so counts them; here the Claude Code CLI makes them,
and the session learns of each from the SDK's message stream: an ``AssistantMessage`` with a
new message id is one model call (a turn, its tokens), the ``init`` message names the tools,
and the ``ResultMessage`` ends the run. The hooks then judge each call and stop with the same
:class:`~gr_notebook.engine.state.RunState` a native run has, so every DataFrame, the lint,
the store and the dashboard read an SDK session exactly as they read a native run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gr_notebook.agent import Agent
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.state import RunState
from gr_notebook.errors import RunError
from gr_notebook.harness import CLAUDE_AGENT_SDK
from gr_notebook.integrations.claude_agent_sdk.replies import Reply
from gr_notebook.integrations.claude_agent_sdk.tools import CLAUDE_CODE_TOOLS, ToolNames
from gr_notebook.integrations.claude_agent_sdk.view import ClaudeView
from gr_notebook.integrations.hosted_session import HostedSession
from gr_notebook.limits import SpentLimit
from gr_notebook.workflow.workspace import Workspace

if TYPE_CHECKING:
    from gr_notebook.tools.base import Tool

__all__ = ["Session"]

CATCH_UP_S = 2.0
"""How long a hook waits for the message stream to report the call it judges."""


class Session(HostedSession):
    """The run behind one SDK session; built by :func:`guardrail_hooks`."""

    harness = CLAUDE_AGENT_SDK
    placeholder = "claude-agent-sdk"
    again = "call guardrail_hooks(agent) again for a new session"
    described = "(a Claude Agent SDK session)"

    def __init__(
        self,
        agent: Agent,
        names: ToolNames,
        *,
        tools: Iterable[str] | None,
        model: str,
        instructions: str,
    ) -> None:
        self.names = names
        super().__init__(
            agent,
            Workspace(names.cwd),
            tools=tools,
            assumed=CLAUDE_CODE_TOOLS,
            model=model,
            instructions=instructions,
        )
        self.session_id: str | None = None
        self._replies: set[str] = set()
        """The message ids of the replies counted."""
        self._current: Reply | None = None
        self._streamed = False
        """The session passes on the API's stream events (``include_partial_messages``)."""
        self._tool_ids: set[str] = set()
        self._observed: asyncio.Event | None = None
        self._watched = False
        self._reply = ""
        """The text of the latest reply of the main thread."""
        self._last = time.perf_counter()

    # -- Claude's terms -------------------------------------------------------------------------

    def model_named(self, model: str) -> str | None:
        """``claude-agent-sdk:claude-sonnet-4-6`` names Claude Sonnet 4.6; the bare
        placeholder names no model yet (the CLI's replies will)."""
        named = model.removeprefix(f"{self.placeholder}:")
        return None if named == self.placeholder else named

    def view_of(self, state: RunState) -> ClaudeView:
        self.view = ClaudeView(state, self.names)
        """What the guardrails record, put in Claude's terms."""
        return self.view

    def policy_tools(self, names: Iterable[str]) -> list[Tool]:
        """Stand-ins for the session's tools under the names policies read."""
        return [self.names.stub(n) for n in sorted({self.names.gr_name(n) for n in names})]

    def tool(self, name: str) -> Tool:
        return self.names.stub(name)

    def tools_hint(self, names: Sequence[str]) -> str:
        return (
            f"This Claude Agent SDK session's tools are {', '.join(sorted(names))} (Claude "
            "Code's Read, Write, Edit, MultiEdit and NotebookEdit read as read_file, "
            "write_file and edit_file): give the session the tool (ClaudeAgentOptions("
            "tools=[...])), or map one onto it with guardrail_hooks(agent, tool_map="
            "{'SdkTool': 'name'})"
        )

    def meet_tool(self, sdk_name: str) -> None:
        """A call of a tool the session did not name: bind the policies to it before they
        judge it, so that the agent-wide ones govern it rather than none (the CLI's ``init``
        message names its subagent tool ``Task``, and its hooks ``Agent``)."""
        if sdk_name and self.tools is not None and sdk_name not in self.tools:
            self.bind_tools((*self.tools, sdk_name))

    # -- the run's life ------------------------------------------------------------------------

    def is_foreign(self, session_id: str | None) -> bool:
        """Another session than the one these hooks record called them."""
        return bool(session_id and self.session_id and session_id != self.session_id)

    def join(self, session_id: str | None) -> None:
        """The first sign of the session starts the run; a session the run does not
        record, or any call once the run has ended, is a RunError: nothing is recorded
        after ``run_finished``."""
        if self.is_foreign(session_id):
            raise RunError(
                f"these guardrail hooks record session {self.session_id}, and session "
                f"{session_id} called them: make one with guardrail_hooks(agent) per session"
            )
        if self.begin():
            self._observed = asyncio.Event()
        self.session_id = self.session_id or session_id

    def finish(self, outcome: LoopOutcome) -> None:
        super().finish(outcome)
        if self._observed is not None:
            self._observed.set()  # a hook waiting for the stream stops waiting

    # -- the message stream --------------------------------------------------------------------

    def observe(self, message: Any) -> None:
        """Account for one message of the SDK's stream (any object; others are ignored).
        Once the run has ended, nothing more is recorded."""
        if self.run.done:
            return
        kind = type(message).__name__
        data = getattr(message, "data", None)
        if kind == "SystemMessage" and getattr(message, "subtype", "") == "init":
            self._watched = True
            self.join(data.get("session_id") if isinstance(data, Mapping) else None)
            tools = data.get("tools") if isinstance(data, Mapping) else None
            if isinstance(tools, list):
                self.bind_tools(str(t) for t in tools)
        elif kind == "StreamEvent" and getattr(message, "parent_tool_use_id", None) is None:
            self._watched = self._streamed = True
            self._stream_event(getattr(message, "event", None))
        elif kind == "AssistantMessage":
            self._watched = True
            if getattr(message, "parent_tool_use_id", None) is not None:
                self._tool_ids.update(_tool_ids(message))  # a subagent's: not the run's turns
            elif not self._streamed:
                self._first_block(message)
        elif kind == "ResultMessage":
            self._settle_tokens(getattr(message, "usage", None))
            self.finish(self._result_outcome(message))
        if self._observed is not None:
            self._observed.set()

    async def catch_up(self, *, call: str | None = None, reply: str | None = None) -> None:
        """Before judging, let the message stream report the model call a hook is about: the
        one with the tool use ``call``, or the one whose text is ``reply`` (a stop). A hook
        and the stream's reader run as separate tasks, so the hook may come first."""
        if not self._watched or self._observed is None or not (call or reply):
            return
        deadline = time.monotonic() + CATCH_UP_S
        while call not in self._tool_ids and (not reply or _words(reply) != _words(self._reply)):
            if self.run.done:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._observed.clear()
            try:
                await asyncio.wait_for(self._observed.wait(), remaining)
            except TimeoutError:
                return

    def _stream_event(self, event: Any) -> None:
        """The API's stream events of a main-thread reply: one reply from start to stop."""
        if not isinstance(event, Mapping):
            return
        if event.get("type") == "message_start":
            self._current = Reply.starting(event, self.model, time.perf_counter())
        elif self._current is not None and self._current.add(event):
            reply, self._current = self._current, None
            self._model_call(reply)

    def _first_block(self, message: Any) -> None:
        """Without stream events: the first ``AssistantMessage`` of a reply stands for it."""
        message_id = getattr(message, "message_id", None)
        if message_id and message_id in self._replies:
            self._tool_ids.update(_tool_ids(message))  # a later block of a counted reply
            return
        self._model_call(Reply.of_message(message, self.model, self._last))

    def _model_call(self, reply: Reply) -> None:
        """One model call: a turn, its tokens, a ``model_call`` event; then the hooks that
        wait for its tool uses (:meth:`catch_up`) may judge them."""
        self._replies.add(reply.message_id)
        state = self.state
        state.turn += 1
        state.tokens += reply.prompt_tokens + reply.usage.output_tokens
        now = time.perf_counter()
        self.model_call(  # a capped model with no price ends the run: the hooks stop Claude
            reply.usage,
            prompt_tokens=reply.prompt_tokens,
            stop_reason=reply.stop_reason or ("tool_use" if reply.tool_ids else "end_turn"),
            tool_calls=len(reply.tool_ids),
            text=reply.text,
            duration_s=now - reply.started,
            model=reply.model,
        )
        self._reply, self._last = reply.text, now
        self._tool_ids.update(reply.tool_ids)

    def _settle_tokens(self, usage: Any) -> None:
        """The session's own total, when it is more than the replies reported as they
        started (their final output tokens come only at the end of each stream)."""
        if isinstance(usage, Mapping):
            keys = (
                "input_tokens",
                "output_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
            )
            total = sum(int(usage.get(k) or 0) for k in keys)
            self.state.tokens = max(self.state.tokens, total)

    def _result_outcome(self, message: Any) -> LoopOutcome:
        """How the session ended: as the hooks decided, else as the CLI reports it."""
        if self.outcome is not None:
            return self.outcome
        subtype = str(getattr(message, "subtype", ""))
        if subtype == "success":
            return LoopOutcome(
                "completed" if self.state.phases.job else "ended", "the model ended its turn"
            )
        if subtype == "error_max_turns":
            limit = self.agent.budget.max_iterations
            spent = SpentLimit("iterations", self.state.turn, limit)
            return LoopOutcome("budget_exhausted", spent.reason, limit=spent)
        if subtype == "error_max_budget_usd":
            cap = self.agent.budget.max_cost_usd
            if cap is None:
                return LoopOutcome(
                    "budget_exhausted", "the session's cost limit (max_budget_usd) was reached"
                )
            cost = getattr(message, "total_cost_usd", None)
            used = max(self.state.cost_usd, cost if isinstance(cost, (int, float)) else 0.0)
            spent = SpentLimit("cost", used, cap)
            return LoopOutcome("budget_exhausted", spent.reason, limit=spent)
        errors = getattr(message, "errors", None) or getattr(message, "result", None) or ""
        return LoopOutcome("failed", f"the Claude Agent SDK session ended with {subtype}: {errors}")


def _tool_ids(message: Any) -> set[str]:
    blocks = getattr(message, "content", ()) or ()
    return {str(getattr(b, "id", "")) for b in blocks if type(b).__name__ == "ToolUseBlock"}


def _words(text: str) -> str:
    return " ".join(text.split())
