"""One Claude Agent SDK session as a gr run: the same run state, event log, store rows and
``Run`` handle as a run of gr's own loop, fed by the session's hooks and message stream.

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
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gr_notebook import runner
from gr_notebook.agent import Agent
from gr_notebook.engine.loop import Loop
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.shadow import ShadowSpec
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.harness import CLAUDE_AGENT_SDK
from gr_notebook.history.store import Store
from gr_notebook.integrations.claude_agent_sdk.replies import Reply
from gr_notebook.integrations.claude_agent_sdk.tools import CLAUDE_CODE_TOOLS, ToolNames
from gr_notebook.integrations.claude_agent_sdk.view import ClaudeView
from gr_notebook.integrations.session_record import (
    Pricing,
    agent_wide_policies,
    record_model_call,
    record_start,
    toolsets_on,
)
from gr_notebook.limits import SpentLimit
from gr_notebook.models.catalog import facts_of
from gr_notebook.run import Limits, Run
from gr_notebook.workflow.workspace import Workspace
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock

if TYPE_CHECKING:
    from gr_notebook.tools.base import Tool

__all__ = ["Session"]

CATCH_UP_S = 2.0
"""How long a hook waits for the message stream to report the call it judges."""


class Session:
    """The run behind one SDK session; built by :func:`guardrail_hooks`."""

    def __init__(
        self,
        agent: Agent,
        names: ToolNames,
        *,
        tools: Iterable[str] | None,
        model: str,
        instructions: str,
    ) -> None:
        self.agent, self.names, self.model = agent, names, model
        self.tools = tuple(tools) if tools is not None else None
        spec = self._spec(self.tools or CLAUDE_CODE_TOOLS, checked=self.tools is not None)
        definition = replace(
            agent.definition(own_model=False),  # the CLI makes the calls, priced as they come
            guardrails=spec,
            shadow=self._shadow(self.tools or CLAUDE_CODE_TOOLS, checked=self.tools is not None),
            regulation=None,  # self-regulation is gr's own tools; Claude Code has none of them
            stuck_detector=None,
            stuck_turns=None,  # seed 000's progress check watches gr's todo list
        )
        self.run_id = runner.new_run_id(agent.clock)
        workspace = Workspace(names.cwd)
        self.state = RunState(
            definition, workspace=workspace, clock=agent.clock, run_id=self.run_id
        )
        self.view = ClaudeView(self.state, names)
        """What the guardrails record, put in Claude's terms."""
        self.state.guards = Guardrails(
            definition.guardrails, self.view, harness=CLAUDE_AGENT_SDK, shadow=definition.shadow
        )
        self.loop = Loop(definition, self.state)  # never run: it holds the person's controls
        self.run = Run(
            self.run_id,
            workspace=workspace,
            events=self.state.events,
            phases=self.state.phases,
            instructions=instructions or "(a Claude Agent SDK session)",
            harness=CLAUDE_AGENT_SDK,
            limits=Limits(
                max_iterations=agent.budget.max_iterations,
                context_window=facts_of(model.removeprefix("claude-agent-sdk:")).context_window,
                token_budget=agent.budget.max_tokens,
                cost_limit_usd=agent.budget.max_cost_usd,
            ),
        )
        runner.announce(agent, self.run)
        self.session_id: str | None = None
        self.outcome: LoopOutcome | None = None
        """How the hooks ended the session, when they did (a stop, a limit, stuck)."""
        self._store: Store | None = None
        self._lock: WorkspaceLock | None = None
        self._done: asyncio.Event | None = None
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
        self._pricing = Pricing(agent, " (the CLI's max_budget_usd still ends the session)")

    # -- the guardrails' tools ------------------------------------------------------------------

    def _spec(self, sdk_tools: Iterable[str], *, checked: bool) -> GuardrailSpec:
        """The agent's guardrails bound to the session's tools, under the names policies
        read; a policy naming a tool the session lacks is a ConfigError when ``checked``."""
        agent = self.agent
        stubs = self._stubs(sdk_tools, checked=checked)
        try:
            return GuardrailSpec.build(
                tools=stubs,
                toolsets=toolsets_on(agent, self.names.stub),
                policies=agent_wide_policies(agent),
                feedback_providers=agent.guardrails.feedback,
                checker=agent.guardrails.checker,
                max_refusals=agent.guardrails.max_refusals,
                check_names=checked,  # else when the session names its tools
            )
        except ConfigError as exc:
            raise ConfigError(
                f"{exc}. This Claude Agent SDK session's tools are {', '.join(sorted(sdk_tools))} "
                "(Claude Code's Read, Write, Edit, MultiEdit and NotebookEdit read as "
                "read_file, write_file and edit_file): give the session the tool "
                "(ClaudeAgentOptions(tools=[...])), or map one onto it with "
                "guardrail_hooks(agent, tool_map={'SdkTool': 'name'})"
            ) from None

    def _stubs(self, sdk_tools: Iterable[str], *, checked: bool) -> list[Tool]:
        """Stand-ins for the session's tools under the names policies read."""
        tools = {self.names.gr_name(n) for n in sdk_tools}
        if not checked:  # before the session names its tools, assume what policies name
            tools |= {t.name for t in self.agent.registry}
        return [self.names.stub(n) for n in sorted(tools)]

    def _shadow(self, sdk_tools: Iterable[str], *, checked: bool) -> ShadowSpec | None:
        """The agent's shadow guardrails bound to the session's tools; None for none."""
        shadow = self.agent.shadow
        if shadow.empty:
            return None
        try:
            return shadow.bound_to(self._stubs(sdk_tools, checked=checked), check_names=checked)
        except ConfigError as exc:
            raise ConfigError(
                f"shadow: {exc}. This Claude Agent SDK session's tools are "
                f"{', '.join(sorted(sdk_tools))}"
            ) from None

    def bind_tools(self, sdk_tools: Iterable[str]) -> None:
        """The session named its tools (its ``init`` message): bind the policies to them."""
        names = tuple(sdk_tools)
        spec = self._spec(names, checked=True)
        self.state.guards.rebind(spec, self._stubs(names, checked=True))
        self.tools = names

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

    def begin(self, session_id: str | None) -> None:
        """The first sign of the session: the run starts (lock, store row, first event).
        A session the run does not record, or any call once the run has ended, is a
        RunError: nothing is recorded after ``run_finished``."""
        if self.is_foreign(session_id):
            raise RunError(
                f"these guardrail hooks record session {self.session_id}, and session "
                f"{session_id} called them: make one with guardrail_hooks(agent) per session"
            )
        ended = self.ended()
        if ended is not None:
            raise RunError(ended)
        if self._done is not None:
            self.session_id = self.session_id or session_id
            return
        self.session_id = session_id
        agent, state = self.agent, self.state
        root = state.workspace.root
        self._lock = WorkspaceLock.acquire(root, LockOwner.this_process(self.run_id, agent.clock()))
        self._done = asyncio.Event()
        self._observed = asyncio.Event()
        self._store = record_start(
            agent, state, self.run, model=self.model, harness=CLAUDE_AGENT_SDK
        )
        task = asyncio.get_running_loop().create_task(self._wait(), name=f"gr-sdk-{self.run_id}")
        self.run.attach(self.loop, task)

    async def _wait(self) -> Run:
        assert self._done is not None
        await self._done.wait()
        return self.run

    def ended(self) -> str | None:
        """Why the hooks record nothing more, once the run has ended; None while it is live."""
        if not self.run.done:
            return None
        return (
            f"run {self.run_id} has finished ({self.run.status}) and records nothing more; "
            "call guardrail_hooks(agent) again for a new session"
        )

    def finish(self, outcome: LoopOutcome) -> None:
        """End the run once: status, ``run_finished``, the store's rows, the lock."""
        if self.run.done or self._done is None:
            return
        try:
            runner.finish(self.agent, self.run, self.loop, self._store, outcome)
        finally:
            if self._lock is not None:
                self._lock.release()
            self._done.set()
            if self._observed is not None:
                self._observed.set()  # a hook waiting for the stream stops waiting

    def end_with(self, outcome: LoopOutcome) -> None:
        """What a hook decided about the end; the first decision stands."""
        if self.outcome is None:
            self.outcome = outcome

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
            self.begin(data.get("session_id") if isinstance(data, Mapping) else None)
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
        record_model_call(
            state,
            reply.usage,
            cost=self._pricing.cost(state, reply.model, reply.usage),
            context_tokens=reply.prompt_tokens,
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
