"""One guarded step: what happens around a tool call and a stop, whichever host runs the model.

gr's loop (:mod:`gr_notebook.engine.tool_calls`), the Claude Agent SDK's hooks and LangChain's
middleware all call this one step, so a guardrail prototyped on gr's loop gives the same
verdict in production. Each host keeps only its translation: how it names a call, asks a
person, denies and ends.

- **Before a call** (:meth:`GuardedStep.check`, then :meth:`GuardedStep.resolve` for an ask):
  the live policies (deny > ask > allow); an ask goes to the run's approvals (the desk, then
  ``confirm=``, then nobody). An edited input goes through the tool's schema and **every live
  policy** again, and what runs is exactly the input the last request showed.
- **As a call starts** (:meth:`GuardedStep.intent`): the ``tool_intent`` record, before the
  handler runs, and the call's idempotency key (:mod:`gr_notebook.engine.side_effects`).
- **After a call** (:meth:`GuardedStep.ran`, then :meth:`GuardedStep.after`): the
  policies' ``on_result`` with the input that ran, then, for every call, the result without
  the model adapter's API key, the ``tool_call`` event, the intervention tracker (not while
  the run winds down) and the feedback providers.
- **Limits** (:meth:`GuardedStep.wrap_up`): past 80% of any hard limit, once, the order to
  wrap up, for a host without gr's todo layer (gr's loop puts it there).
- **A stop** (:meth:`GuardedStep.judge_end`): the completion checker, the refusal cap, and
  the bypass once the run was told to wrap up or a limit is spent.

Shadows are not mentioned here: the guardrails tee them (:mod:`gr_notebook.guardrails.shadow`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from gr_notebook.digests import digest_of
from gr_notebook.engine.outcome import LoopOutcome, gave_up, turn_ended
from gr_notebook.engine.side_effects import canonical_input, idempotency_key, policies_fingerprint
from gr_notebook.engine.state import RunState
from gr_notebook.eventdata import MAX_EVENT_TEXT
from gr_notebook.events import ErrorEvent, PromptInjectedEvent, ToolCallEvent, ToolIntentEvent
from gr_notebook.guardrails.approval import Approvals, denial_order, refused_edit
from gr_notebook.guardrails.feedback import Feedback
from gr_notebook.guardrails.interventions import InterventionCheck
from gr_notebook.guardrails.resources import ResourceReport
from gr_notebook.guardrails.runtime import Denial
from gr_notebook.guidance import Directive
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.workflow.prompts import directive, marker_of, wrap_up_order

__all__ = [
    "Aftermath",
    "Allowed",
    "GuardedCall",
    "GuardedStep",
    "Held",
    "Refused",
    "SchemaCheck",
]

SchemaCheck: TypeAlias = Callable[[Mapping[str, Any]], str | None]
"""The tool's schema problem with an input as the host names it, or None."""


@dataclass(frozen=True, slots=True)
class GuardedCall:
    """One tool call as the guardrails judge it: the tool and input the policies read, and
    how the host names them, which is what the record and a person see."""

    tool: Tool
    params: Mapping[str, Any]
    tool_use_id: str
    name: str = ""
    """The tool as the host names it (Claude's ``Write`` for gr's ``write_file``)."""
    shown: Mapping[str, Any] | None = None
    """The input as the host gives it (Claude's absolute paths), when not ``params``."""

    @property
    def host_name(self) -> str:
        return self.name or self.tool.name

    @property
    def host_input(self) -> Mapping[str, Any]:
        return self.params if self.shown is None else self.shown


@dataclass(frozen=True, slots=True)
class Allowed:
    """The call runs as ``call`` says: the model's, or as a person edited it."""

    call: GuardedCall
    edited: bool = False
    approved: bool = False
    """A person (or ``confirm=``) approved it: a policy had asked."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The call does not run; the model reads ``output`` as its result."""

    output: ToolOutput


@dataclass(frozen=True, slots=True)
class Held:
    """A policy asked a person about the call: it waits for :meth:`GuardedStep.resolve`."""

    call: GuardedCall
    ask: Denial


@dataclass(frozen=True, slots=True)
class Aftermath:
    """What follows a call for the model: its result as recorded (without the adapter's
    key), feedback blocks, and an intervention tier that fired (gr's loop acts on it at the
    end of the turn, a session at once)."""

    result: str
    feedback: tuple[Feedback, ...] = ()
    intervention: InterventionCheck | None = None


