"""The hook callbacks: an agent's guardrails at the Claude Agent SDK's fixed points.

Seed 002's "Adapter Integration", as the Claude Agent SDK's translation of the guarded step
(:mod:`gr_notebook.engine.guarded_step`): its check runs in ``PreToolUse`` (a denial is
``permissionDecision: "deny"`` with the policy's reason, an ask is the SDK's own ``ask``,
which ``can_use_tool`` answers); what follows a call runs in ``PostToolUse`` (and
``PostToolUseFailure`` for a call that failed), whose ``additionalContext`` carries the
feedback blocks, the strategy checks and the wrap-up order; the completion checker judges the
``Stop`` hook, where a refusal is ``decision: "block"`` with the checker's feedback. What
Claude is told names only what Claude has: the guardrails word their orders for the
:data:`~gr_notebook.harness.CLAUDE_AGENT_SDK` harness (no todo list, none of gr's workflow
tools), and gr's tool names become Claude's. The events are the step's, as on gr's loop (a
tier-2 intervention as the second strategy check the session has, where gr's loop rewinds
its todo list).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from gr_notebook.engine.guarded_step import Allowed, GuardedCall, Held, Refused
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.errors import RunError
from gr_notebook.events import ErrorEvent
from gr_notebook.integrations.claude_agent_sdk import prompts
from gr_notebook.integrations.claude_agent_sdk.hook_input import (
    ToolHookInput,
    fields_of,
    json_kind,
    read_tool_hook,
    session_of,
)
from gr_notebook.integrations.claude_agent_sdk.session import Session
from gr_notebook.integrations.claude_agent_sdk.tools import Call
from gr_notebook.integrations.claude_agent_sdk.view import ClaudeView
from gr_notebook.tools.base import ToolOutput

__all__ = ["HookCallbacks"]

Reply = dict[str, Any]


class HookCallbacks:
    """The four callbacks of one session, over its :class:`Session`."""

    def __init__(self, session: Session, view: ClaudeView) -> None:
        self.session, self.view = session, view
        self.names = session.names
        self.step = session.step
        self._calls: dict[str, tuple[Call, GuardedCall, float]] = {}
        """The calls allowed and not yet answered, by tool use id: the call in Claude's and
        in the guardrails' terms (the input that runs), and when it was allowed."""
        self._asks: dict[str, tuple[Call, Held, float]] = {}
        """The calls a policy asked a person about, until ``can_use_tool`` answers them."""

    # -- PreToolUse: the policies ---------------------------------------------------------------

    async def pre_tool_use(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Reply:
        session = self.session
        refused = self._begin(hook_input)
        if refused is not None:
            return {**refused, "hookSpecificOutput": _denial(self._not_run(hook_input, refused))}
        read = read_tool_hook(hook_input, tool_use_id)
        subagent = "agent_id" in fields_of(hook_input)  # its model calls are not on the stream
        if not subagent:
            await session.catch_up(call=read.tool_use_id or None)
        ended = session.ended()
        if ended is not None:  # it ended while the hook waited: nothing lands after the end
            reply = _denial(self._ended_text())
            return {"continue_": False, "stopReason": ended, "hookSpecificOutput": reply}
        stopping = self._stopping()
        if stopping is not None:  # "continue": false alone would still run this call
            reason = f"Not run: the run was stopped ({stopping['stopReason']})."
            return {**stopping, "hookSpecificOutput": _denial(reason)}
        started = time.perf_counter()
        session.meet_tool(read.name)
        call = self.names.call(read.name, read.tool_input)
        guarded = _guarded(call, read.tool_use_id, read.tool_input)
        if read.problems:  # no policy can judge what it cannot read: denied, and recorded
            text = prompts.unreadable_call(read.problems)
            self._unreadable("PreToolUse", read, "the call was denied")
            return self._deny(call, guarded, ToolOutput(text, True), started)
        with self._judging(call):
            verdict = self.step.check(guarded)
        if isinstance(verdict, Allowed):
            self._calls[read.tool_use_id] = (call, guarded, started)
            with self._judging(call):
                self.step.intent(guarded)
            return {}
        if isinstance(verdict, Held):  # the SDK's own ask: its can_use_tool hears the reason
            self._asks[read.tool_use_id] = (call, verdict, started)
            reason = self.names.in_claude_terms(verdict.ask.reason, call)
            return {"hookSpecificOutput": {**_denial(reason), "permissionDecision": "ask"}}
        return self._deny(call, guarded, self._in_claude_terms(verdict.output, call), started)

    def held(self, tool_use_id: str | None, tool_name: str) -> Held | None:
        """The ask of the call ``can_use_tool`` is asked about, if a policy made one; a
        context without the tool use id takes the oldest ask of that tool."""
        key = self._ask_of(tool_use_id, tool_name)
        return None if key is None else self._asks[key][1]

    def _ask_of(self, tool_use_id: str | None, tool_name: str) -> str | None:
        if tool_use_id in self._asks:
            return tool_use_id
        return next((k for k, v in self._asks.items() if v[0].sdk_name == tool_name), None)

    async def approve(
        self, tool_use_id: str | None, tool_name: str, tool_input: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any] | None, str | None]:
        """Ask the run's approvals about a held call: the input it runs with (None: as
        given), or the text Claude reads when it is denied (recorded as a denied call)."""
        key = self._ask_of(tool_use_id, tool_name)
        assert key is not None
        call, held, started = self._asks.pop(key)
        held = Held(replace(held.call, shown=tool_input), held.ask)

        def reread(edited: Mapping[str, Any]) -> GuardedCall:
            return _guarded(self.names.call(call.sdk_name, edited), held.call.tool_use_id, edited)

        with self._judging(call):  # the CLI checks the tool's own schema
            verdict = await self.step.resolve(held, reread=reread)
        if isinstance(verdict, Refused):
            output = self._in_claude_terms(verdict.output, call)
            self._after(call, held.call, output, started, ran=False)
            return None, output.content
        self._calls[held.call.tool_use_id] = (call, verdict.call, started)
        with self._judging(call):
            self.step.intent(verdict.call, approved=verdict.approved, edited=verdict.edited)
        return (verdict.call.host_input if verdict.edited else None), None

    def _deny(self, call: Call, guarded: GuardedCall, output: ToolOutput, started: float) -> Reply:
        """A refused call, recorded as gr's tool step records one (``PostToolUse`` does not
        fire for it): the reason, and the feedback it triggers beside it."""
        extra = self._after(call, guarded, output, started, ran=False)
        reply = _denial(output.content)
        if extra:
            reply["additionalContext"] = extra
        return {"hookSpecificOutput": reply, **self._halt()}

    # -- PostToolUse / PostToolUseFailure: on_result, interventions, feedback ------------------

    async def post_tool_use(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Reply:
        refused = self._begin(hook_input)
        if refused is not None:
            return refused
        call, guarded, started = self._call_of(hook_input, tool_use_id, "PostToolUse")
        fields = fields_of(hook_input)
        output = ToolOutput(_text_of(fields.get("tool_response")))
        extra = self._after(call, guarded, output, started, ran=True, ms=fields.get("duration_ms"))
        return self._reply("PostToolUse", extra)

    async def post_tool_use_failure(
        self, hook_input: Any, tool_use_id: str | None, context: Any
    ) -> Reply:
        refused = self._begin(hook_input)
        if refused is not None:
            return refused
        call, guarded, started = self._call_of(hook_input, tool_use_id, "PostToolUseFailure")
        fields = fields_of(hook_input)
        output = ToolOutput(str(fields.get("error") or "the tool failed"), True)
        extra = self._after(call, guarded, output, started, ran=True, ms=fields.get("duration_ms"))
        return self._reply("PostToolUseFailure", extra)

    def _call_of(
        self, hook_input: Any, tool_use_id: str | None, hook: str
    ) -> tuple[Call, GuardedCall, float]:
        """The call as its ``PreToolUse`` saw it (by its tool use id), else as this input
        names it; an input that could not be read is recorded as an error event, and the
        call as well as it can be."""
        read = read_tool_hook(hook_input, tool_use_id)
        known = self._calls.pop(read.tool_use_id, None) if read.tool_use_id else None
        if known is None:
            call = self.names.call(read.name, read.tool_input)
            known = (call, _guarded(call, read.tool_use_id, read.tool_input), time.perf_counter())
        if read.problems:
            self._unreadable(hook, read, f"the call was recorded as {known[0].sdk_name}")
        return known

    def _after(
        self,
        call: Call,
        guarded: GuardedCall,
        output: ToolOutput,
        started: float,
        *,
        ran: bool,
        ms: Any = None,
    ) -> str:
        """What follows every call, allowed or not: the guarded step's, then what Claude is
        told beside the result (feedback, a strategy check, the wrap-up order)."""
        with self._judging(call):
            told = self.session.after(guarded, output, ran=ran, duration_s=_seconds(ms, started))
        parts = [self.names.in_claude_terms(told), self.step.wrap_up() or ""]
        return "\n\n".join(p for p in parts if p)

    # -- Stop: the completion checker ----------------------------------------------------------

    async def stop(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Reply:
        session = self.session
        refused = self._begin(hook_input)
        if refused is not None:
            return refused
        if not isinstance(hook_input, Mapping):
            self._error(
                f"the Stop hook's input could not be read: it is {json_kind(hook_input)}, not "
                "an object of named fields; the stop was judged without the final reply"
            )
        final = fields_of(hook_input).get("last_assistant_message")
        final = final if isinstance(final, str) else ""
        await session.catch_up(reply=final)  # the turn of the reply that stops
        if session.judged:
            return {}  # ended already (a limit, stuck, a person): nothing to judge
        # Claude has no job_complete: the agent's checker finds the job done, else it ended
        judged = self.step.judge_end(final)
        if isinstance(judged, LoopOutcome):
            session.end_with(judged)
            return {}
        text = self.names.in_claude_terms(judged)
        self.step.told(text)
        return {"decision": "block", "reason": text}

    @contextmanager
    def _judging(self, call: Call) -> Iterator[None]:
        """What the guardrails record meanwhile is put in Claude's terms (see ClaudeView)."""
        self.view.call = call
        try:
            yield
        finally:
            self.view.call = None

    def _in_claude_terms(self, output: ToolOutput, call: Call) -> ToolOutput:
        text = self.names.in_claude_terms(output.content, call)
        order = output.directive
        return replace(output, content=text, directive=order and replace(order, text=text))

    # -- shared ---------------------------------------------------------------------------------

    def _begin(self, hook_input: Any) -> Reply | None:
        """Start the run at its first hook; a session these hooks do not record, or any hook
        once the run has ended, is stopped with the reason (an exception here would reach
        Claude as the CLI's stack trace)."""
        try:
            self.session.join(session_of(hook_input))
        except RunError as exc:
            return {"continue_": False, "stopReason": str(exc)}
        return None

    def _not_run(self, hook_input: Any, refused: Reply) -> str:
        """What Claude is told of a call the bridge refuses before any policy sees it."""
        session = self.session
        if session.run.done and not session.is_foreign(session_of(hook_input)):
            return self._ended_text()
        return f"Not run: {refused['stopReason']}"

    def _ended_text(self) -> str:
        run = self.session.run
        return prompts.run_ended(run.run_id, run.status)

    def _unreadable(self, hook: str, read: ToolHookInput, then: str) -> None:
        self._error(
            f"the {hook} hook's input could not be read: {'; '.join(read.problems)}; {then}",
            tool=read.tool_name,
        )

    def _error(self, message: str, *, tool: str | None = None) -> None:
        """Malformed hook input, recorded instead of raised (the CLI would block the call or
        go on, and the run would record nothing)."""
        self.session.state.emit(ErrorEvent(source="hook", tool=tool, message=message))

    def _reply(self, event: str, extra: str) -> Reply:
        reply: Reply = self._halt()
        if extra:
            reply["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": extra}
        return reply

    def _halt(self) -> Reply:
        """Stop the session after this call when the run is over: a spent limit (gr's loop
        checks between turns, before the next model call), stuck, or a person's stop."""
        outcome = self.session.pending_end()
        if outcome is not None and outcome.status not in ("completed", "ended"):
            return {"continue_": False, "stopReason": outcome.reason or ""}
        return {}

    def _stopping(self) -> Reply | None:
        """A person stopped the run (``run.cancel()``): the session stops at this hook."""
        controls = self.session.controls
        reason = controls.stop_reason
        if reason is None:
            return None
        self.session.end_with(LoopOutcome(controls.stop_status, reason))
        return {"continue_": False, "stopReason": reason}


def _guarded(call: Call, tool_use_id: str, tool_input: Mapping[str, Any]) -> GuardedCall:
    """A call as the guarded step judges it: gr's names for the policies, Claude's for the
    record and a person."""
    return GuardedCall(call.tool, call.params, tool_use_id, name=call.sdk_name, shown=tool_input)


def _denial(reason: str) -> dict[str, Any]:
    return {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }


def _seconds(duration_ms: Any, started: float) -> float:
    """The call's duration: the CLI's, when it gave a plausible one, else as measured."""
    if (
        isinstance(duration_ms, int | float)
        and not isinstance(duration_ms, bool)
        and math.isfinite(duration_ms)
        and duration_ms >= 0
    ):
        return duration_ms / 1000
    return time.perf_counter() - started


def _text_of(response: Any) -> str:
    """A tool's result as text: what a command printed, what a read returned, or the
    structured response as JSON."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping):
        if isinstance(response.get("stdout"), str):
            return "\n".join(s for s in (response["stdout"], response.get("stderr")) if s)
        file = response.get("file")
        if isinstance(file, Mapping) and isinstance(file.get("content"), str):
            return str(file["content"])
        if isinstance(response.get("content"), str):
            return str(response["content"])
    return json.dumps(response, default=str)
