"""Tool execution as its own step: a turn's tool uses in, their results and the turn's effects
out (the anchor is Inspect AI's ``model/_call_tools.py``).

For each call, in order: the policies (``check``), a stop judged by the completion checker
when the tool ends the job, the handler, the job's result if it completed the job (judged
first when the tool is not declared to end it), the policies' ``on_result``, a reset of the
policies' memory if the call asked for one, then the
``tool_call`` event, the intervention tracker, the feedback providers and the redundancy
check, whose blocks go back inside the result. The rest comes back as a
:class:`TurnEffects` value (the job completed, a pruning, a compaction due, rewinds, refused
stops, the turn's intervention), which the loop acts on. Nothing here or in the loop looks
at a tool's name: a tool declares what it is (:attr:`Tool.reads`, :attr:`Tool.ends_job`)
and returns its effects (:mod:`gr_notebook.tools.effects`). What the guardrails do around
the call is the guarded step's (:mod:`gr_notebook.engine.guarded_step`), the same on every
host; this module is gr's translation of it (the registry, the job, the effects).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gr_notebook.engine.guarded_step import GuardedCall, GuardedStep, Refused
from gr_notebook.engine.state import RunState
from gr_notebook.errors import GrNotebookError
from gr_notebook.guardrails.approval import edited_note
from gr_notebook.guardrails.completion import STOP_BY_TOOL
from gr_notebook.guardrails.feedback import render_feedback
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guardrails.runtime import StopVerdict
from gr_notebook.guidance import Directive, feedback_directive
from gr_notebook.messages import ToolResultBlock, ToolUseBlock
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.tools.effects import (
    CompactContext,
    CompleteJob,
    PruneConversation,
    ResetPolicies,
    Rewound,
)
from gr_notebook.tools.nesting import too_deep_message
from gr_notebook.tools.registry import ToolRegistry
from gr_notebook.workflow.phases import JobResult

__all__ = ["TurnEffects", "call_tools"]


@dataclass(frozen=True, slots=True)
class TurnEffects:
    """What a turn's tool calls did to the run, for the loop to act on."""

    results: tuple[ToolResultBlock, ...]
    job: JobResult | None = None
    """The job's result, when a call completed it."""
    job_tool: str = ""
    """The tool that completed it."""
    prune: PruneConversation | None = None
    """The latest pruning asked for."""
    compaction_due: bool = False
    rewinds: tuple[str, ...] = ()
    """The issues of the rewinds the calls made (the workflow already ran)."""
    stops_refused: int = 0
    """Calls that tried to end the job and were refused."""
    give_up: StopVerdict | None = None
    """A refusal that reached the limit: the run ends ``incomplete``."""
    policies_reset: bool = False
    intervention: InterventionCheck | None = None
    """The highest intervention tier that fired, acted on at the end of the turn."""

    @property
    def worked(self) -> bool:
        """The turn did more than try to stop (which breaks the refusal streak)."""
        return self.stops_refused < len(self.results)


async def call_tools(
    uses: Sequence[ToolUseBlock],
    state: RunState,
    registry: ToolRegistry,
    *,
    too_deep: frozenset[str] = frozenset(),
) -> TurnEffects:
    """Run a turn's tool calls in order; ``too_deep`` are the ids of calls whose input was
    cut for nesting too deeply (they are refused)."""
    turn = _Turn(state, registry, too_deep)
    results = tuple([await turn.call(use) for use in uses])
    effects = turn.effects
    workflow_due = state.phases.take_compaction_due()  # a new todo list began
    return TurnEffects(
        results,
        job=effects.job,
        job_tool=effects.job_tool,
        prune=effects.prune,
        compaction_due=effects.compaction or workflow_due,
        rewinds=tuple(effects.rewinds),
        stops_refused=effects.refused,
        give_up=effects.give_up,
        policies_reset=effects.policies_reset,
        intervention=effects.intervention,
    )


class _Effects:
    __slots__ = (
        "compaction",
        "give_up",
        "intervention",
        "job",
        "job_tool",
        "policies_reset",
        "prune",
        "refused",
        "rewinds",
    )

    def __init__(self) -> None:
        self.job: JobResult | None = None
        self.job_tool = ""
        self.prune: PruneConversation | None = None
        self.compaction = False
        self.rewinds: list[str] = []
        self.refused = 0
        self.give_up: StopVerdict | None = None
        self.policies_reset = False
        self.intervention: InterventionCheck | None = None


