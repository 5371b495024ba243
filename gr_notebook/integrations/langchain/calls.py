"""A LangChain tool call under the guardrails: what gr's tool step
(:mod:`gr_notebook.engine.tool_calls`) does at the same points, in the same order, recording
the same events.

Before the call: the policies (and the shadow's); a denial is the call's result, and the
tool never runs. After it: the policies' ``on_result`` for a call that succeeded, the
``tool_call`` event, the intervention engine and the feedback providers, whose blocks and
strategy checks go back inside the result. LangChain runs a turn's tool calls in parallel;
:class:`Sequencer` puts them through the guardrails in the order the model made them, as
gr's loop runs them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.events import (
    PromptInjectedEvent,
    ToolCallEvent,
)
from gr_notebook.guardrails.approval import denial_order
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guardrails.runtime import Denial
from gr_notebook.guidance import Directive
from gr_notebook.integrations.langchain.session import Session
from gr_notebook.integrations.session_interventions import as_recorded, session_intervention
from gr_notebook.tools.base import ToolOutput
from gr_notebook.workflow.prompts import directive, marker_of

__all__ = ["GRACE_S", "Sequencer", "ToolStep"]

GRACE_S = 1.0
"""How long a call waits for an earlier call of its turn that has not begun (a thread pool
that runs them out of order); one that is running is waited for to its end."""


class Sequencer:
    """The tool call ids of the latest model turn, in the model's order, and which of them
    have begun and ended."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._order: list[str] = []
        self._begun: set[str] = set()
        self._ended: set[str] = set()

    def turn(self, ids: Sequence[str]) -> None:
        with self._cond:
            self._order, self._begun, self._ended = list(ids), set(), set()

    def _waiting_on(self, call_id: str) -> tuple[bool, bool]:
        """(an earlier call has not ended, every such call has not even begun)."""
        if call_id not in self._order:
            return False, False
        earlier = [c for c in self._order[: self._order.index(call_id)] if c not in self._ended]
        return bool(earlier), all(c not in self._begun for c in earlier)

    def enter(self, call_id: str) -> None:
        started = time.monotonic()
        with self._cond:
            while True:
                waiting, none_begun = self._waiting_on(call_id)
                if not waiting or (none_begun and time.monotonic() - started > GRACE_S):
                    break
                self._cond.wait(0.05)
            self._begun.add(call_id)

    async def aenter(self, call_id: str) -> None:
        started = time.monotonic()
        while True:
            with self._cond:
                waiting, none_begun = self._waiting_on(call_id)
                if not waiting or (none_begun and time.monotonic() - started > GRACE_S):
                    self._begun.add(call_id)
                    return
            await asyncio.sleep(0.001)

    def leave(self, call_id: str) -> None:
        with self._cond:
            self._ended.add(call_id)
            self._cond.notify_all()


class ToolStep:
    """The guardrails around one session's tool calls."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def check(
        self, name: str, params: Mapping[str, Any], call_id: str
    ) -> tuple[ToolOutput | None, Denial | None]:
        """Before the call: a refusal to return instead of running it, or a policy's ask
        (the call waits for a person), or neither (it runs)."""
        session = self.session
        ended = session.ended() or _ending(session)
        if ended is not None:
            return ToolOutput(f"Not run: {ended}. End your turn now.", True), None
        state = session.state
        tool = session.tool(name)
        denial = state.guards.check(tool, params, turn=state.turn, tool_use_id=call_id)
        if state.shadow is not None:
            state.shadow.check(tool, params, turn=state.turn, tool_use_id=call_id)
        if denial is None:
            return None, None
        if denial.needs_approval:
            return None, denial
        text = denial.message()
        return ToolOutput(text, True, Directive(text, f"policy:{denial.policy}", "do_first")), None

    def not_approved(self, denial: Denial, text: str) -> ToolOutput:
        return ToolOutput(text, True, denial_order(text, denial.policy))

    def ran(self, name: str, params: Mapping[str, Any], output: ToolOutput) -> None:
        """A call that ran and succeeded: the policies remember it."""
        if output.is_error:
            return
        state, tool = self.session.state, self.session.tool(name)
        state.guards.after_success(tool, params, output, turn=state.turn)
        if state.shadow is not None:
            state.shadow.after_success(tool, params, output, turn=state.turn)

    def after(
        self,
        name: str,
        params: Mapping[str, Any],
        call_id: str,
        output: ToolOutput,
        started: float,
    ) -> str:
        """What follows every call, allowed or not, as in gr's tool step: the ``tool_call``
        event, the intervention engine, the feedback providers. Returns what the model is
        told beside the result (feedback blocks, a strategy check), or ""."""
        state = self.session.state
        state.emit(
            ToolCallEvent(
                tool=name,
                tool_use_id=call_id,
                input=dict(params),
                is_error=output.is_error,
                result=output.content,
                duration_s=time.perf_counter() - started,
                directive=None if output.directive is None else state.guidance(output.directive),
            )
        )
        check = None
        winding_down = self.session.view.wrap_up is not None
        if state.interventions is not None and not winding_down:
            check = state.interventions.observe(
                name, params, output.content, is_error=output.is_error
            )
            if check is not None:
                state.emit(as_recorded(check))
        blocks = state.guards.after_call(name, params, is_error=output.is_error, turn=state.turn)
        if state.shadow is not None:
            state.shadow.after_call(
                name,
                params,
                output.content,
                is_error=output.is_error,
                turn=state.turn,
                observe=not winding_down,
                recorded=as_recorded,
            )
        parts = [render_feedback(blocks)] if blocks else []
        if check is not None and check.fired:
            parts += self._intervene(check)
        return "\n\n".join(parts)

    def _intervene(self, check: InterventionCheck) -> list[str]:
        """Seed 004's tiers: a strategy check, a second one (gr would rewind its todo list),
        or the end of the session, ``stuck``."""
        order = session_intervention(check)
        if isinstance(order, LoopOutcome):
            self.session.end_with(order)
            return []
        inject(self.session, order)
        return [order]


def inject(session: Session, text: str | Directive) -> None:
    """An order sent beside a result or as a message, recorded as gr's loop records the
    prompts it injects."""
    state = session.state
    order = text if isinstance(text, Directive) else directive(text)
    state.emit(
        PromptInjectedEvent(
            text=order.text, marker=marker_of(order.text), directive=state.guidance(order)
        )
    )


def _ending(session: Session) -> str | None:
    """A person stopped the run: no more calls (a guardrail's end, as in gr's loop, comes
    at the end of the turn)."""
    reason = session.loop.stop_reason
    return None if reason is None else f"the run was stopped ({reason})"