class GuardedStep:
    """The guardrails around a run's tool calls and stops, on any host. It keeps nothing but
    the run state, so a session holds one and gr's loop builds one a turn."""

    def __init__(self, state: RunState, *, regulated: bool | None = None) -> None:
        """``regulated``: the agent regulates itself (seed 003), so a host without gr's
        todo layer is told to wrap up at 80% of a limit (default: the run has
        self-regulation)."""
        self.state = state
        self.regulated = state.regulation is not None if regulated is None else regulated
        self._placed = (-1, 0)
        """The turn, and how many calls of it began, for a host that gives no index."""

    # -- before a call --------------------------------------------------------------------------

    def check(self, call: GuardedCall) -> Allowed | Refused | Held:
        """The live policies' verdict (the guardrails tee it to their shadows)."""
        state = self.state
        denial = state.guards.check(
            call.tool, call.params, turn=state.turn, tool_use_id=call.tool_use_id
        )
        if denial is None:
            return Allowed(call)
        if denial.needs_approval:
            return Held(call, denial)
        return Refused(_policy_denial(denial))

    async def resolve(
        self,
        held: Held,
        *,
        schema: SchemaCheck | None = None,
        reread: Callable[[Mapping[str, Any]], GuardedCall] | None = None,
        approvals: Approvals | None = None,
    ) -> Allowed | Refused:
        """A person's (or ``confirm=``'s) answer to a held call. An edit must pass the
        tool's ``schema`` and then every live policy, as the model's call did: a denial
        wins; an ask from a policy that had not asked is put to the person again, showing
        the edit. What runs is exactly the input the last request showed: an edit the
        schema refused and a person then approved does not run, and the model reads why.
        ``reread`` turns an input as the host names it into the call the policies judge."""
        state = self.state
        approvals = approvals or state.approvals
        call, ask = held.call, held.ask
        asked = set(ask.policies)
        reread = reread or (lambda edited: replace(held.call, params=edited, shown=None))
        while True:
            resolution = await approvals.decide(
                ask,
                call.host_name,
                call.host_input,
                tool_use_id=call.tool_use_id,
                check=schema or _no_schema,
            )
            if resolution.message is not None:
                text = resolution.message
                return Refused(ToolOutput(text, True, denial_order(text, ask.policy)))
            if not resolution.edited:
                return Allowed(call, edited=call is not held.call, approved=True)
            call = reread(resolution.input)
            problem = (schema or _no_schema)(call.host_input)
            if problem is not None:  # approved as shown, and the tool cannot take it
                text = refused_edit(call.host_input, problem)
                return Refused(ToolOutput(text, True, denial_order(text, ask.policy)))
            denial = state.guards.check(
                call.tool, call.params, turn=state.turn, tool_use_id=call.tool_use_id
            )
            if denial is None:
                return Allowed(call, edited=True, approved=True)
            if not denial.needs_approval:
                return Refused(_policy_denial(denial))
            if set(denial.policies) <= asked:  # the person answered these asks by editing
                return Allowed(call, edited=True, approved=True)
            asked |= set(denial.policies)
            ask = denial

    async def before(
        self, call: GuardedCall, *, schema: SchemaCheck | None = None
    ) -> Allowed | Refused:
        """:meth:`check`, then :meth:`resolve` for an ask: for a host that waits in place."""
        verdict = self.check(call)
        if isinstance(verdict, Held):
            return await self.resolve(verdict, schema=schema)
        return verdict

    # -- as a call starts -----------------------------------------------------------------------

    def intent(
        self,
        call: GuardedCall,
        *,
        index: int | None = None,
        approved: bool = False,
        edited: bool = False,
        reply: str | None = None,
    ) -> str:
        """Record that ``call`` is about to run, right before its handler starts, and return
        its idempotency key (the handler's ``ctx.key``). ``index``: its place among the
        turn's calls (default: the calls of this turn that began before it); ``approved``:
        a person let it run (the policies' fingerprint is kept, so a resume trusts the
        approval only under the same policies); ``edited``: the input is a person's edit,
        kept whole; ``reply``: the blob of the model's reply that made it."""
        state = self.state
        if index is None:
            turn, began = self._placed
            index = began if turn == state.turn else 0
        self._placed = (state.turn, index + 1)
        data = canonical_input(call.params)
        keep = state.keep
        digest = keep(data) if edited and keep is not None else digest_of(data)
        tool = call.tool
        key = idempotency_key(state.root_run_id, state.turn, index, tool.name, digest)
        under = None
        if approved:
            under = policies_fingerprint(
                (b.key, b.policy) for b in state.guards.spec.by_tool.get(tool.name, ())
            )
        state.emit(
            ToolIntentEvent(
                tool=call.host_name,
                tool_use_id=call.tool_use_id,
                input=dict(call.host_input),
                input_hash=digest,
                key=key,
                effect=tool.effect,
                index=index,
                approved_under=under,
                edited=edited,
                reply=reply,
            )
        )
        return key

    # -- after a call ---------------------------------------------------------------------------

    def ran(self, call: GuardedCall, output: ToolOutput) -> None:
        """A call that ran: the policies' ``on_result`` with the input that ran, when it
        succeeded (a failed call teaches them nothing). Before what the call asks of the
        run (a reset of the policies' memory forgets this call too)."""
        if not output.is_error:
            state = self.state
            state.guards.after_success(call.tool, call.params, output, turn=state.turn)

    def failed(self, name: str, exc: Exception) -> ToolOutput:
        """A tool that raised: recorded, and an error result the model can act on (the run
        goes on, on every host)."""
        self.state.emit(
            ErrorEvent(source="tool", tool=name, error_type=type(exc).__name__, message=str(exc))
        )
        return ToolOutput(
            f"Tool '{name}' failed: {type(exc).__name__}: {exc}. The workspace is unchanged "
            "unless the tool says otherwise; try again differently.",
            True,
        )

    def after(self, call: GuardedCall, output: ToolOutput, *, duration_s: float) -> Aftermath:
        """Everything that follows a call, allowed or not, in this order: the result without
        the model adapter's API key (what they all read: a tool may have read the key), the
        ``tool_call`` event, the intervention tracker (not while the run winds down: told to
        wrap up, it is finishing, not stuck) and the feedback providers."""
        state = self.state
        result = state.redact_key(output.content)
        whole = None  # a once call's result is what a resume gives instead of running it again
        if call.tool.effect == "once" and len(result) > MAX_EVENT_TEXT and state.keep is not None:
            whole = state.keep(result.encode("utf-8", "surrogatepass"))
        state.emit(
            ToolCallEvent(
                tool=call.host_name,
                tool_use_id=call.tool_use_id,
                input=dict(call.host_input),
                is_error=output.is_error,
                result=result,
                duration_s=duration_s,
                directive=None if output.directive is None else state.guidance(output.directive),
                result_digest=whole,
            )
        )
        winding_down = state.winding_down
        fired = None
        if state.interventions is not None and not winding_down:
            check = state.interventions.observe(
                call.tool.name, call.params, result, is_error=output.is_error
            )
            if check is not None:
                state.emit(check.event(phased=state.guards.harness.phased))
                fired = check if check.fired else None
        blocks = state.guards.after_call(
            call.tool.name,
            call.params,
            is_error=output.is_error,
            turn=state.turn,
            result=result,
            observe=not winding_down,
        )
        return Aftermath(result, tuple(blocks), fired)

    # -- limits and stops -----------------------------------------------------------------------

    def wrap_up(self) -> str | None:
        """Past 80% of any hard limit (tokens, turns, time, cost), once: the order to finish
        now, recorded as it is sent; None otherwise. For a host without gr's todo layer,
        where the order is a message (gr's loop writes it on the todo layer instead)."""
        state = self.state
        if not self.regulated or state.wrap_up is not None:
            return None
        report = ResourceReport.of(state.usage(), None)
        if not report.wrap_up:
            return None
        state.order_wrap_up(report.recommendation)
        text = wrap_up_order(report.recommendation)
        self.told(Directive(text, "limits", "wrap_up", from_limits=True))
        return text

    def judge_end(self, final_text: str) -> LoopOutcome | str:
        """The model ended its turn: how the run ends when the completion checker lets it
        (or gives up after too many refusals), else the refusal the model reads next."""
        state = self.state
        verdict = state.guards.judge_stop("end_turn", final_text)
        if verdict.allowed:
            return turn_ended(state, verdict, final_text)
        if verdict.give_up:
            return gave_up(state, verdict)
        return state.guards.refusal(verdict)

    def told(self, order: Directive | str) -> Directive:
        """Record an order sent to the model (a refusal, a check, a wrap-up) as gr's loop
        records the prompts it injects; returns it as guidance."""
        state = self.state
        given = order if isinstance(order, Directive) else directive(order)
        state.emit(
            PromptInjectedEvent(
                text=given.text, marker=marker_of(given.text), directive=state.guidance(given)
            )
        )
        return given


def _policy_denial(denial: Denial) -> ToolOutput:
    text = denial.message()
    return ToolOutput(text, True, Directive(text, f"policy:{denial.policy}", "do_first"))


def _no_schema(_input: Mapping[str, Any]) -> str | None:
    return None
