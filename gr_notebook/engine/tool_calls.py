"""Tool execution as its own step: a turn's tool uses in, their results and the turn's effects
out (the anchor is Inspect AI's ``model/_call_tools.py``).

For each call, in order: the policies (``check``), a stop judged by the completion checker
when the tool ends the job, the intent record, the handler, the job's result if it completed
the job (judged first when the tool is not declared to end it), the policies' ``on_result``,
a reset of the policies' memory if the call asked for one, then the ``tool_call`` event,
the intervention tracker, the feedback providers and the redundancy
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
import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gr_notebook.engine.guarded_step import (
    Allowed,
    GuardedCall,
    GuardedStep,
    Held,
    Refused,
    SchemaCheck,
)
from gr_notebook.engine.side_effects import (
    CallRecord,
    happened_result,
    policies_fingerprint,
    unknown_outcome_ask,
    unverified_result,
)
from gr_notebook.engine.state import RunState
from gr_notebook.errors import GrNotebookError
from gr_notebook.events import ToolIntentEvent, ToolRecoveredEvent
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
    reply: str | None = None,
    recovery: Mapping[str, CallRecord] | None = None,
) -> TurnEffects:
    """Run a turn's tool calls in order; ``too_deep`` are the ids of calls whose input was
    cut for nesting too deeply (they are refused). ``reply``: the blob of the model's reply
    that made them, for their intent records; ``recovery``: in a resume's rebuilt turn, the
    killed run's record of the calls that began (:mod:`gr_notebook.engine.side_effects`)."""
    turn = _Turn(state, registry, too_deep, reply=reply, recovery=recovery)
    results = tuple([await turn.call(use, index) for index, use in enumerate(uses)])
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

    def __init__(
        self,
        state: RunState,
        registry: ToolRegistry,
        too_deep: frozenset[str],
        *,
        reply: str | None = None,
        recovery: Mapping[str, CallRecord] | None = None,
    ):
        self.state, self.registry, self.too_deep = state, registry, too_deep
        self.reply, self.recovery = reply, recovery
        self.step = GuardedStep(state)
        self.effects = _Effects()

    async def call(self, use: ToolUseBlock, index: int) -> ToolResultBlock:
        state, effects = self.state, self.effects
        started = time.perf_counter()
        tool: Tool | None = None
        if effects.job is not None:
            output = ToolOutput(
                f"Not run: the job was already completed by {effects.job_tool}.", True
            )
        else:
            tool, use, output = await self._run(use, index)
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

    async def _run(
        self, use: ToolUseBlock, index: int
    ) -> tuple[Tool | None, ToolUseBlock, ToolOutput]:
        """The call through the guardrails and, when they let it, the tool: the tool, the
        call as it ran (a person may have edited it) and its output. A call of a cut turn
        that began before the kill is judged by its record instead (:meth:`_recover`)."""
        if use.id in self.too_deep:
            return None, use, ToolOutput(too_deep_message(use.name), True)
        registry = self.registry
        tool, problem = registry.check_call(use.name, use.input)
        if problem is not None or tool is None:
            return tool, use, problem or ToolOutput("Unknown tool.", True)
        record = self.recovery.get(use.id) if self.recovery is not None else None
        if record is not None:
            return await self._recover(tool, use, index, record)
        verdict = await self.step.before(
            GuardedCall(tool, use.input, use.id), schema=self._schema(use)
        )
        return await self._execute(tool, use, index, verdict)

    def _schema(self, use: ToolUseBlock) -> SchemaCheck:
        registry = self.registry
        return lambda edited: _problem(registry.check_call(use.name, edited)[1])

    async def _execute(
        self, tool: Tool, use: ToolUseBlock, index: int, verdict: Allowed | Refused
    ) -> tuple[Tool | None, ToolUseBlock, ToolOutput]:
        """What the guardrails let run: the stop check for a tool that ends the job, the
        intent record, the handler, and what its output asks of the run."""
        state = self.state
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
        key = self.step.intent(
            GuardedCall(tool, use.input, use.id),
            index=index,
            approved=verdict.approved,
            edited=edited,
            reply=self.reply,
        )
        try:
            output = await self.registry.invoke(tool, state.tool_context(key=key), use.input)
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

    # -- a call the killed run began (decision 407) ---------------------------------------------

    async def _recover(
        self, tool: Tool, use: ToolUseBlock, index: int, record: CallRecord
    ) -> tuple[Tool | None, ToolUseBlock, ToolOutput]:
        """A call of the cut turn that began before the kill: run again when that is safe,
        else its recorded result, or what its probe or a person says, or unverified."""
        intent = record.intent
        if record.whole_input is not None:
            use = ToolUseBlock(use.id, use.name, dict(record.whole_input))
        effect = "once" if "once" in (tool.effect, intent.effect) else tool.effect
        if record.done is not None and (effect == "once" or record.unverified):
            return tool, use, self._recorded(tool, use, record)
        if effect != "once":
            self._recovered(intent, effect, "rerun", "effect", f"{effect}: safe to run again")
            return await self._rerun(tool, use, index, intent)
        probed = await self._probe(tool, use, intent)
        if probed is True:
            self._recovered(intent, effect, "happened", "probe", "its probe found the effect")
            output = ToolOutput(happened_result(use.name))
            return tool, use, self._as_ran(tool, use, intent, output)
        if probed is False:
            self._recovered(intent, effect, "rerun", "probe", "its probe found no effect")
            return await self._rerun(tool, use, index, intent)
        if self.state.approvals.who() != "nobody":
            answer = await self.state.approvals.decide(
                unknown_outcome_ask(use.name, intent.turn),
                use.name,
                use.input,
                tool_use_id=use.id,
                check=self._schema(use),
            )
            if answer.message is None:
                why = "a person approved running it again"
                self._recovered(intent, effect, "rerun", "person", why)
                if answer.edited:
                    use = ToolUseBlock(use.id, use.name, dict(answer.input))
                return await self._rerun(tool, use, index, intent, edited=answer.edited)
            by, why = "person", f"{probed}; a person chose not to run it again"
        else:
            by, why = ("effect" if tool.probe is None else "probe"), probed
        self._recovered(intent, effect, "unverified", by, why)
        text = unverified_result(use.name, intent.turn)
        output = ToolOutput(text, True, Directive(text, "resume", "do_first"))
        return tool, use, self._as_ran(tool, use, intent, output, ran=False)

    def _recorded(self, tool: Tool, use: ToolUseBlock, record: CallRecord) -> ToolOutput:
        """An ended call (or one an earlier resume left unverified): its result as recorded."""
        intent = record.intent
        verdict, by = ("unverified", "record") if record.unverified else ("recorded", "record")
        why = (
            "an earlier resume left it unverified"
            if record.unverified
            else "it ended before the interruption; its recorded result stands"
        )
        self._recovered(intent, intent.effect, verdict, by, why)
        assert record.done is not None
        output = ToolOutput(record.result, record.done.is_error)
        return self._as_ran(tool, use, intent, output, ran=not record.unverified)

    def _as_ran(
        self,
        tool: Tool,
        use: ToolUseBlock,
        intent: ToolIntentEvent,
        output: ToolOutput,
        *,
        ran: bool = True,
    ) -> ToolOutput:
        """A call not run again: its intent in this run's record too (so a resume of this
        run finds it began), and the policies taught as if it ran, when it did."""
        self.state.emit(intent)
        if ran and not output.is_error:
            self.step.ran(GuardedCall(tool, use.input, use.id), output)
        return output

    async def _rerun(
        self,
        tool: Tool,
        use: ToolUseBlock,
        index: int,
        intent: ToolIntentEvent,
        *,
        edited: bool = False,
    ) -> tuple[Tool | None, ToolUseBlock, ToolOutput]:
        """Run a cut call again, through the live policies: a person's approval from before
        the kill holds only while the policies that govern the tool are the same."""
        call = GuardedCall(tool, use.input, use.id)
        verdict = self.step.check(call)
        if isinstance(verdict, Held):
            fingerprint = policies_fingerprint(
                (b.key, b.policy) for b in self.state.guards.spec.by_tool.get(tool.name, ())
            )
            if intent.approved_under is not None and intent.approved_under == fingerprint:
                verdict = Allowed(call, approved=True)
            else:
                verdict = await self.step.resolve(verdict, schema=self._schema(use))
        if isinstance(verdict, Allowed) and edited and not verdict.edited:
            verdict = replace(verdict, edited=True)
        return await self._execute(tool, use, index, verdict)

    async def _probe(self, tool: Tool, use: ToolUseBlock, intent: ToolIntentEvent) -> bool | str:
        """The probe's answer (True: it happened; False: it did not), or why there is none."""
        if tool.probe is None:
            return f"{tool.name} has no probe"
        try:
            answer: object = tool.probe(self.state.tool_context(key=intent.key), use.input)
            if inspect.isawaitable(answer):
                answer = await answer
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"its probe failed ({type(exc).__name__}: {exc})"
        if answer is True or answer is False:
            return answer
        return f"its probe answered {type(answer).__name__}, not True or False"

    def _recovered(
        self, intent: ToolIntentEvent, effect: str, verdict: str, by: str, reason: str
    ) -> None:
        self.state.emit(
            ToolRecoveredEvent(
                tool=intent.tool,
                tool_use_id=intent.tool_use_id,
                key=intent.key,
                effect=effect,  # type: ignore[arg-type]
                verdict=verdict,  # type: ignore[arg-type]
                by=by,  # type: ignore[arg-type]
                reason=reason,
            )
        )

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
