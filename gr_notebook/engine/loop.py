"""The one orchestrator: assemble → model → guarded tool calls → checks → transitions.

Everything else (todos, phases, context, tools) is a small object the loop calls at fixed
points. Nothing a model or a tool does can crash the run: unknown tools, bad arguments and
tool exceptions become ``is_error`` results, and a failing model ends the run as ``failed``
with the reason recorded and the workspace left as it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from gr_notebook.engine.context import ContextManager, build_recap
from gr_notebook.errors import RequestOverBudget
from gr_notebook.eventdata import clip
from gr_notebook.events import (
    CompactionEvent,
    ConversationPrunedEvent,
    ErrorEvent,
    Event,
    EventLog,
    FeedbackEvent,
    GuidanceEvent,
    GuidanceRecord,
    ModelCallEvent,
    PhaseStartedEvent,
    PoliciesResetEvent,
    PromptInjectedEvent,
    RequestOverBudgetEvent,
    RunPausedEvent,
    RunResumedEvent,
    StuckCheckpointEvent,
    ToolCallEvent,
)
from gr_notebook.guardrails.budget import Budget, BudgetUsage
from gr_notebook.guardrails.completion import StopKind
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionConfig,
    InterventionEngine,
)
from gr_notebook.guardrails.regulation import RegulationSettings, ResourceReport, SelfRegulation
from gr_notebook.guardrails.runtime import Guardrails, StopVerdict
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.guidance import Directive, feedback_directive, guidance_data
from gr_notebook.messages import TextBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models.base import Model, ModelResponse
from gr_notebook.models.call_context import CallContext, calling
from gr_notebook.tools import ToolContext, ToolOutput, ToolRegistry
from gr_notebook.tools.nesting import cut_deep_inputs, too_deep_message
from gr_notebook.workflow.phases import JobResult, PhaseController
from gr_notebook.workflow.prompts import (
    directive,
    marker_of,
    stop_refused_prompt,
    strategy_check_prompt,
    stuck_rewind_issue,
    todo_layer_directive,
)
from gr_notebook.workflow.stuck import SameStateDetector, StuckDetector
from gr_notebook.workflow.summary import workspace_state
from gr_notebook.workflow.workspace import Workspace

__all__ = ["Loop", "LoopOutcome", "RunStatus", "SameStateDetector", "StuckDetector"]

RunStatus: TypeAlias = Literal[
    "running",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "budget_exhausted",
    "incomplete",
    "stuck",
]
"""Which end of a run gives which status: the status table in docs/decisions.md."""


@dataclass(frozen=True, slots=True)
class LoopOutcome:
    status: RunStatus
    reason: str | None = None
    error: BaseException | None = None


class Loop:
    def __init__(
        self,
        *,
        model: Model,
        registry: ToolRegistry,
        workspace: Workspace,
        plan_file: str,
        events: EventLog,
        system_prompt: str,
        budget: Budget,
        compaction: bool,
        stuck_detector: StuckDetector | None,
        clock: Callable[[], float],
        guardrails: GuardrailSpec | None = None,
        interventions: InterventionConfig | None = None,
        regulation: RegulationSettings | None = None,
        name: str = "agent",
        run_id: str = "",
    ) -> None:
        self.model = model
        self.registry = registry
        self.events = events
        self.phases = PhaseController(
            workspace, plan_file, self.emit, clock, regulated=regulation is not None
        )
        self.context = ContextManager()
        self.system_prompt = system_prompt
        self.budget = budget
        self.compaction = compaction
        self.stuck_detector = stuck_detector
        self.clock = clock
        self.turn = 0
        self.tokens = 0
        self.started_at = clock()
        self.guards = Guardrails(
            guardrails or GuardrailSpec(),
            workspace=workspace,
            emit=self.emit,
            clock=clock,
            usage=self.usage,
            todos=lambda: self.phases.todos,
            plan=self.phases.plan,
            wrap_up=lambda: self.regulation.wrap_up if self.regulation else None,
            prompt_name=name,
            run_id=run_id,
        )
        self.interventions = InterventionEngine(interventions) if interventions else None
        self.regulation = (
            SelfRegulation(
                regulation,
                usage=self.usage,
                emit=self.emit,
                workspace=workspace,
                phase_ahead=self.phases.phase_ahead,
                run_id=run_id,
            )
            if regulation
            else None
        )
        self._intervention: InterventionCheck | None = None  # the highest tier this turn
        self._give_up: StopVerdict | None = None
        self._refused_calls = 0  # job_complete calls refused in the current turn
        self._too_deep: frozenset[str] = frozenset()  # this turn's calls whose input was cut
        self._rewinds: list[tuple[str, bool]] = []
        self._stop_requested: str | None = None
        self.stop_status: RunStatus = "cancelled"
        """What a requested stop ends as: ``interrupted`` for Ctrl-C, else ``cancelled``."""
        self._resume = asyncio.Event()
        self._resume.set()
        self._todo_order: str | None = None  # the INSTRUCTION line last recorded as guidance
        self.paused = False
        self.started = False

    # -- requests from outside, applied at the next safe point -------------------------------

    def request_rewind(self, issue: str, *, reset_policies: bool = False) -> None:
        self._rewinds.append((issue, reset_policies))

    def request_stop(
        self, reason: str = "stopped by request", *, interrupted: bool = False
    ) -> None:
        self._stop_requested = reason
        self.stop_status = "interrupted" if interrupted else "cancelled"
        self._resume.set()  # a paused run wakes up to stop

    def request_pause(self) -> None:
        if not self._stop_requested:  # a stop already asked for wins; never hold it
            self._resume.clear()

    def request_resume(self) -> None:
        self._resume.set()

    @property
    def pause_requested(self) -> bool:
        return not self._resume.is_set()

    @property
    def stop_reason(self) -> str | None:
        return self._stop_requested

    def emit(self, event: Event) -> None:
        if isinstance(event, FeedbackEvent) and event.directive is None:
            order = feedback_directive(event.provider, event.text)
            event = replace(event, directive=self.guidance(order))
        self.events.append(event, turn=self.turn, phase=self.phases.todos.phase_number)
        if isinstance(event, PhaseStartedEvent) and self.regulation is not None:
            self.regulation.on_phase_started(event.phase_number)

    def guidance(self, directive: Directive) -> GuidanceRecord:
        """An order given to the model, with the state of the job at that moment: recorded
        on the event that delivers it (see :mod:`gr_notebook.guidance`)."""
        return guidance_data(
            directive,
            todos=self.phases.todos,
            plan=self.phases.plan(),
            usage=self.usage(),
            job_done=self.phases.job is not None,
        )

    def direct(self, directive: Directive) -> None:
        """An order that no other event delivers (the todo layer, the kickoff)."""
        self.emit(GuidanceEvent(directive=self.guidance(directive)))

    def _wrap_up_when_limits_run_low(self) -> None:
        """Past 80% of a hard limit the wrap-up order stands on the todo layer at once: a
        model that has not called check_resources lately still hears it in time."""
        regulation = self.regulation
        if (
            regulation is not None
            and not self.phases.wrap_up_ordered
            and regulation.check().wrap_up
        ):
            self.phases.order_wrap_up()

    def _note_todo_layer(self) -> None:
        """The todo layer's INSTRUCTION line is an order on every turn: recorded when it
        changes."""
        todos = self.phases.todos
        text = todos.next_instruction()
        if text != self._todo_order:
            self._todo_order = text
            self.direct(todo_layer_directive(todos))

    @property
    def max_iterations(self) -> int:
        return self.budget.max_iterations

    def measured(self) -> dict[str, Any]:
        """The budget the agent is measured against now, as the meters show it: what
        check_resources would report (the phase's allotment, else the run's limits)."""
        usage = self.usage()
        report = (
            self.regulation.report(usage)
            if self.regulation is not None
            else ResourceReport.of(usage, None)
        )
        return {
            "tokens_budget": report.tokens_budget,
            "iterations_max": report.iterations_max,
            "budget_tokens_used": report.tokens_used,
            "budget_iterations_used": report.iterations_used,
            "budget_scope": report.scope,
        }

    def usage(self) -> BudgetUsage:
        """What the run has used of its budget, now."""
        return self.budget.usage(
            tokens=self.tokens, iterations=self.turn, elapsed_s=self.clock() - self.started_at
        )

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, kickoff: str) -> LoopOutcome:
        self.started = True
        self.direct(directive(kickoff))
        self.context.append_user([TextBlock(kickoff)])
        while True:
            if not self._resume.is_set() and not self._stop_requested:
                await self._pause()
            if self._stop_requested:
                return LoopOutcome(self.stop_status, self._stop_requested)
            spent = self.usage().exhausted
            if spent:
                return LoopOutcome("budget_exhausted", spent)
            self._apply_rewinds()
            if self.stuck_detector is not None and not self._protected():
                prompt = self.stuck_detector(self.turn, self.phases.todos)
                if prompt:
                    self.emit(StuckCheckpointEvent(prompt=prompt))
                    self._inject([prompt])
            self._wrap_up_when_limits_run_low()
            self._note_todo_layer()
            self.turn += 1
            response = await self._call_model()
            if isinstance(response, LoopOutcome):
                return response
            outcome = await self._handle(response)
            if outcome is not None:
                return outcome
            await asyncio.sleep(0)  # let background tasks and widgets breathe between turns

    async def _pause(self) -> None:
        """Wait at a safe point between turns until resumed (or stopped)."""
        self.paused = True
        self.emit(RunPausedEvent())
        try:
            await self._resume.wait()
        finally:
            self.paused = False
        if not self._stop_requested:
            self.emit(RunResumedEvent())

    async def _call_model(self) -> ModelResponse | LoopOutcome:
        request = self.context.assemble(
            self.system_prompt, self.phases.todos, self.registry.specs(), turn=self.turn
        )
        started = time.perf_counter()
        limit = self.budget.max_tokens
        call = CallContext(self.emit, None if limit is None else max(0, limit - self.tokens))
        try:
            with calling(call):
                response = await self.model.complete(request)
        except asyncio.CancelledError:
            raise
        except RequestOverBudget as exc:
            self.emit(RequestOverBudgetEvent(needed=exc.needed, remaining=exc.remaining))
            return LoopOutcome("budget_exhausted", str(exc))
        except Exception as exc:
            return self._fail_response(f"the model failed: {type(exc).__name__}: {exc}", error=exc)
        usage = response.usage
        layers = request.layer_tokens
        # Every prompt token counts, cached or not: the budget measures what the model read.
        self.tokens += (
            usage.input_tokens
            + usage.cache_creation_input_tokens
            + usage.cache_read_input_tokens
            + usage.output_tokens
            if usage
            else request.estimated_tokens
        )
        spent = self.usage()
        self.emit(
            ModelCallEvent(
                input_tokens=usage.input_tokens if usage else request.estimated_tokens,
                output_tokens=usage.output_tokens if usage else 0,
                cache_read_tokens=usage.cache_read_input_tokens if usage else 0,
                cache_write_tokens=usage.cache_creation_input_tokens if usage else 0,
                context_tokens=request.estimated_tokens,
                layer1_tokens=layers[0],
                layer2_tokens=layers[1],
                layer3_tokens=layers[2],
                layer4_tokens=layers[3],
                layer5_tokens=layers[4],
                messages=len(request.messages),
                stop_reason=response.stop_reason,
                tool_calls=len(response.tool_uses),
                text=response.text,
                duration_s=time.perf_counter() - started,
                model=response.model or self.model.name,
                cost_usd=response.extra.get("cost_usd"),
                tokens_used=self.tokens,
                iterations_used=spent.iterations,
                **self.measured(),
            )
        )
        return response

    async def _handle(self, response: ModelResponse) -> LoopOutcome | None:
        if not response.content:
            return self._fail_response("the model returned an empty response")
        if response.stop_reason == "refusal":
            return self._fail_response(f"the model refused: {clip(response.text)}")
        message, self._too_deep = cut_deep_inputs(response.message())
        self.context.append(message)
        uses = message.tool_uses
        if not uses:
            if response.stop_reason == "max_tokens":
                self._inject(["Your reply was cut off at the token limit; continue."])
                return None
            return self._stop(response.text)
        self._refused_calls = 0
        results = [await self._call_tool(use) for use in uses]
        self.context.append_user(results)
        if self._give_up is not None:
            return self._incomplete(self._give_up)
        if self._refused_calls < len(uses):  # the turn did more than try to stop
            self.guards.note_work()
        if (job := self.phases.job) is not None:
            done = LoopOutcome("completed", "job_complete was called")
            return self._settle(done, "job_complete", {"summary": job.summary})
        stopped = self._intervene()
        if stopped is not None:
            return stopped
        if self.regulation is not None and self.regulation.pending_prune is not None:
            self._prune()
        if self.phases.compaction_due:
            self.phases.compaction_due = False
            if self.compaction:
                self._compact()
        self._inject(self.phases.take_prompts())
        return None

    async def _call_tool(self, use: ToolUseBlock) -> ToolResultBlock:
        started = time.perf_counter()
        if self.phases.job is not None:
            output = ToolOutput("Not run: the job was already completed by job_complete.", True)
        else:
            output = await self._run_tool(use)
        self.emit(
            ToolCallEvent(
                tool=use.name,
                tool_use_id=use.id,
                input=use.input,
                is_error=output.is_error,
                result=output.content,
                duration_s=time.perf_counter() - started,
                directive=None if output.directive is None else self.guidance(output.directive),
            )
        )
        content = output.content
        if self.interventions is not None and not self.phases.wrap_up_ordered:
            self._observe(use, output)  # told to wrap up, it is winding down, not stuck
        blocks = self.guards.after_call(
            use.name, use.input, is_error=output.is_error, turn=self.turn
        )
        if self.regulation is not None and use.name == "read_file" and not output.is_error:
            path = str(use.input.get("path", ""))
            redundant = self.regulation.on_read(path, turn=self.turn, call_index=self.guards.calls)
            if redundant is not None:
                order = feedback_directive("Redundancy", redundant.render(), avoid_reads=(path,))
                self.emit(redundant.event(use.name, None, directive=self.guidance(order)))
                blocks = [*blocks, redundant]
        if blocks:  # seed 002's immediate delivery: inside the result that triggered them
            content = f"{content}\n\n{render_feedback(blocks)}"
        return ToolResultBlock(use.id, content, output.is_error)

    async def _run_tool(self, use: ToolUseBlock) -> ToolOutput:
        if use.id in self._too_deep:
            return ToolOutput(too_deep_message(use.name), True)
        tool, problem = self.registry.check_call(use.name, use.input)
        if problem is not None or tool is None:
            return problem or ToolOutput("Unknown tool.", True)
        denial = self.guards.check(tool, use.input, turn=self.turn)
        if denial is not None:
            text = denial.message()
            return ToolOutput(text, True, Directive(text, f"policy:{denial.policy}", "do_first"))
        if tool.name == "job_complete":
            verdict = self.guards.judge_stop("job_complete", dict(use.input))
            if not verdict.allowed:
                self._refused_calls += 1
                if verdict.give_up:
                    self._give_up = verdict
                text = self._refusal(verdict)
                return ToolOutput(text, True, Directive(text, "stop_refused", "continue"))
        context = ToolContext(
            self.phases.workspace, self.phases, self.clock, self.turn, regulation=self.regulation
        )
        try:
            output = await self.registry.invoke(tool, context, use.input)
            if not output.is_error:
                self.guards.after_success(tool, use.input, output, turn=self.turn)
                if tool.name == "todo_rewind" and use.input.get("reset_policies"):
                    self._reset_policies("model")
            return output
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.emit(
                ErrorEvent(
                    source="tool", tool=use.name, error_type=type(exc).__name__, message=str(exc)
                )
            )
            return ToolOutput(
                f"Tool '{use.name}' failed: {type(exc).__name__}: {exc}. The workspace is "
                "unchanged unless the tool says otherwise; try again differently.",
                True,
            )

    def _fail_response(self, reason: str, *, error: Exception | None = None) -> LoopOutcome:
        self.emit(
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
        verdict = self.guards.judge_stop("end_turn", final_text)
        if not verdict.allowed:
            if verdict.give_up:
                return self._incomplete(verdict)
            self._inject([self._refusal(verdict)])
            return None
        if self.phases.job is None:
            plan = self.phases.plan()
            if plan is not None and plan.is_complete and self.phases.plan_written:
                self.phases.complete_job(
                    JobResult(
                        summary=final_text.strip() or "All phases of the plan are complete.",
                        source="detected",
                    )
                )
        reason = "the model ended its turn"
        if verdict.bypassed:
            reason += f"; the completion check was bypassed: {verdict.bypassed}"
        return self._settle(LoopOutcome("completed", reason), "end_turn", final_text)

    def _settle(self, outcome: LoopOutcome, kind: StopKind, tentative: Any) -> LoopOutcome:
        """A stop made while a hard limit pressed (spent, or a wrap-up ordered) is a success
        only if the job is done: otherwise the limit ended it, ``budget_exhausted``, as when
        it runs out between turns (the status table in docs/decisions.md)."""
        pressed = self.guards.pressing()
        if not pressed:
            return outcome
        left = self.guards.work_left(kind, tentative)
        if left is None:
            return outcome
        why = "" if pressed in str(outcome.reason) else f" ({pressed})"
        return LoopOutcome(
            "budget_exhausted",
            f"{outcome.reason}; a limit ended the job with work left{why}: {left}",
        )

    def _refusal(self, verdict: StopVerdict) -> str:
        return stop_refused_prompt(
            verdict.feedback, refusals=self.guards.refusals, limit=self.guards.spec.max_refusals
        )

    def _incomplete(self, verdict: StopVerdict) -> LoopOutcome:
        first = (verdict.feedback or "").replace("<blocker>", "").strip().split("\n")[0]
        return LoopOutcome(
            "incomplete",
            f"the stop was refused {self.guards.refusals} times in a row"
            + (f": {clip(first, 200)}" if first else ""),
        )

    # -- interventions (seed 004) ---------------------------------------------------------------

    def _protected(self) -> bool:
        """While a safeguard protects the agent, seed 000's checkpoint holds off too; and
        once a wrap-up was ordered, no checkpoint asks for more work."""
        if self.phases.wrap_up_ordered:
            return True
        return self.interventions is not None and self.interventions.protected

    def _observe(self, use: ToolUseBlock, output: ToolOutput) -> None:
        assert self.interventions is not None
        check = self.interventions.observe(
            use.name, use.input, output.content, is_error=output.is_error
        )
        if check is None:
            return
        self.emit(check.event())
        if check.fired and (self._intervention is None or check.tier > self._intervention.tier):
            self._intervention = check

    def _intervene(self) -> LoopOutcome | None:
        """Act on the turn's intervention, at the end of the turn: tool results stay whole."""
        check, self._intervention = self._intervention, None
        if check is None:
            return None
        steps = check.steps_since_progress
        if check.action == "replan":
            text = strategy_check_prompt(steps, check.stuck_counter)
            self._inject([directive(text, reads=(self.phases.plan_file,))])
        elif check.action == "rewind":
            self.phases.rewind(stuck_rewind_issue(steps, check.recent_tools), source="system")
            self._inject(self.phases.take_prompts())
        else:
            return LoopOutcome(
                "stuck",
                f"no progress in {steps} steps, after a strategy check and a rewind "
                f"(intervention tier 3 at step {check.step})",
            )
        return None

    def _reset_policies(self, source: str) -> None:
        self.guards.reset_policies()
        self.emit(PoliciesResetEvent(source=source, policies=list(self.guards.memories)))

    def _compact(self) -> None:
        recap = build_recap(
            segments=self.phases.segments,
            journal=self.phases.journal,
            todos=self.phases.todos,
            plan_file=self.phases.plan_file,
            turn=self.turn,
            budget=self.regulation.answer if self.regulation is not None else None,
            workspace_state=workspace_state(
                self.phases.workspace,
                plan_file=self.phases.plan_file,
                todos=self.phases.todos,
                plan=self.phases.plan(),
            ),
        )
        stats = self.context.compact(recap)
        if self.regulation is not None:
            self.regulation.note_pruned()
        self.emit(
            CompactionEvent(
                messages_removed=stats.messages_removed,
                tokens_before=stats.tokens_before,
                tokens_after=stats.tokens_after,
            )
        )

    def _prune(self) -> None:
        """After summarize_progress: its summary and the last 5 messages stay."""
        assert self.regulation is not None
        summary, self.regulation.pending_prune = self.regulation.pending_prune, None
        assert summary is not None
        stats = self.context.prune(summary.render())
        self.regulation.note_pruned()
        self.emit(
            ConversationPrunedEvent(
                messages_removed=stats.messages_removed,
                tokens_before=stats.tokens_before,
                tokens_after=stats.tokens_after,
                key_findings=list(summary.key_findings),
                files_examined=list(summary.files_examined),
                next_steps=list(summary.next_steps),
                summary_turn=summary.turn,
            )
        )

    def _inject(self, orders: Sequence[Directive | str]) -> None:
        """Tell the model: workflow prompts, refusals and checks, each recorded as guidance."""
        directives = [o if isinstance(o, Directive) else directive(o) for o in orders]
        for d in directives:
            self.emit(
                PromptInjectedEvent(
                    text=d.text, marker=marker_of(d.text), directive=self.guidance(d)
                )
            )
            if d.reads and self.regulation is not None:
                self.regulation.expect_reads(d.reads)
        self.context.append_user([TextBlock(d.text) for d in directives])

    def _apply_rewinds(self) -> None:
        issues, self._rewinds = self._rewinds, []
        for issue, reset in issues:
            self.phases.rewind(issue, source="person")
            if self.interventions is not None:
                self.interventions.note_reset()
            if reset:
                self._reset_policies("person")
            self._inject(self.phases.take_prompts())
