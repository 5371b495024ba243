"""One session of a host that makes its own model calls and runs its own tools (the Claude
Agent SDK, LangChain), recorded as a gr run: the same run state, event log, store rows and
``Run`` handle as a run of gr's own loop.

Every bridge's session is this class with its translation added: which tools the policies
read, how its host names them, what the record says of them. Here is what they share: the
agent's guardrails bound to the session's tools, the record (the store's row, the events,
``run_started`` and ``run_finished``), the workspace lock, a person's controls (a
:class:`~gr_notebook.engine.controls.Controls`, no loop: the host runs the turns), the model
calls as the host reports them, and their price (a capped session refuses a model with
none).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, ClassVar

from gr_notebook import runner
from gr_notebook.agent import Agent
from gr_notebook.engine.controls import Controls
from gr_notebook.engine.guarded_step import GuardedCall, GuardedStep
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.events import ErrorEvent
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.shadow import ShadowSpec, run_guardrails
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.harness import Harness
from gr_notebook.integrations.session_interventions import session_intervention
from gr_notebook.integrations.session_record import (
    Pricing,
    agent_wide_policies,
    record_start,
    toolsets_on,
)
from gr_notebook.messages import Usage
from gr_notebook.models.catalog import facts_of
from gr_notebook.run import Limits, Run
from gr_notebook.tools.base import ToolOutput
from gr_notebook.workflow.workspace import Workspace
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock

if TYPE_CHECKING:
    from gr_notebook.guardrails.view import RunView
    from gr_notebook.history.store import Store
    from gr_notebook.tools.base import Tool

__all__ = ["HostedSession", "session_root"]


def session_root(agent: object, cwd: str | os.PathLike[str] | None, bridge: str) -> Path:
    """The workspace a session's guardrails read: ``cwd``, else the agent's workspace, else
    the current directory. ``bridge`` is the function given ``agent``, for its error."""
    from gr_notebook.agent import Agent

    if not isinstance(agent, Agent):
        raise ConfigError(f"{bridge} takes a gr.Agent (its guardrails), not {type(agent).__name__}")
    if cwd is None:
        workspace = agent.workspace
        cwd = workspace.root if isinstance(workspace, Workspace) else workspace or os.getcwd()
    return Path(cwd).expanduser().resolve()


class HostedSession:
    """The run behind one session of another host. A subclass says what differs."""

    harness: ClassVar[Harness]
    placeholder: ClassVar[str]
    """The model the record names until a reply names one (no real model's name)."""
    again: ClassVar[str]
    """How to record the next session, for a call made once this one has ended."""
    described: ClassVar[str]
    """The session in the instructions' place, when it is given none."""

    def __init__(
        self,
        agent: Agent,
        workspace: Workspace,
        *,
        tools: Iterable[str] | None,
        assumed: Iterable[str] = (),
        model: str,
        instructions: str,
    ) -> None:
        """``tools`` are the session's tools, when known now (the policies' names are then
        checked against them); until the host names them, the policies govern ``assumed``
        and what the agent names."""
        self.agent, self.model = agent, model
        self.tools = tuple(tools) if tools is not None else None
        self.pricing = Pricing(agent)
        known = self.model_named(model)
        if known is not None:  # known now: a cap without its price is refused before it spends
            self.pricing.refuse(known)
        checked = self.tools is not None
        names = self.tools if self.tools is not None else tuple(assumed)
        self.definition = definition = replace(
            agent.definition(own_model=False),  # the host makes the calls
            guardrails=self._spec(names, checked=checked),
            shadow=self._shadow(names, checked=checked),
            regulation=None,  # self-regulation is gr's own tools and todo list
            stuck_detector=None,
            stuck_turns=None,  # seed 000's progress check watches gr's todo list
        )
        self.run_id = runner.new_run_id()
        self.state = state = RunState(
            definition, workspace=workspace, clock=agent.clock, run_id=self.run_id
        )
        state.guards = run_guardrails(
            definition.guardrails,
            self.view_of(state),
            harness=self.harness,
            shadow=definition.shadow,
        )
        self.step = GuardedStep(state, regulated=agent.regulation is not None)
        """What happens around each call and stop, as on gr's loop."""
        self.controls = Controls(state)
        """A person's stop (the hooks honour it at the next call or reply)."""
        self.run = Run(
            self.run_id,
            controls=self.controls,
            workspace=workspace,
            instructions=instructions or self.described,
            harness=self.harness,
            limits=Limits(
                max_iterations=agent.budget.max_iterations,
                context_window=facts_of(known or model).context_window,
                token_budget=agent.budget.max_tokens,
                cost_limit_usd=agent.budget.max_cost_usd,
            ),
        )
        runner.announce(agent, self.run)
        self.outcome: LoopOutcome | None = None
        """How the guardrails ended the session, when they did (a limit, stuck, a stop)."""
        self.lock = threading.RLock()
        """Held while the run state changes: a host may run a turn's tool calls in parallel."""
        self._store: Store | None = None
        self._workspace_lock: WorkspaceLock | None = None
        self._done: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self.started = False

    # -- what a host says of itself -------------------------------------------------------------

    def model_named(self, model: str) -> str | None:
        """The model ``model`` names, or None for the placeholder (not known yet)."""
        return None if model == self.placeholder else model

    def view_of(self, state: RunState) -> RunView:
        """The run as the guardrails read it and record into (a host may translate)."""
        return state

    def policy_tools(self, names: Iterable[str]) -> list[Tool]:
        """The session's tools ``names`` as the policies read them."""
        raise NotImplementedError

    def tool(self, name: str) -> Tool:
        """The tool a call names, as the policies read it."""
        raise NotImplementedError

    def tools_hint(self, names: Sequence[str]) -> str:
        """What to do when a policy names a tool the session lacks."""
        raise NotImplementedError

    # -- the guardrails' tools ------------------------------------------------------------------

    def _tools(self, names: Iterable[str], *, checked: bool) -> list[Tool]:
        wanted = list(names)
        if not checked:  # before the session names its tools, assume what policies name
            wanted += [t.name for t in self.agent.registry]
        return self.policy_tools(wanted)

    def _spec(self, names: Sequence[str], *, checked: bool) -> GuardrailSpec:
        """The agent's guardrails bound to the session's tools; a policy naming a tool the
        session lacks is a ConfigError when ``checked``."""
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
            raise ConfigError(f"{exc}. {self.tools_hint(names)}") from None

    def _shadow(self, names: Sequence[str], *, checked: bool) -> ShadowSpec | None:
        shadow = self.agent.shadow
        if shadow.empty:
            return None
        try:
            return shadow.bound_to(self._tools(names, checked=checked), check_names=checked)
        except ConfigError as exc:
            raise ConfigError(f"shadow: {exc}. {self.tools_hint(names)}") from None

    def bind_tools(self, names: Iterable[str]) -> None:
        """The host named the session's tools: bind the policies to them (their memories
        carry over); a policy naming a tool the session lacks is a ConfigError."""
        names = tuple(names)
        if self.tools == names:
            return
        self.state.guards.rebind(self._spec(names, checked=True), self._tools(names, checked=True))
        self.tools = names

    # -- the run's life ------------------------------------------------------------------------

    def ended(self) -> str | None:
        """Why the session records nothing more, once the run has ended; None while live."""
        if not self.run.done:
            return None
        return (
            f"run {self.run_id} has finished ({self.run.status}) and records nothing more; "
            f"{self.again}"
        )

    def begin(self, instructions: str = "", **recorded: object) -> bool:
        """The first sign of the session: the run starts (the workspace lock, the store's
        row, ``run_started``). True when this call started it; a RunError once it ended."""
        ended = self.ended()
        if ended is not None:
            raise RunError(ended)
        if self.started:
            return False
        self.started = True
        if instructions:
            self.run.instructions = instructions
        agent, state = self.agent, self.state
        self._workspace_lock = WorkspaceLock.acquire(
            state.workspace.root, LockOwner.this_process(self.run_id, agent.clock())
        )
        if self.tools is not None:
            recorded.setdefault("tools", list(self.tools))
        self._store = record_start(
            agent, state, self.run, model=self.model, harness=self.harness, **recorded
        )
        self.run.attach(self._watch())
        return True

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

        return loop.create_task(wait(), name=f"gr-{self.harness.name}-{self.run_id}")

    def finish(self, outcome: LoopOutcome) -> None:
        """End the run once: status, ``run_finished``, the store's rows, the lock."""
        if self.run.done or not self.started:
            return
        try:
            # a finished session's conversation is the host's to keep: nothing to release
            ending = SimpleNamespace(clock=self.agent.clock, release_after_s=None)
            runner.finish(ending, self.run, self.controls, self._store, outcome)
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
        """Why the session must end before its next model call: a person's stop, an end a
        guardrail decided, or a spent limit (gr's loop checks them between turns)."""
        controls = self.controls
        if controls.stop_reason is not None:
            self.end_with(LoopOutcome(controls.stop_status, controls.stop_reason))
        spent = self.state.usage().spent
        if spent is not None:
            self.end_with(LoopOutcome("budget_exhausted", spent.reason, limit=spent))
        return self.outcome

    @property
    def judged(self) -> bool:
        """A stop needs no judging: the run ended, or is ending (a limit, stuck, a person)."""
        return self.run.done or self.outcome is not None or bool(self.controls.stop_reason)

    # -- tool calls ----------------------------------------------------------------------------

    def after(self, call: GuardedCall, output: ToolOutput, *, ran: bool, duration_s: float) -> str:
        """The guarded step's aftermath of a call, as what the model reads beside its
        result: the feedback blocks, and a tier that fired (seed 004's, as a session meets
        them: a strategy check, a second one, or the end of the session, ``stuck``)."""
        if ran:
            self.step.ran(call, output)
        after = self.step.after(call, output, duration_s=duration_s)
        parts = [render_feedback(after.feedback)] if after.feedback else []
        if after.intervention is not None:
            order = session_intervention(after.intervention)
            if isinstance(order, LoopOutcome):
                self.end_with(order)
            else:
                self.step.told(order)
                parts.append(order)
        return "\n\n".join(parts)

    # -- model calls ---------------------------------------------------------------------------

    def model_call(
        self,
        usage: Usage,
        *,
        prompt_tokens: int,
        model: str,
        stop_reason: str,
        tool_calls: int,
        text: str,
        duration_s: float,
    ) -> ConfigError | None:
        """One model call the host made (its tokens already counted), priced and recorded.
        A capped session whose model has no price ends ``failed`` here: the ConfigError."""
        state = self.state
        refused: ConfigError | None = None
        try:
            cost = self.pricing.cost(model, usage)
        except ConfigError as exc:
            cost, refused = None, exc
        if cost is not None:
            state.cost_usd += cost
        state.record_model_call(  # the host assembles the request: gr sees no layers
            usage,
            context_tokens=prompt_tokens,
            stop_reason=stop_reason,
            tool_calls=tool_calls,
            text=text,
            duration_s=duration_s,
            model=model,
            cost_usd=cost,
        )
        if refused is not None:  # the cap cannot count this model: not one call more
            state.emit(ErrorEvent(source="budget", error_type="ConfigError", message=str(refused)))
            self.finish(LoopOutcome("failed", str(refused), refused))
        return refused