class _Turn:
    """One turn's calls; collects their effects."""

    def __init__(self, state: RunState, registry: ToolRegistry, too_deep: frozenset[str]):
        self.state, self.registry, self.too_deep = state, registry, too_deep
        self.step = GuardedStep(state)
        self.effects = _Effects()

    async def call(self, use: ToolUseBlock) -> ToolResultBlock:
        state, effects = self.state, self.effects
        started = time.perf_counter()
        tool: Tool | None = None
        if effects.job is not None:
            output = ToolOutput(
                f"Not run: the job was already completed by {effects.job_tool}.", True
            )
        else:
            tool, use, output = await self._run(use)
        call = GuardedCall(tool or _unknown(use.name), use.input, use.id)
        after = self.step.after(call, output, duration_s=time.perf_counter() - started)
        content = after.result  # the model reads the key no more than the record does
        if after.intervention is not None:
            current = effects.intervention
            if current is None or after.intervention.tier > current.tier:
                effects.intervention = after.intervention
        blocks = list(after.feedback)
        regulation = state.regulation
        if (
            regulation is not None
            and tool is not None
            and tool.reads is not None
            and not output.is_error
        ):
            path = str(use.input.get(tool.reads, ""))
            calls = state.guards.calls
            redundant = regulation.on_read(path, turn=state.turn, call_index=calls)
            if redundant is not None:
                order = feedback_directive("Redundancy", redundant.render(), avoid_reads=(path,))
                state.emit(redundant.event(use.name, None, directive=state.guidance(order)))
                blocks.append(redundant)
        if blocks:  # seed 002's immediate delivery: inside the result that triggered them
            content = f"{content}\n\n{render_feedback(blocks)}"
        return ToolResultBlock(use.id, content, output.is_error)

    async def _run(self, use: ToolUseBlock) -> tuple[Tool | None, ToolUseBlock, ToolOutput]:
        """The call through the guardrails and, when they let it, the tool: the tool, the
        call as it ran (a person may have edited it) and its output."""
        state = self.state
        if use.id in self.too_deep:
            return None, use, ToolOutput(too_deep_message(use.name), True)
        registry = self.registry
        tool, problem = registry.check_call(use.name, use.input)
        if problem is not None or tool is None:
            return tool, use, problem or ToolOutput("Unknown tool.", True)
        verdict = await self.step.before(
            GuardedCall(tool, use.input, use.id),
            schema=lambda edited: _problem(registry.check_call(use.name, edited)[1]),
        )
        if isinstance(verdict, Refused):
            return tool, use, verdict.output
        edited = verdict.edited
        if edited:  # what runs is what the person was last shown
            use = ToolUseBlock(use.id, use.name, dict(verdict.call.params))
        if tool.ends_job:
            verdict_stop = self._judge_stop(use)
            if not verdict_stop.allowed:
                return tool, use, self._refused_stop(verdict_stop)
        done_before = state.phases.job is not None
        try:
            output = await registry.invoke(tool, state.tool_context(), use.input)
            if not output.is_error:
                output = self._complete_job(tool, use, output, done_before=done_before)
            if not output.is_error:
                self.step.ran(GuardedCall(tool, use.input, use.id), output)
                self._take_effects(output)
            if edited:
                output = replace(output, content=edited_note(use.input) + output.content)
            return tool, use, output
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return tool, use, self.step.failed(use.name, exc)

    def _refused_stop(self, verdict: StopVerdict) -> ToolOutput:
        self.effects.refused += 1
        if verdict.give_up:
            self.effects.give_up = verdict
        text = self.state.guards.refusal(verdict)
        return ToolOutput(text, True, Directive(text, "stop_refused", "continue"))

    def _judge_stop(self, use: ToolUseBlock) -> StopVerdict:
        """The checker's verdict on a call that ends the job."""
        return self.state.guards.judge_stop(STOP_BY_TOOL, dict(use.input))

    def _complete_job(
        self, tool: Tool, use: ToolUseBlock, output: ToolOutput, *, done_before: bool
    ) -> ToolOutput:
        """Record the job's result as part of the call, unless the handler did: an error in
        doing so is the call's error, as if the handler had raised it.

        A tool declared ``ends_job`` was judged by the completion checker before it ran; one
        that is not, but returns :class:`CompleteJob`, is judged now, before the result is
        recorded, so no way of ending the job slips past the check. A handler that records
        the job itself (``ctx.phases.complete_job``) ends the run as it always did."""
        phases = self.state.phases
        for effect in output.effects:
            if not isinstance(effect, CompleteJob):
                continue
            if not tool.ends_job and phases.job is None:
                verdict = self._judge_stop(use)
                if not verdict.allowed:
                    return self._refused_stop(verdict)
            if phases.job != effect.result:
                try:
                    phases.complete_job(effect.result)
                except GrNotebookError as exc:
                    return ToolOutput(f"Error: {exc}", True)
            self.effects.job, self.effects.job_tool = effect.result, tool.name
        if self.effects.job is None and phases.job is not None and not done_before:
            self.effects.job, self.effects.job_tool = phases.job, tool.name
        return output

    def _take_effects(self, output: ToolOutput) -> None:
        effects = self.effects
        for effect in output.effects:
            if isinstance(effect, ResetPolicies):
                self.state.reset_policies("model")
                effects.policies_reset = True
            elif isinstance(effect, PruneConversation):
                effects.prune = effect
            elif isinstance(effect, CompactContext):
                effects.compaction = True
            elif isinstance(effect, Rewound):
                effects.rewinds.append(effect.issue)


def _problem(output: ToolOutput | None) -> str | None:
    return None if output is None else output.content


def _unknown(name: str) -> Tool:
    """What the record and the feedback providers read for a call of no known tool."""
    return Tool(name, "an unknown tool", {}, _never)


def _never(_context: object, _params: object) -> ToolOutput:
    raise RuntimeError("an unknown tool never runs")
