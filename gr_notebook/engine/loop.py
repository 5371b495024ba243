"""The one orchestrator: assemble → budget check → model → tool calls → effects → transitions.

The loop takes the agent's definition (:class:`~gr_notebook.engine.definition.AgentDefinition`)
and the run's state (:class:`~gr_notebook.engine.state.RunState`) and keeps nothing else but
the controls a person uses (stop, pause). Each turn: between turns, stops, limits, rewinds
and seed 000's progress check; then the request is assembled and, when the model can count its
input tokens, checked against what the token budget has left, and under a cost limit what it
could cost at most against what that limit has left, so a request over either is never
sent; the model is called; the tool calls run as their own step
(:mod:`gr_notebook.engine.tool_calls`), which returns the turn's effects, and the loop acts
on those (end the job, intervene, prune, compact, inject the workflow's prompts). It knows
no tool by name.

Nothing a model or a tool does can crash the run: unknown tools, bad arguments and tool
exceptions become ``is_error`` results, and a failing model ends the run as ``failed`` with
the reason recorded and the workspace left as it was. A spent limit ends it as
``budget_exhausted`` with the limit as a value (:class:`~gr_notebook.limits.SpentLimit`).
Which status a stop gives is :mod:`gr_notebook.engine.outcome`'s rule.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from gr_notebook.engine.context import build_recap
from gr_notebook.engine.controls import Controls
from gr_notebook.engine.definition import AgentDefinition
from gr_notebook.engine.guarded_step import GuardedStep
from gr_notebook.engine.outcome import LoopOutcome, gave_up, settle
from gr_notebook.engine.side_effects import CallRecord, CutTurn
from gr_notebook.engine.state import RunState
from gr_notebook.engine.tool_calls import TurnEffects, call_tools
from gr_notebook.errors import ConfigError, ModelError, RequestOverBudget
from gr_notebook.eventdata import clip
from gr_notebook.events import (
    CompactionEvent,
    ConversationPrunedEvent,
    ErrorEvent,
    ProgressCheckEvent,
    RequestOverBudgetEvent,
    RunPausedEvent,
    RunUnpausedEvent,
    thinking_event,
)
from gr_notebook.guardrails.completion import STOP_BY_TOOL
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guidance import Directive
from gr_notebook.history.checkpoint_store import json_bytes
from gr_notebook.limits import SpentLimit
from gr_notebook.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from gr_notebook.models.base import ModelRequest, ModelResponse, TokenCounter
from gr_notebook.models.call_context import calling
from gr_notebook.models.pricing import price_of_model
from gr_notebook.tools.base import Tool
from gr_notebook.tools.effects import PruneConversation
from gr_notebook.tools.nesting import cut_deep_inputs
from gr_notebook.workflow.prompts import (
    cut_off_tool_use,
    directive,
    strategy_check_prompt,
    stuck_rewind_issue,
    todo_layer_directive,
)
from gr_notebook.workflow.stuck import SameStateDetector, StuckDetector
from gr_notebook.workflow.summary import workspace_state

__all__ = ["Loop", "SameStateDetector", "StuckDetector"]


class TurnCheckpoint(Protocol):
    """What the loop calls at each turn boundary: a run's checkpoint
    (:class:`~gr_notebook.engine.checkpoint.Checkpointer`)."""

    def __call__(self) -> None: ...

    def after_pause(self) -> None:
        """A person may have changed the workspace while the run was paused."""


class Loop(Controls):
    def __init__(
        self,
        definition: AgentDefinition,
        state: RunState,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> None:
        super().__init__(state)
        self.step = GuardedStep(state)
        """What happens around a stop and an order, as on every host."""
        self.definition = definition
        self.checkpoint = checkpoint
        """Called at each turn boundary, before anything else: a run's checkpoint."""
        self.model = definition.model
        self.registry = definition.registry
        self._counter = self.model if isinstance(self.model, TokenCounter) else None
        self._price = definition.price or price_of_model(self.model)
        self._previous: Usage | None = None
        """The latest call's usage: what the next request may read from the cache."""
        self._most_output = 0
        """The most output tokens a call of this run wrote."""

    def _wrap_up_when_limits_run_low(self) -> None:
        """Past 80% of a hard limit the wrap-up order stands on the todo layer at once: a
        model that has not called check_resources lately still hears it in time. While the
        limits have room, a phase that outgrew its allotment gets it extended, and the model
        reads a line saying so: an allotment is an estimate, and only the hard limits stop
        a run. Under a cost limit the order is also said in words that name it: the
        model sees its tokens and turns, but not what they cost."""
        phases, regulation = self.state.phases, self.state.regulation
        if regulation is None or phases.wrap_up_ordered:
            return
        report = regulation.check()
        if report.wrap_up:
            phases.order_wrap_up()
            said = report.named_order()
            if said is not None:
                self._inject([said])
            return
        extended = regulation.extend()
        if extended is not None:
            self._inject([extended])

    def _note_todo_layer(self) -> None:
        """The todo layer's INSTRUCTION line is an order on every turn: recorded when it
        changes."""
        state = self.state
        todos = state.phases.todos
        text = todos.next_instruction()
        if text != state.todo_order:
            state.todo_order = text
            state.direct(todo_layer_directive(todos))

    def add_tools(self, tools: Sequence[Tool]) -> None:
        """Tools the run learnt as it started (its MCP servers'), offered from the first
        request and governed like the agent's own; a name already taken is a ConfigError."""
        known = [t.name for t in self.registry]
        taken = sorted({t.name for t in tools} & set(known))
        if taken:
            raise ConfigError(
                f"the agent has a tool named {taken[0]!r}, and an MCP server offers a tool "
                "of that name: rename the agent's tool (mcp__<server>__<tool> names belong "
                "to MCP servers)"
            )
        guardrails = self.definition.guardrails.with_tools(tools, known=list(self.registry))
        registry = self.registry.extended(tools)
        self.definition = replace(self.definition, registry=registry, guardrails=guardrails)
        self.registry = registry
        self.state.guards.rebind(guardrails, list(registry))  # memories carry over

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, kickoff: str) -> LoopOutcome:
        state = self.state
        state.direct(directive(kickoff))
        state.context.append_user([TextBlock(kickoff)])
        return await self.go_on()

    async def go_on(self, cut: CutTurn | None = None) -> LoopOutcome:
        """The turns, from the state as it is: after the kickoff, or a restored checkpoint.
        ``cut``: the turn a kill cut, rebuilt from its record as the first turn instead of
        asking the model again (:mod:`gr_notebook.engine.side_effects`)."""
        state = self.state
        self.started = True
        while True:
            if self.checkpoint is not None:
                self.checkpoint()
            if not self._resume.is_set() and not self._stop_requested:
                await self._pause()
            if self._stop_requested:
                return LoopOutcome(self.stop_status, self._stop_requested)
            spent = state.usage().spent
            if spent is not None:
                return LoopOutcome("budget_exhausted", spent.reason, limit=spent)
            self._apply_rewinds()
            if state.stuck_detector is not None and not self._protected():
                prompt = state.stuck_detector(state.turn, state.phases.todos)
                if prompt:
                    state.emit(ProgressCheckEvent(prompt=prompt))
                    self._inject([prompt])
            self._wrap_up_when_limits_run_low()
            self._note_todo_layer()
            state.turn += 1
            recovery = cut if cut is not None and cut.turn == state.turn else None
            cut = None
            if recovery is not None:
                response: ModelResponse | LoopOutcome = self._recall(recovery)
            else:
                response = await self._call_model()
            if isinstance(response, LoopOutcome):
                return response
            outcome = await self._handle(response, recovery)
            if outcome is not None:
                return outcome
            await asyncio.sleep(0)  # let background tasks and widgets breathe between turns

    async def _pause(self) -> None:
        """Wait at a safe point between turns until resumed (or stopped)."""
        self.paused = True
        self.state.emit(RunPausedEvent())
        try:
            await self._resume.wait()
        finally:
            self.paused = False
        if self.checkpoint is not None:
            self.checkpoint.after_pause()
        if not self._stop_requested:
            self.state.emit(RunUnpausedEvent())

    async def _call_model(self) -> ModelResponse | LoopOutcome:
        state = self.state
        request = state.context.assemble(
            self.definition.system_prompt,
            state.phases.todos,
            self.registry.specs(),
            turn=state.turn,
        )
        started = time.perf_counter()
        try:
            counted = await self._count(request)
            over = state.usage().admits(counted, request_cost_usd=self._estimate(request, counted))
            if over is not None:
                return self._over_budget(over, over.reason)
            with calling(state.call_context(counted)):
                response = await self.model.complete(request)
        except asyncio.CancelledError:
            raise
        except RequestOverBudget as exc:  # a model that checks the budget itself
            limit = state.budget.max_tokens
            limit = state.tokens + exc.remaining if limit is None else limit
            over = SpentLimit("tokens", limit - exc.remaining, limit, exc.needed)
            return self._over_budget(over, str(exc))
        except Exception as exc:
            return self._fail_response(f"the model failed: {type(exc).__name__}: {exc}", error=exc)
        usage = response.usage
        # Every prompt token counts, cached or not: the budget measures what the model read.
        state.tokens += (
            usage.input_tokens
            + usage.cache_creation_input_tokens
            + usage.cache_read_input_tokens
            + usage.output_tokens
            if usage
            else request.estimated_tokens
        )
        uncounted: ModelError | None = None
        try:
            cost = self._cost(response, request)
        except ModelError as exc:  # the cap cannot count this call: not one call more
            cost, uncounted = None, exc
        if cost is not None:
            state.cost_usd += cost
        if usage is not None:
            self._previous = usage
            self._most_output = max(self._most_output, usage.output_tokens)
        state.record_model_call(
            usage or Usage(input_tokens=request.estimated_tokens),
            context_tokens=request.estimated_tokens,
            layers=request.layer_tokens,
            messages=len(request.messages),
            stop_reason=response.stop_reason,
            tool_calls=len(response.tool_uses),
            text=response.text,
            duration_s=time.perf_counter() - started,
            model=response.model or self.model.name,
            cost_usd=cost,
        )
        if uncounted is not None:
            return self._fail_response(str(uncounted), error=uncounted)
        thought = thinking_event(response.content)
        if thought is not None:
            state.emit(thought)
        return response

    def _recall(self, cut: CutTurn) -> ModelResponse:
        """The cut turn's reply as the killed run recorded it: its model call counted and
        recorded again (it was spent), and not made again."""
        state, call = self.state, cut.model_call
        state.tokens = max(state.tokens, call.tokens_used)
        if call.cost_usd is not None:
            state.cost_usd += call.cost_usd
        self._previous = Usage(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cache_creation_input_tokens=call.cache_write_tokens,
            cache_read_input_tokens=call.cache_read_tokens,
        )
        state.emit(call)
        if cut.thinking is not None:
            state.emit(cut.thinking)
        return cut.reply

    def _keep_reply(self, message: Message, recovery: CutTurn | None) -> str | None:
        """The blob of the model's reply that makes tool calls (its deep inputs cut), for
        their intent records: a resume rebuilds the turn from it (the next checkpoint keeps
        the same message, so it is stored once)."""
        if recovery is not None:
            return recovery.reply_digest
        keep = self.state.keep
        return None if keep is None else keep(json_bytes(message.to_json()))

    async def _count(self, request: ModelRequest) -> int | None:
        """The request's input tokens as the model counts them, when it can."""
        if self._counter is None:
            return None
        with calling(self.state.call_context()):
            return await self._counter.count_input_tokens(request)

    def _estimate(self, request: ModelRequest, counted: int | None) -> float | None:
        """Under a cost limit, the most the request could cost: its input tokens (counted,
        else estimated) and all the output the model may write (its ``max_tokens``, else
        the most a call of this run wrote), at the run's price."""
        if self.state.budget.max_cost_usd is None or self._price is None:
            return None
        most = getattr(self.model, "max_tokens", None)
        if isinstance(most, bool) or not isinstance(most, int):
            most = self._most_output
        tokens = counted if counted is not None else request.estimated_tokens
        return self._price.request_cost(tokens, most, self._previous)

    def _cost(self, response: ModelResponse, request: ModelRequest) -> float | None:
        """What the call cost: at the agent's ``price=`` when it has one, else as the model
        priced it; under a cost limit, a call the model left unpriced (a reply naming a
        model its table lacks) costs the model's own price. None when nothing prices it.
        A reported cost that is no amount of dollars (NaN, inf, negative) is unknown; under
        a cost limit it is a ModelError, since the limit cannot count it."""
        usage = response.usage or Usage(input_tokens=request.estimated_tokens)
        if self.definition.price is not None:
            return self.definition.price.cost(usage)
        cost = response.extra.get("cost_usd")
        cap = self.state.budget.max_cost_usd
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            if math.isfinite(cost) and cost >= 0:
                return float(cost)
            if cap is None:
                return None
            raise ModelError(
                f"the model reported this call's cost as {cost!r}, which is no amount of "
                f"dollars, so budget=gr.Budget(max_cost_usd={cap!r}) cannot count it: have "
                "the model report a finite cost >= 0 (None when it does not know), or pass "
                "price=gr.Price(...) to gr.Agent(...) to price every call"
            )
        if cap is not None and self._price is not None:
            return self._price.cost(usage)
        return None

    def _over_budget(self, over: SpentLimit, reason: str) -> LoopOutcome:
        """The request is not sent: the token budget, or the cost limit, cannot take it."""
        request = over.request if over.request is not None else 0
        remaining = 0 if over.kind == "cost" else int(over.remaining)
        self.state.emit(RequestOverBudgetEvent(needed=request, remaining=remaining, limit=over))
        return LoopOutcome("budget_exhausted", reason, limit=over)

    async def _handle(
        self, response: ModelResponse, recovery: CutTurn | None = None
    ) -> LoopOutcome | None:
        state = self.state
        if not response.content:
            return self._fail_response("the model returned an empty response")
        if response.stop_reason == "refusal":
            return self._fail_response(f"the model refused: {clip(response.text)}")
        message, too_deep = cut_deep_inputs(response.message())
        state.context.append(message)
        uses = message.tool_uses
        if not uses:
            if response.stop_reason == "max_tokens":
                self._inject(["Your reply was cut off at the token limit; continue."])
                return None
            return self._stop(response.text)
        reply = self._keep_reply(message, recovery)
        if recovery is not None:  # the record holds the input as cut: its calls stay refused
            too_deep |= recovery.too_deep
        calls = None if recovery is None else recovery.calls
        if response.stop_reason == "max_tokens":
            return await self._cut_off(uses, too_deep, reply, calls)
        effects = await call_tools(
            uses, state, self.registry, too_deep=too_deep, reply=reply, recovery=calls
        )
        state.context.append_user(effects.results)
        return self._act_on(effects)

    async def _cut_off(
        self,
        uses: Sequence[ToolUseBlock],
        too_deep: frozenset[str],
        reply: str | None = None,
        recovery: Mapping[str, CallRecord] | None = None,
    ) -> LoopOutcome | None:
        """A reply cut off at the token limit in the middle of a tool use: the calls before
        the last one are whole and run; the last one's input may be cut, so it is not run,
        and its result is an error that tells the model why (the API needs a result for
        every tool use)."""
        state = self.state
        *whole, cut = uses
        refusal = ToolResultBlock(cut.id, cut_off_tool_use(cut.name), is_error=True)
        if not whole:
            state.context.append_user([refusal])
            return None
        effects = await call_tools(
            whole, state, self.registry, too_deep=too_deep, reply=reply, recovery=recovery
        )
        state.context.append_user([*effects.results, refusal])
        return self._act_on(effects)

    def _act_on(self, effects: TurnEffects) -> LoopOutcome | None:
        """The end of a turn with tool calls: what its effects ask of the run."""
        state = self.state
        if effects.give_up is not None:
            return gave_up(state, effects.give_up)
        if effects.worked:
            state.guards.note_work()
        if effects.job is not None:
            done = LoopOutcome("completed", f"{effects.job_tool} was called")
            return settle(state, done, STOP_BY_TOOL, {"summary": effects.job.summary})
        stopped = self._intervene(effects.intervention)
        if stopped is not None:
            return stopped
        if effects.prune is not None:
            self._prune(effects.prune)
        if effects.compaction_due and self.definition.compaction:
            self._compact()
        self._inject(state.phases.take_prompts())
        return None

    def _fail_response(self, reason: str, *, error: Exception | None = None) -> LoopOutcome:
        self.state.emit(
            ErrorEvent(
                source="model",
                error_type=type(error).__name__ if error else "BadResponse",
                message=str(error) if error else reason,
            )
        )
        return LoopOutcome("failed", reason, error)

    def _stop(self, final_text: str) -> LoopOutcome | None:
        """The model ended its turn without tool calls: the run is over, unless the
        completion checker finds work left (then the model is told, and the loop goes on)."""
        judged = self.step.judge_end(final_text)
        if isinstance(judged, LoopOutcome):
            return judged
        self._inject([judged])
        return None

    # -- interventions (seed 004) ---------------------------------------------------------------

    def _protected(self) -> bool:
        """While a safeguard protects the agent, seed 000's progress check holds off too; and
        once a wrap-up was ordered, no progress check asks for more work."""
        state = self.state
        if state.phases.wrap_up_ordered:
            return True
        return state.interventions is not None and state.interventions.protected

    def _intervene(self, check: InterventionCheck | None) -> LoopOutcome | None:
        """Act on the turn's intervention, at the end of the turn: tool results stay whole."""
        if check is None:
            return None
        phases = self.state.phases
        steps = check.steps_since_progress
        if check.action == "replan":
            text = strategy_check_prompt(steps, check.stuck_counter)
            self._inject([directive(text, reads=(phases.plan_file,))])
        elif check.action == "rewind":
            phases.rewind(stuck_rewind_issue(steps, check.recent_tools), source="system")
            self.state.guards.note_reset()
            self._inject(phases.take_prompts())
        else:
            return LoopOutcome(
                "stuck",
                f"no progress in {steps} tool calls, after a strategy check and a rewind "
                f"(intervention 3 of 3, after {check.step} tool calls)",
            )
        return None

    def _compact(self) -> None:
        state = self.state
        phases, regulation = state.phases, state.regulation
        recap = build_recap(
            segments=phases.segments,
            journal=phases.journal,
            todos=phases.todos,
            plan_file=phases.plan_file,
            turn=state.turn,
            budget=regulation.answer if regulation is not None else None,
            workspace_state=workspace_state(
                phases.workspace,
                plan_file=phases.plan_file,
                todos=phases.todos,
                plan=phases.plan(),
            ),
        )
        stats = state.context.compact(recap)
        if regulation is not None:
            regulation.note_pruned()
        state.emit(
            CompactionEvent(
                messages_removed=stats.messages_removed,
                tokens_before=stats.tokens_before,
                tokens_after=stats.tokens_after,
            )
        )

    def _prune(self, prune: PruneConversation) -> None:
        """After summarize_progress: its summary and the last 5 messages stay."""
        state = self.state
        stats = state.context.prune(prune.summary)
        if state.regulation is not None:
            state.regulation.note_pruned()
        state.emit(
            ConversationPrunedEvent(
                messages_removed=stats.messages_removed,
                tokens_before=stats.tokens_before,
                tokens_after=stats.tokens_after,
                key_findings=list(prune.key_findings),
                files_examined=list(prune.files_examined),
                next_steps=list(prune.next_steps),
                summary_turn=state.turn if prune.turn is None else prune.turn,
            )
        )

    def _inject(self, orders: Sequence[Directive | str]) -> None:
        """Tell the model: workflow prompts, refusals and checks, each recorded as guidance."""
        state = self.state
        directives = [self.step.told(o) for o in orders]
        for d in directives:
            if d.reads and state.regulation is not None:
                state.regulation.expect_reads(d.reads)
        state.context.append_user([TextBlock(d.text) for d in directives])

    def _apply_rewinds(self) -> None:
        state = self.state
        issues, state.rewinds = state.rewinds, []
        for issue, reset in issues:
            state.phases.rewind(issue, source="person")
            if state.interventions is not None:
                state.interventions.note_reset()
            state.guards.note_reset()
            if reset:
                state.reset_policies("person")
            self._inject(state.phases.take_prompts())
