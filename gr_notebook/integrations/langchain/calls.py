"""A LangChain tool call under the guardrails: what gr's tool step
(:mod:`gr_notebook.engine.tool_calls`) does at the same points, in the same order, recording
the same events.

The guarded step (:mod:`gr_notebook.engine.guarded_step`) decides; this module translates:
a denial is the call's result and the tool never runs, feedback blocks and strategy checks
go back inside the result, and a tier-3 intervention ends the session. LangChain runs a
turn's tool calls in parallel; :class:`Sequencer` puts them through the guardrails in the
order the model made them, as gr's loop runs them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from gr_notebook.engine.guarded_step import Allowed, GuardedCall, Held, Refused, SchemaCheck
from gr_notebook.integrations.langchain.session import Session
from gr_notebook.tools.base import ToolOutput
from gr_notebook.tools.schema import validate

__all__ = ["GRACE_S", "Sequencer", "ToolStep", "schema_of"]

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
    """LangChain's translation of the guarded step (:mod:`gr_notebook.engine.guarded_step`):
    a call under LangChain's name and arguments, and a session that has ended."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def call(self, name: str, params: Mapping[str, Any], call_id: str) -> GuardedCall:
        return GuardedCall(self.session.tool(name), params, call_id)

    def check(self, call: GuardedCall) -> Allowed | Refused | Held:
        """Before the call: the step's verdict, or a refusal once the session is over."""
        session = self.session
        ended = session.ended() or _ending(session)
        if ended is not None:
            return Refused(ToolOutput(f"Not run: {ended}. End your turn now.", True))
        return session.step.check(call)

    def intent(self, allowed: Allowed) -> str:
        """Right before the tool runs: its intent record (the guarded step's); the key."""
        return self.session.step.intent(
            allowed.call, approved=allowed.approved, edited=allowed.edited
        )

    def after(self, call: GuardedCall, output: ToolOutput, *, ran: bool, started: float) -> str:
        """What follows every call, allowed or not, and what the model reads beside the
        result (feedback blocks, a strategy check), or ""."""
        return self.session.after(call, output, ran=ran, duration_s=time.perf_counter() - started)


def schema_of(tool: BaseTool | None) -> SchemaCheck | None:
    """The LangChain tool's own argument schema, as the check an edited input must pass;
    None when the tool is not known."""
    if tool is None:
        return None
    schema: Any = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        schema = schema.model_json_schema()
    if not isinstance(schema, Mapping):
        return None

    def check(params: Mapping[str, Any]) -> str | None:
        problems = validate(schema, params)
        return f"Invalid arguments for {tool.name}: {'; '.join(problems)}." if problems else None

    return check


def _ending(session: Session) -> str | None:
    """A person stopped the run: no more calls (a guardrail's end, as in gr's loop, comes
    at the end of the turn)."""
    reason = session.controls.stop_reason
    return None if reason is None else f"the run was stopped ({reason})"
