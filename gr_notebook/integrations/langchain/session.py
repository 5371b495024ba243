"""One LangChain agent session as a gr run: the same run state, event log, store rows and
``Run`` handle as a run of gr's own loop, fed by the middleware's hooks.

LangChain's ``create_agent`` makes the model calls and runs the tools; the middleware sees
each model call (``wrap_model_call``: a turn, its tokens from ``usage_metadata``) and each
tool call (``wrap_tool_call``), and judges them with the same
:class:`~gr_notebook.engine.state.RunState` a native run has, so every DataFrame, the lint,
the store and the dashboard read a LangChain session exactly as they read a native run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import TYPE_CHECKING

from gr_notebook import runner
from gr_notebook.agent import Agent
from gr_notebook.engine.loop import Loop
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.shadow import ShadowSpec
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.harness import LANGCHAIN
from gr_notebook.history.store import Store
from gr_notebook.integrations.session_record import (
    Pricing,
    agent_wide_policies,
    record_model_call,
    record_start,
    toolsets_on,
)
from gr_notebook.messages import Usage
from gr_notebook.models.catalog import facts_of
from gr_notebook.run import Limits, Run
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.workflow.workspace import Workspace
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock

if TYPE_CHECKING:
    pass

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


class Session:
    """The run behind one LangChain agent session; built by ``guardrail_middleware``."""

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
        self.agent, self.model = agent, model
        self.offered = {t.name: t for t in offered}
        """gr's own tools the middleware offers to LangChain, by name."""
        self.tools = tuple(tools) if tools is not None else None
        checked = self.tools is not None
        names = self.tools if self.tools is not None else tuple(self.offered)
        definition = replace(
            agent.definition(own_model=False),  # LangChain makes the calls
            guardrails=self._spec(names, checked=checked),
            shadow=self._shadow(names, checked=checked),
            regulation=None,  # self-regulation is gr's own tools and todo list
            stuck_detector=None,
            stuck_turns=None,  # seed 000's progress check watches gr's todo list
        )
        self.definition = definition
        self.run_id = runner.new_run_id(agent.clock)
        self.state = state = RunState(
            definition, workspace=workspace, clock=agent.clock, run_id=self.run_id
        )
        state.guards = Guardrails(
            definition.guardrails, state, harness=LANGCHAIN, shadow=definition.shadow
        )
        self.loop = Loop(definition, state)  # never run: it holds the person's controls
        self.run = Run(
            self.run_id,
            workspace=workspace,
            events=state.events,
            phases=state.phases,
            instructions=instructions or "(a LangChain agent session)",
            harness=LANGCHAIN,
            limits=Limits(
                max_iterations=agent.budget.max_iterations,
                context_window=facts_of(model).context_window,
                token_budget=agent.budget.max_tokens,
                cost_limit_usd=agent.budget.max_cost_usd,
            ),
        )
        runner.announce(agent, self.run)
        self.outcome: LoopOutcome | None = None
        """How the guardrails ended the session, when they did (a limit, stuck, a stop)."""
        self.lock = threading.RLock()
        """Held while the run state changes: LangChain runs a turn's tool calls in parallel."""
        self._store: Store | None = None
        self._workspace_lock: WorkspaceLock | None = None
        self._started = False
        self._done: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._pricing = Pricing(agent)

    # -- the guardrails' tools ------------------------------------------------------------------

    def _tools(self, names: Iterable[str], *, checked: bool) -> list[Tool]:
        """The session's tools as policies read them: gr's own where the middleware offers
        them, stand-ins for LangChain's (under their own names)."""
        wanted = set(names)
        if not checked:  # before the session names its tools, assume what policies name
            wanted |= {t.name for t in self.agent.registry}
        return [self.offered.get(n) or _stub(n) for n in sorted(wanted)]

    def _spec(self, names: Iterable[str], *, checked: bool) -> GuardrailSpec:
        names = tuple(names)
        agent = self.agent
        try:
            return GuardrailSpec.build(
                tools=self._tools(names, checked=checked),
                toolsets=toolsets_on(agent, self.tool),
                policies=agent_wide_policies(agent),
                feedback_providers=agent.guardrails.feedback,
                checker=agent.guardrails.checker,
                max_refusals=agent.guardrails.max_refusals,
                check_names=checked,  # else when the session names its tools
            )
        except ConfigError as exc:
            raise ConfigError(
                f"{exc}. This LangChain agent's tools are {', '.join(sorted(names)) or 'none'}: "
                "give create_agent(tools=[...]) the tool, or let the middleware offer gr's "
                "file tools (guardrail_middleware(agent, gr_tools=True), the default)"
            ) from None

    def _shadow(self, names: Iterable[str], *, checked: bool) -> ShadowSpec | None:
        shadow = self.agent.shadow
        if shadow.empty:
            return None
        names = tuple(names)
        try:
            return shadow.bound_to(self._tools(names, checked=checked), check_names=checked)
        except ConfigError as exc:
            raise ConfigError(
                f"shadow: {exc}. This LangChain agent's tools are {', '.join(sorted(names))}"
            ) from None

    def tool(self, name: str) -> Tool:
        """The tool a call names, as the policies read it."""
        return self.offered.get(name) or _stub(name)

    def bind_tools(self, names: Sequence[str]) -> None:
        """The agent named its tools (its first model request): bind the policies to them;
        a policy naming a tool the agent lacks is a ConfigError."""
        names = tuple(names)
        if self.tools == names:
            return
        self.state.guards.rebind(self._spec(names, checked=True), self._tools(names, checked=True))
        self.tools = names

    # -- the run's life ------------------------------------------------------------------------

    def ended(self) -> str | None:
        """Why the middleware records nothing more, once the run has ended."""
        if not self.run.done:
            return None
        return (
            f"run {self.run_id} has finished ({self.run.status}) and records nothing more; a "
            "guardrail middleware records one session: build the agent again with "
            "middleware=[guardrail_middleware(agent)] for the next one"
        )

    def begin(self, instructions: str) -> None:
        """The first hook of the session: the run starts (lock, store row, first event)."""
        ended = self.ended()
        if ended is not None:
            raise RunError(ended)
        if self._started:
            return
        self._started = True
        if instructions:
            self.run.instructions = instructions
        agent, state = self.agent, self.state
        root = state.workspace.root
        self._workspace_lock = WorkspaceLock.acquire(
            root, LockOwner.this_process(self.run_id, agent.clock())
        )
        known = {} if self.tools is None else {"tools": list(self.tools)}
        self._store = record_start(
            agent, state, self.run, model=self.model, harness=LANGCHAIN, **known
        )
        self.run.attach(self.loop, self._watch())

    def _watch(self) -> asyncio.Task[Run] | None:
        """A task that ends with the session, so ``await run.wait()`` works as for a native
        run; None when the session runs outside an event loop (a plain ``invoke``)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        done = asyncio.Event()
        self._done = (loop, done)

        async def wait() -> Run:
            await done.wait()
            return self.run

        return loop.create_task(wait(), name=f"gr-langchain-{self.run_id}")

    def finish(self, outcome: LoopOutcome) -> None:
        """End the run once: status, ``run_finished``, the store's rows, the lock."""
        if self.run.done or not self._started:
            return
        try:
            # a finished run's conversation is LangChain's to keep: nothing to release
            ending = SimpleNamespace(clock=self.agent.clock, release_after_s=None)
            runner.finish(ending, self.run, self.loop, self._store, outcome)
        finally:
            if self._workspace_lock is not None:
                self._workspace_lock.release()
            if self._done is not None:
                loop, done = self._done
                loop.call_soon_threadsafe(done.set)

    def end_with(self, outcome: LoopOutcome) -> None:
        """What a guardrail decided about the end; the first decision stands."""
        if self.outcome is None:
            self.outcome = outcome

    def pending_end(self) -> LoopOutcome | None:
        """Why the session must end before the next model call: a person's stop, an end a
        guardrail decided, or a spent limit."""
        loop = self.loop
        if loop.stop_reason is not None:
            self.end_with(LoopOutcome(loop.stop_status, loop.stop_reason))
        spent = self.state.usage().spent
        if spent is not None:
            self.end_with(LoopOutcome("budget_exhausted", spent.reason, limit=spent))
        return self.outcome

    # -- model calls ---------------------------------------------------------------------------

    def model_call(self, call: ModelCall) -> None:
        """One model call: its tokens (every one, cached or not), cost, ``model_call``."""
        state, usage = self.state, call.usage
        prompt = usage.input_tokens + usage.cache_creation_input_tokens
        prompt += usage.cache_read_input_tokens
        state.tokens += prompt + usage.output_tokens
        record_model_call(
            state,
            usage,
            cost=self._pricing.cost(state, call.model, usage),
            context_tokens=prompt,
            stop_reason=call.stop_reason,
            tool_calls=call.tool_calls,
            text=call.text,
            duration_s=call.duration_s,
            model=call.model,
        )


def _stub(name: str) -> Tool:
    return Tool(name, f"a LangChain tool, as gr's {name}", {}, _not_run_here)


def _not_run_here(_context: object, _params: object) -> ToolOutput:
    raise RuntimeError("a LangChain tool runs in LangChain, not in gr")
