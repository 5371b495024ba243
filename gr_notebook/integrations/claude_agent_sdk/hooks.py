"""The hook callbacks: an agent's guardrails at the Claude Agent SDK's fixed points.

Seed 002's "Adapter Integration": policies run in ``PreToolUse`` (a denial is
``permissionDecision: "deny"`` with the policy's reason); policies' ``on_result``, the
intervention engine and the feedback providers run in ``PostToolUse`` (and
``PostToolUseFailure`` for a call that failed), whose ``additionalContext`` carries the
feedback blocks and the strategy checks; the completion checker judges the ``Stop`` hook,
where a refusal is ``decision: "block"`` with the checker's feedback. What Claude is told
names only what Claude has: the guardrails word their orders for the
:data:`~gr_notebook.harness.CLAUDE_AGENT_SDK` harness (no todo list, none of gr's workflow
tools), and gr's tool names become Claude's. Each callback does what
gr's tool step (:mod:`gr_notebook.engine.tool_calls`) does at the same point, in the same
order, with the same objects, and records the same events (a tier-2 intervention as the
second strategy check the session has, where gr's loop rewinds its todo list).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gr_notebook.engine.outcome import LoopOutcome, gave_up, turn_ended
from gr_notebook.errors import RunError
from gr_notebook.events import (
    ErrorEvent,
    PromptInjectedEvent,
    ToolCallEvent,
)
from gr_notebook.guardrails.approval import denial_order
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guardrails.runtime import Denial
from gr_notebook.guidance import Directive
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
from gr_notebook.integrations.session_interventions import as_recorded, session_intervention
from gr_notebook.tools.base import ToolOutput
from gr_notebook.workflow.prompts import directive, marker_of

__all__ = ["HookCallbacks"]

Reply = dict[str, Any]


class HookCallbacks:
    """The four callbacks of one session, over its :class:`Session`."""

    def __init__(self, session: Session, view: ClaudeView) -> None:
        self.session, self.view = session, view
        self.names = session.names
        self._calls: dict[str, tuple[Call, float, Mapping[str, Any]]] = {}
        """The calls allowed and not yet answered, by tool use id: the call, when it was
        allowed, and its input."""
        self._asks: dict[str, tuple[Denial, Call, float, ToolHookInput]] = {}
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
        state = session.state
        started = time.perf_counter()
        session.meet_tool(read.name)
        call = self.names.call(read.name, read.tool_input)
        if read.problems:  # no policy can judge what it cannot read: denied, and recorded
            text = prompts.unreadable_call(read.problems)
            self._unreadable("PreToolUse", read, "the call was denied")
            return self._deny(call, read, ToolOutput(text, True), started)
        self.view.call = call
        try:
            denial = state.guards.check(
                call.tool, call.params, turn=state.turn, tool_use_id=read.tool_use_id
            )
            if state.shadow is not None:
                state.shadow.check(
                    call.tool, call.params, turn=state.turn, tool_use_id=read.tool_use_id
                )
        finally:
            self.view.call = None
        if denial is None:
            self._calls[read.tool_use_id] = (call, started, read.tool_input)
            return {}
        if denial.needs_approval:  # the SDK's own ask: its can_use_tool hears the reason
            self._asks[read.tool_use_id] = (denial, call, started, read)
            reason = self.names.in_claude_terms(denial.reason, call)
            return {"hookSpecificOutput": {**_denial(reason), "permissionDecision": "ask"}}
        text = self.names.in_claude_terms(denial.message(), call)
        order = Directive(text, f"policy:{denial.policy}", "do_first")
        return self._deny(call, read, ToolOutput(text, True, order), started)

    def held(self, tool_use_id: str | None, tool_name: str) -> tuple[Denial, Call] | None:
        """The ask of the call ``can_use_tool`` is asked about, if a policy made one; a
        context without the tool use id takes the oldest ask of that tool."""
        key = tool_use_id if tool_use_id in self._asks else None
        if key is None:
            key = next((k for k, v in self._asks.items() if v[1].sdk_name == tool_name), None)
        if key is None:
            return None
        denial, call, _, _ = self._asks[key]
        return denial, call

    async def approve(
        self, tool_use_id: str | None, tool_name: str, tool_input: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any] | None, str | None]:
        """Ask the run's approvals about a held call: the input it runs with (None: as
        given), or the text Claude reads when it is denied (recorded as a denied call)."""
        key = tool_use_id if tool_use_id in self._asks else None
        if key is None:
            key = next(k for k, v in self._asks.items() if v[1].sdk_name == tool_name)
        denial, call, started, read = self._asks.pop(key)
        state = self.session.state
        resolution = await state.approvals.decide(
            denial,
            call.sdk_name,
            tool_input,
            tool_use_id=read.tool_use_id,
            check=lambda edited: None,  # the CLI checks the tool's own schema
        )
        if resolution.message is not None:
            text = self.names.in_claude_terms(resolution.message, call)
            output = ToolOutput(text, True, denial_order(text, denial.policy))
            self._after(call, read, None, output, started)
            return None, text
        if resolution.edited:
            edited = self.names.call(call.sdk_name, resolution.input)
            read = replace(read, tool_input=resolution.input)
            self._calls[read.tool_use_id] = (edited, started, resolution.input)
            return resolution.input, None
        self._calls[read.tool_use_id] = (call, started, read.tool_input)
        return None, None

    def _deny(self, call: Call, read: ToolHookInput, output: ToolOutput, started: float) -> Reply:
        """A refused call, recorded as gr's tool step records one (``PostToolUse`` does not
        fire for it): the reason, and the feedback it triggers beside it."""
        extra = self._after(call, read, None, output, started)
        reply = _denial(output.content)
        if extra:
            reply["additionalContext"] = extra
        return {"hookSpecificOutput": reply, **self._halt()}

    # -- PostToolUse / PostToolUseFailure: on_result, interventions, feedback ------------------

    async def post_tool_use(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Reply:
        refused = self._begin(hook_input)
        if refused is not None:
            return refused
        read, call, started = self._call_of(hook_input, tool_use_id, "PostToolUse")
        fields = fields_of(hook_input)
        output = ToolOutput(_text_of(fields.get("tool_response")))
        state = self.session.state
        state.guards.after_success(call.tool, call.params, output, turn=state.turn)
        if state.shadow is not None:
            state.shadow.after_success(call.tool, call.params, output, turn=state.turn)
        extra = self._after(call, read, fields.get("duration_ms"), output, started)
        return self._reply("PostToolUse", extra)

    async def post_tool_use_failure(
        self, hook_input: Any, tool_use_id: str | None, context: Any
    ) -> Reply:
        refused = self._begin(hook_input)
        if refused is not None:
            return refused
        read, call, started = self._call_of(hook_input, tool_use_id, "PostToolUseFailure")
        fields = fields_of(hook_input)
        output = ToolOutput(str(fields.get("error") or "the tool failed"), True)
        extra = self._after(call, read, fields.get("duration_ms"), output, started)
        return self._reply("PostToolUseFailure", extra)

    def _call_of(
        self, hook_input: Any, tool_use_id: str | None, hook: str
    ) -> tuple[ToolHookInput, Call, float]:
        """The call as its ``PreToolUse`` saw it (by its tool use id), else as this input
        names it; an input that could not be read is recorded as an error event, and the
        call as well as it can be."""
        read = read_tool_hook(hook_input, tool_use_id)
        known = self._calls.pop(read.tool_use_id, None) if read.tool_use_id else None
        if known is None:
            call, started = self.names.call(read.name, read.tool_input), time.perf_counter()
        else:
            call, started, tool_input = known
            read = replace(read, tool_input=tool_input)
        if read.problems:
            self._unreadable(hook, read, f"the call was recorded as {call.sdk_name}")
        return read, call, started

    def _after(
        self,
        call: Call,
        read: ToolHookInput,
        duration_ms: Any,
        output: ToolOutput,
        started: float,
    ) -> str:
        """What follows every call, allowed or not, as in gr's tool step: the ``tool_call``
        event, the intervention engine, the feedback providers. Returns what Claude is told
        beside the result."""
        state = self.session.state
        state.emit(
            ToolCallEvent(
                tool=call.sdk_name,
                tool_use_id=read.tool_use_id,
                input=dict(read.tool_input),
                is_error=output.is_error,
                result=output.content,
                duration_s=_seconds(duration_ms, started),
                directive=None if output.directive is None else state.guidance(output.directive),
            )
        )
        check = None
        if state.interventions is not None:
            check = state.interventions.observe(
                call.tool.name, call.params, output.content, is_error=output.is_error
            )
            if check is not None:
                state.emit(as_recorded(check))
        self.view.call = call
        try:
            blocks = state.guards.after_call(
                call.tool.name, call.params, is_error=output.is_error, turn=state.turn
            )
            if state.shadow is not None:
                state.shadow.after_call(
                    call.tool.name,
                    call.params,
                    output.content,
                    is_error=output.is_error,
                    turn=state.turn,
                    recorded=as_recorded,
                )
        finally:
            self.view.call = None
        parts = [self.names.in_claude_terms(render_feedback(blocks))] if blocks else []
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
        self._inject(order)
        return [order]

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
        if session.run.done or session.outcome is not None or session.loop.stop_reason:
            return {}  # ended already (a limit, stuck, a person): nothing to judge
        state = session.state
        guards = state.guards
        verdict = guards.judge_stop("end_turn", final)
        if state.shadow is not None:
            state.shadow.judge_stop("end_turn", final)
        if not verdict.allowed:
            if verdict.give_up:
                session.end_with(gave_up(state, verdict))
                return {}
            text = self.names.in_claude_terms(guards.refusal(verdict))
            self._inject(text)
            return {"decision": "block", "reason": text}
        # Claude has no job_complete: the agent's checker finds the job done, else it ended
        session.end_with(turn_ended(state, verdict, final))
        return {}

    # -- shared ---------------------------------------------------------------------------------

    def _begin(self, hook_input: Any) -> Reply | None:
        """Start the run at its first hook; a session these hooks do not record, or any hook
        once the run has ended, is stopped with the reason (an exception here would reach
        Claude as the CLI's stack trace)."""
        try:
            self.session.begin(session_of(hook_input))
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

    def _inject(self, text: str) -> None:
        """An order sent beside a result or as a stop's refusal, recorded as gr's loop
        records the prompts it injects."""
        state = self.session.state
        order = directive(text)
        state.emit(
            PromptInjectedEvent(text=text, marker=marker_of(text), directive=state.guidance(order))
        )

    def _reply(self, event: str, extra: str) -> Reply:
        reply: Reply = self._halt()
        if extra:
            reply["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": extra}
        return reply

    def _halt(self) -> Reply:
        """Stop the session after this call when the run is over: a spent limit (gr's loop
        checks between turns, before the next model call), stuck, or a person's stop."""
        session = self.session
        spent = session.state.usage().spent
        if spent is not None:
            session.end_with(LoopOutcome("budget_exhausted", spent.reason, limit=spent))
        stopping = self._stopping()
        if stopping is not None:
            return stopping
        if session.outcome is not None and session.outcome.status not in ("completed", "ended"):
            return {"continue_": False, "stopReason": session.outcome.reason or ""}
        return {}

    def _stopping(self) -> Reply | None:
        """A person stopped the run (``run.cancel()``): the session stops at this hook."""
        loop = self.session.loop
        reason = loop.stop_reason
        if reason is None:
            return None
        self.session.end_with(LoopOutcome(loop.stop_status, reason))
        return {"continue_": False, "stopReason": reason}


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
