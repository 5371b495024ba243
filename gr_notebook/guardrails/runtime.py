"""The guardrails of one run: policy memories, trigger state and the refusal streak.

The guarded step (:mod:`gr_notebook.engine.guarded_step`) calls it at fixed points:
:meth:`Guardrails.check` before a tool runs, :meth:`after_success` and :meth:`after_call`
after, and :meth:`judge_stop` when the model tries to stop. It reads the run through one
:class:`~gr_notebook.guardrails.view.RunView` and hands each policy and checker its own typed
view of it. Every decision is an event, and the work per tool call is O(1) in the length of
the run, so the guardrails cost the same at call 10 and call 10,000. :meth:`snapshot` is the
guardrails' part of the run state's.

The run's shadow guardrails (:mod:`gr_notebook.guardrails.shadow`) are a tee inside: every
point asks the live guardrails, then shows the shadow a read-only copy of the same call, and
returns the live answer. Nothing outside this package asks whether a run has shadows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gr_notebook.errors import RunError
from gr_notebook.events import CompletionCheckEvent, PolicyDecisionEvent
from gr_notebook.guardrails.completion import (
    PlanBasedChecker,
    StopKind,
    TaskCompletionChecker,
    TaskCompletionContext,
    TaskCompletionResult,
)
from gr_notebook.guardrails.feedback import Feedback
from gr_notebook.guardrails.policy import (
    PolicyBinding,
    PolicyContext,
    PolicyDecision,
    PolicyMemory,
    PolicyState,
    ToolPolicy,
)
from gr_notebook.guardrails.readonly import read_only
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.guardrails.triggers import FeedbackRunner
from gr_notebook.guardrails.view import failure, traceback_lines
from gr_notebook.harness import GR_LOOP, Harness
from gr_notebook.workflow.prompts import stop_refused_prompt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gr_notebook.guardrails.budget import BudgetUsage, SpentLimit
    from gr_notebook.guardrails.view import RunView
    from gr_notebook.tools.base import Tool, ToolOutput

__all__ = ["SNAPSHOT_VERSION", "Denial", "Guardrails", "StopVerdict", "Tee"]

SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Denial:
    """A call the policies did not allow: denied by ``policy``, or held by it for a person
    (``needs_approval``; see :mod:`gr_notebook.guardrails.approval`)."""

    policy: str
    reason: str
    needs_approval: bool = False
    policies: tuple[str, ...] = ()
    """The policies that asked."""
    timeout_s: float | None = None
    """The shortest ``timeout_s`` of the policies that asked, if any has one."""

    def message(self) -> str:
        return f"Denied by policy '{self.policy}': {self.reason}"


@dataclass(frozen=True, slots=True)
class StopVerdict:
    allowed: bool
    feedback: str | None = None
    bypassed: str | None = None
    """Why the check was skipped: the limit that is spent."""
    give_up: bool = False
    """Refused too many times in a row: the run ends as incomplete."""


class Tee(Protocol):
    """What the guardrails tee every point to: the shadow guardrails
    (:class:`~gr_notebook.guardrails.shadow.Shadow`), shown read-only copies and heard by no
    one (their answers are dropped)."""

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, turn: int, tool_use_id: str | None
    ) -> None: ...
    def after_success(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, turn: int
    ) -> None: ...
    def after_call(
        self,
        tool: str,
        params: Mapping[str, Any],
        result: str,
        *,
        is_error: bool,
        turn: int,
        observe: bool = True,
    ) -> None: ...
    def judge_stop(self, kind: StopKind, tentative: Any) -> None: ...
    def note_work(self) -> None: ...
    def note_reset(self) -> None: ...
    def reset_policies(self) -> None: ...
    def rebind(self, tools: Sequence[Tool]) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def restore(self, snapshot: Mapping[str, Any], *, recent: Any) -> None: ...


class Guardrails:
    def __init__(
        self,
        spec: GuardrailSpec,
        run: RunView,
        *,
        harness: Harness = GR_LOOP,
        shadow: Tee | None = None,
    ) -> None:
        """Once ``run.wrap_up`` says the run was told to wrap up, a stop is never refused,
        since refusing it would contradict that order. ``harness`` is what runs the model:
        a refused stop and the checker's feedback are worded for it. ``shadow`` are the
        guardrails on trial (built by :func:`~gr_notebook.guardrails.shadow.run_guardrails`),
        teed at every point and obeyed by nothing."""
        self.spec = spec
        self.harness = harness
        self._run = run
        self.workspace = run.workspace
        self._emit, self._clock, self._usage = run.emit, run.clock, run.usage
        self.run_id = run.run_id
        self.memories = {b.key: PolicyMemory(b.key) for b in spec.bindings}
        self.feedback = FeedbackRunner(spec.feedback, run)
        self.refusals = 0
        self._shadow = shadow

    def rebind(self, spec: GuardrailSpec, tools: Sequence[Tool]) -> None:
        """Govern other tools (a session named its own, a run met its MCP servers'): the
        bindings' keys are the same, so the memories carry over; the shadow follows."""
        self.spec = spec
        if self._shadow is not None:
            self._shadow.rebind(tools)

    @property
    def calls(self) -> int:
        """Tool calls the run has made."""
        return self.feedback.calls

    def after_call(
        self,
        tool: str,
        params: Mapping[str, Any],
        *,
        is_error: bool,
        turn: int,
        result: str = "",
        observe: bool = True,
    ) -> list[Feedback]:
        """Count the call and deliver the feedback it triggers (see :class:`FeedbackRunner`).
        The shadow's intervention tracker watches the call too, unless ``observe`` is off
        (told to wrap up, the run is winding down, not stuck)."""
        blocks = self.feedback.after_call(tool, params, is_error=is_error, turn=turn)
        if self._shadow is not None:
            self._shadow.after_call(
                tool, read_only(params), result, is_error=is_error, turn=turn, observe=observe
            )
        return blocks

    # -- policies ---------------------------------------------------------------------------

    def _check(
        self, tool: Tool, params: Mapping[str, Any], *, turn: int, tool_use_id: str | None
    ) -> Denial | None:
        bindings = self.spec.by_tool.get(tool.name)
        if not bindings:
            return None
        now, plan_file = self._clock(), self._run.plan_file
        asks: list[tuple[str, PolicyDecision, ToolPolicy]] = []
        for binding in bindings:
            context = PolicyContext(
                self.workspace, self.memories[binding.key], turn, self.calls, now, plan_file
            )
            decision, raised = _ask(binding.policy, tool, params, context)
            if decision.needs_approval:
                asks.append((binding.key, decision, binding.policy))
            elif not decision.allowed:
                denial = Denial(binding.key, decision.reason or "denied")
                self._decided(tool, denial, bindings, tool_use_id, raised)
                return denial
        held = _held(asks) if asks else None
        self._decided(tool, held, bindings, tool_use_id)
        return held

    def check(
        self,
        tool: Tool,
        params: Mapping[str, Any],
        *,
        turn: int,
        tool_use_id: str | None = None,
    ) -> Denial | None:
        """Ask every policy that governs ``tool``: the first denial wins, then an ask (the
        call waits for a person), then allow. Fail-closed: a policy that raises, or answers
        with something other than a decision, denies. The shadow is asked after, about a
        read-only copy."""
        denial = self._check(tool, params, turn=turn, tool_use_id=tool_use_id)
        if self._shadow is not None:
            self._shadow.check(tool, read_only(params), turn=turn, tool_use_id=tool_use_id)
        return denial

    def _decided(
        self,
        tool: Tool,
        denial: Denial | None,
        bindings: tuple[PolicyBinding, ...],
        tool_use_id: str | None,
        raised: Exception | None = None,
    ) -> None:
        self._emit(
            PolicyDecisionEvent(
                tool=tool.name,
                allowed=denial is None,
                policy=None if denial is None else denial.policy,
                reason=None if denial is None else denial.reason,
                policies=[b.key for b in bindings],
                tool_use_id=tool_use_id,
                needs_approval=True if denial is not None and denial.needs_approval else None,
                traceback=None if raised is None else traceback_lines(raised),
            )
        )

    def after_success(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, turn: int
    ) -> None:
        """A call that ran and succeeded, with the input that ran: each policy's
        ``on_result`` (then the shadow's, with read-only copies)."""
        self._on_result(tool, params, result, turn=turn)
        if self._shadow is not None:
            self._shadow.after_success(tool, read_only(params), read_only(result), turn=turn)

    def _on_result(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, turn: int
    ) -> None:
        bindings = self.spec.by_tool.get(tool.name)
        if not bindings:
            return
        now, plan_file = self._clock(), self._run.plan_file
        for binding in bindings:
            context = PolicyContext(
                self.workspace, self.memories[binding.key], turn, self.calls, now, plan_file
            )
            try:
                binding.policy.on_result(tool, params, result, context=context)
            except Exception as exc:
                self._emit(failure("policy", exc, policy=binding.key, tool=tool.name))

    def policy_state(self, name: str) -> PolicyState:
        try:
            return self.memories[name].state
        except KeyError:
            known = ", ".join(self.memories) or "none"
            raise RunError(f"no policy named {name!r} in this run; its policies: {known}") from None

    def reset_policies(self) -> None:
        for memory in self.memories.values():
            memory.reset()
        if self._shadow is not None:
            self._shadow.reset_policies()

    def note_reset(self) -> None:
        """The run really reset its strategy (a rewind): the shadow's interventions grant
        their grace period, as the live ones do."""
        if self._shadow is not None:
            self._shadow.note_reset()

    # -- task completion --------------------------------------------------------------------

    def judge_stop(self, kind: StopKind, tentative: Any) -> StopVerdict:
        """Ask the checker whether the run may stop; every answer is an event. The shadow's
        checker judges a read-only copy of the same stop."""
        verdict = self._judge_stop(kind, tentative)
        if self._shadow is not None:
            self._shadow.judge_stop(kind, read_only(tentative))
        return verdict

    def _judge_stop(self, kind: StopKind, tentative: Any) -> StopVerdict:
        checker = self.spec.checker
        if checker is None:
            return StopVerdict(True)
        usage = self._usage()
        name = type(checker).__name__
        spent = self.pressing(usage)
        if spent:
            self._emit(
                CompletionCheckEvent(
                    stop=kind,
                    checker=name,
                    complete=None,
                    bypassed=spent,
                    feedback=None,
                    refusals=self.refusals,
                )
            )
            return StopVerdict(True, bypassed=spent)
        result = self._ask(checker, kind, tentative)
        if result.complete:
            self.refusals = 0
        else:
            self.refusals += 1
        give_up = not result.complete and self.refusals >= self.spec.max_refusals
        self._emit(
            CompletionCheckEvent(
                stop=kind,
                checker=name,
                complete=result.complete,
                bypassed=None,
                feedback=result.feedback,
                refusals=self.refusals,
                give_up=give_up,
            )
        )
        return StopVerdict(result.complete, result.feedback, give_up=give_up)

    def refusal(self, verdict: StopVerdict) -> str:
        """What the model is told when its stop is refused."""
        return stop_refused_prompt(
            verdict.feedback,
            refusals=self.refusals,
            limit=self.spec.max_refusals,
            harness=self.harness,
        )

    def pressing(self, usage: BudgetUsage | None = None) -> str | None:
        """Why a hard limit lets a stop through unchecked: a spent limit, or a standing
        order to wrap up; None while the limits have room."""
        spent = (usage or self._usage()).exhausted
        if not spent and (order := self._run.wrap_up):
            spent = f"the run was told to wrap up ({order})"
        return spent

    def pressing_limit(self, usage: BudgetUsage | None = None) -> SpentLimit | None:
        """The limit behind :meth:`pressing`, as a value: the spent one, or under a wrap-up
        order the one nearest to being spent."""
        usage = usage or self._usage()
        spent = usage.spent
        if spent is None and self._run.wrap_up:
            return usage.nearest()
        return spent

    def work_left(self, kind: StopKind, tentative: Any) -> str | None:
        """What is unfinished, for the status of a stop the limits let through unchecked;
        None when the job is done. The agent's checker judges, or without one the plan and
        todo list (:class:`PlanBasedChecker`, where no plan is not work left: nothing judged
        such a run, and it ends ``ended``). Nothing is refused and no check is recorded:
        this only keeps an unfinished job from being reported as a success."""
        result = self._ask(
            self.spec.checker or PlanBasedChecker(require_plan=False), kind, tentative
        )
        if result.complete:
            return None
        return (result.feedback or "").replace("<blocker>", "").strip().split("\n")[0] or (
            "the completion check found the job unfinished"
        )

    def _ask(
        self, checker: TaskCompletionChecker, kind: StopKind, tentative: Any
    ) -> TaskCompletionResult:
        run = self._run
        context = TaskCompletionContext(
            workspace=self.workspace,
            todos=run.todos,
            plan=run.plan(),
            tentative_output=tentative,
            stop_reason=kind,
            budget=self._usage(),
            run_id=self.run_id,
            harness=self.harness,
            plan_file=run.plan_file,
        )
        try:
            result = checker.check(context)
            if not isinstance(result, TaskCompletionResult):
                raise TypeError(f"check() returned {type(result).__name__}, not a result")
        except Exception as exc:  # fail-closed, like a policy: an unverified stop is refused
            self._emit(failure("completion_checker", exc))
            result = TaskCompletionResult.incomplete(
                f"The completion check failed ({type(exc).__name__}: {exc}), so the stop "
                "could not be confirmed."
            )
        return result

    def note_work(self) -> None:
        """The model did something other than try to stop: the refusal streak is broken."""
        self.refusals = 0
        if self._shadow is not None:
            self._shadow.note_work()

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self, *, recent: bool = True) -> dict[str, Any]:
        """The guardrails' state as JSON values, for :meth:`restore`; ``recent=False``
        leaves the feedback's recent tool calls out (a checkpoint keeps them by hash)."""
        return {
            "version": SNAPSHOT_VERSION,
            "policies": {key: memory.to_json() for key, memory in self.memories.items()},
            "feedback": self.feedback.to_json(recent=recent),
            "completion": {"refusals": self.refusals},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Bring back a :meth:`snapshot`; the run is unchanged if the snapshot is refused."""
        try:
            if not isinstance(snapshot, Mapping) or snapshot.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"expected a snapshot of version {SNAPSHOT_VERSION}")
            policies = snapshot["policies"]
            if set(policies) != set(self.memories):
                raise ValueError(
                    f"its policies are {sorted(policies)}, this run's are {sorted(self.memories)}"
                )
            memories = {key: PolicyMemory(key) for key in self.memories}
            for key, memory in memories.items():
                memory.load_json(policies[key])
            apply_feedback = self.feedback.load_json(snapshot["feedback"])
            refusals = int(snapshot["completion"]["refusals"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunError(
                f"this is not a guardrail snapshot of this agent ({type(exc).__name__}: {exc}); "
                "pass what run.guardrail_state() returned"
            ) from None
        self.memories, self.refusals = memories, refusals
        apply_feedback()

    def shadow_snapshot(self) -> dict[str, Any] | None:
        """The shadow's state as JSON values (None without one), for
        :meth:`restore_shadow`; kept beside :meth:`snapshot`, which is the live state."""
        return self._shadow.snapshot() if self._shadow is not None else None

    def restore_shadow(self, snapshot: Mapping[str, Any] | None, *, recent: Any) -> None:
        """Bring back a :meth:`shadow_snapshot`; ``recent`` are the live feedback's recent
        calls. A run saved without one (or without shadows now) starts its shadow afresh."""
        if self._shadow is not None and snapshot is not None:
            self._shadow.restore(snapshot, recent=recent)


def _held(asks: list[tuple[str, PolicyDecision, ToolPolicy]]) -> Denial:
    """The policies' asks as one question: the first asker's name, every reason, and the
    shortest of their timeouts (a policy's ``timeout_s`` attribute, when it has one)."""
    reasons = list(dict.fromkeys(d.reason or "a person must approve this call" for _, d, _ in asks))
    timeouts = [
        t for _, _, p in asks if isinstance(t := getattr(p, "timeout_s", None), int | float)
    ]
    return Denial(
        asks[0][0],
        "; ".join(reasons),
        needs_approval=True,
        policies=tuple(key for key, _, _ in asks),
        timeout_s=min(timeouts) if timeouts else None,
    )


def _ask(
    policy: ToolPolicy, tool: Tool, params: Mapping[str, Any], context: PolicyContext
) -> tuple[PolicyDecision, Exception | None]:
    """The policy's decision, and what it raised; fail-closed when it raises or answers
    something else."""
    try:
        answer: object = policy.check(tool, params, context=context)
    except Exception as exc:
        reason = (
            f"the policy failed while checking ({type(exc).__name__}: {exc}), so the call "
            "was not run"
        )
        return PolicyDecision.deny(reason), exc
    if isinstance(answer, PolicyDecision):
        return answer, None
    return PolicyDecision.deny(
        f"the policy answered {type(answer).__name__}, not a PolicyDecision, so the call was "
        "not run"
    ), None
