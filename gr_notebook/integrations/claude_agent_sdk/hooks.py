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
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gr_notebook.engine.outcome import LoopOutcome, gave_up, turn_ended
from gr_notebook.errors import RunError
from gr_notebook.events import (
    InterventionEvent,
    InterventionSkippedEvent,
    PromptInjectedEvent,
    ToolCallEvent,
)
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guidance import Directive
from gr_notebook.integrations.claude_agent_sdk import prompts
from gr_notebook.integrations.claude_agent_sdk.session import Session
from gr_notebook.integrations.claude_agent_sdk.tools import Call
from gr_notebook.integrations.claude_agent_sdk.view import ClaudeView
from gr_notebook.tools.base import ToolOutput
from gr_notebook.workflow.prompts import directive, marker_of

__all__ = ["HookCallbacks"]

Reply = dict[str, Any]


class HookCallbacks:
    """The four callbacks of one session, over its :class:`Session`."""

    def __init__(self, session: Session, view: ClaudeView) -> None:
        self.session, self.view = session, view
        self.names = session.names
        self._calls: dict[str, tuple[Call, float]] = {}

    # -- PreToolUse: the policies ---------------------------------------------------------------

    async def pre_tool_use(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> Reply:
        session = self.session
        foreign = self._begin(hook_input)
        if foreign is not None:
            return {**foreign, "hookSpecificOutput": _denial(f"Not run: {foreign['stopReason']}")}
        if "agent_id" not in hook_input:  # a subagent's model calls are not on the stream
            await session.catch_up(call=tool_use_id)
        stopping = self._stopping()
        if stopping is not None:  # "continue": false alone would still run this call
            reason = f"Not run: the run was stopped ({stopping['stopReason']})."
            return {**stopping, "hookSpecificOutput": _denial(reason)}
        state = session.state
        started = time.perf_counter()
        call = self.names.call(str(hook_input["tool_name"]), hook_input.get("tool_input") or {})
        self.view.call = call
        try:
            denial = state.guards.check(call.tool, call.params, turn=state.turn)
        finally:
            self.view.call = None
        key = tool_use_id or str(hook_input.get("tool_use_id", ""))
        if denial is None:
            self._calls[key] = (call, started)
            return {}
        text = self.names.in_claude_terms(denial.message(), call)
        order = Directive(text, f"policy:{denial.policy}", "do_first")
        extra = self._after(call, hook_input, key, ToolOutput(text, True, order), started)
        output = _denial(text)
        if extra:
            output["additionalContext"] = extra
        return {"hookSpecificOutput": output, **self._halt()}

    # -- PostToolUse / PostToolUseFailure: on_result, interventions, feedback ------------------

    async def post_tool_use(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> Reply:
        foreign = self._begin(hook_input)
        if foreign is not None:
            return foreign
        call, started, key = self._call_of(hook_input, tool_use_id)
        output = ToolOutput(_text_of(hook_input.get("tool_response")))
        state = self.session.state
        state.guards.after_success(call.tool, call.params, output, turn=state.turn)
        extra = self._after(call, hook_input, key, output, started)
        return self._reply("PostToolUse", extra)

    async def post_tool_use_failure(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> Reply:
        foreign = self._begin(hook_input)
        if foreign is not None:
            return foreign
        call, started, key = self._call_of(hook_input, tool_use_id)
        output = ToolOutput(str(hook_input.get("error", "the tool failed")), True)
        extra = self._after(call, hook_input, key, output, started)
        return self._reply("PostToolUseFailure", extra)

    def _call_of(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None
    ) -> tuple[Call, float, str]:
        key = tool_use_id or str(hook_input.get("tool_use_id", ""))
        known = self._calls.pop(key, None)
        if known is not None:
            return (*known, key)
        call = self.names.call(str(hook_input["tool_name"]), hook_input.get("tool_input") or {})
        return call, time.perf_counter(), key

    def _after(
        self,
        call: Call,
        hook_input: Mapping[str, Any],
        tool_use_id: str,
        output: ToolOutput,
        started: float,
    ) -> str:
        """What follows every call, allowed or not, as in gr's tool step: the ``tool_call``
        event, the intervention engine, the feedback providers. Returns what Claude is told
        beside the result."""
        state = self.session.state
        duration = hook_input.get("duration_ms")
        state.emit(
            ToolCallEvent(
                tool=call.sdk_name,
                tool_use_id=tool_use_id,
                input=dict(hook_input.get("tool_input") or {}),
                is_error=output.is_error,
                result=output.content,
                duration_s=duration / 1000
                if isinstance(duration, int | float)
                else time.perf_counter() - started,
                directive=None if output.directive is None else state.guidance(output.directive),
            )
        )
        check = None
        if state.interventions is not None:
            check = state.interventions.observe(
                call.tool.name, call.params, output.content, is_error=output.is_error
            )
            if check is not None:
                state.emit(_as_recorded(check))
        self.view.call = call
        try:
            blocks = state.guards.after_call(
                call.tool.name, call.params, is_error=output.is_error, turn=state.turn
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
        steps = check.steps_since_progress
        if check.action == "replan":
            text = prompts.strategy_check(steps, check.stuck_counter)
        elif check.action == "rewind":
            text = prompts.second_strategy_check(steps, check.recent_tools)
        else:
            self.session.end_with(LoopOutcome("stuck", prompts.stuck_reason(steps, check.step)))
            return []
        self._inject(text)
        return [text]

    # -- Stop: the completion checker ----------------------------------------------------------

    async def stop(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> Reply:
        session = self.session
        foreign = self._begin(hook_input)
        if foreign is not None:
            return foreign
        final = str(hook_input.get("last_assistant_message") or "")
        await session.catch_up(reply=final)  # the turn of the reply that stops
        if session.outcome is not None or session.loop.stop_reason:
            return {}  # ended already (a limit, stuck, a person): nothing to judge
        state = session.state
        guards = state.guards
        verdict = guards.judge_stop("end_turn", final)
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

    def _begin(self, hook_input: Mapping[str, Any]) -> Reply | None:
        """Start the run at its first hook; a session these hooks do not record is stopped
        with the reason (an exception here would reach Claude as the CLI's stack trace)."""
        try:
            self.session.begin(hook_input.get("session_id"))
        except RunError as exc:
            return {"continue_": False, "stopReason": str(exc)}
        return None

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


#: A tier the session meets otherwise than gr's loop, recorded as what the session did: gr's
#: loop rewinds its todo list at tier 2, a session (no todo list) has a second strategy check.
SESSION_ACTIONS = {"rewind": "second_strategy_check"}


def _as_recorded(check: InterventionCheck) -> InterventionEvent | InterventionSkippedEvent:
    event = check.event()
    action = SESSION_ACTIONS.get(event.action or "")
    return event if action is None else replace(event, action=action)


def _denial(reason: str) -> dict[str, Any]:
    return {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }


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
