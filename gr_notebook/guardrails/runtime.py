"""The guardrails of one run: policy memories, trigger state and the refusal streak.

The loop calls it at fixed points: :meth:`Guardrails.check` before a tool runs,
:meth:`after_success` and :meth:`after_call` after, and :meth:`judge_stop` when the model
tries to stop. Every decision is an event, and the work per tool call is O(1) in the length
of the run, so the guardrails cost the same at call 10 and call 10,000.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import RunError, WorkspaceError
from gr_notebook.guardrails.completion import (
    StopKind,
    TaskCompletionContext,
    TaskCompletionResult,
)
from gr_notebook.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    Observation,
    ToolCallRecord,
)
from gr_notebook.guardrails.paths import canonical_path, file_stamp
from gr_notebook.guardrails.policy import (
    PolicyContext,
    PolicyDecision,
    PolicyMemory,
    PolicyState,
    ToolPolicy,
)
from gr_notebook.guardrails.spec import GuardrailSpec

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget import BudgetUsage
    from gr_notebook.plan import Plan
    from gr_notebook.todos import TodoList
    from gr_notebook.tools.base import Tool, ToolOutput
    from gr_notebook.workspace import Workspace

__all__ = ["RECENT_CALLS", "SNAPSHOT_VERSION", "Denial", "Guardrails", "StopVerdict"]

RECENT_CALLS = 50
"""How many recent tool calls a feedback provider can look back on."""
SNAPSHOT_VERSION = 1
Emit = Callable[[str, Mapping[str, Any]], object]


@dataclass(frozen=True, slots=True)
class Denial:
    policy: str
    reason: str

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


@dataclass(slots=True)
class _Trigger:
    last_call: int = 0
    last_time: float = 0.0
    file_fired: bool = False


class Guardrails:
    def __init__(
        self,
        spec: GuardrailSpec,
        *,
        workspace: Workspace,
        emit: Emit,
        clock: Callable[[], float],
        usage: Callable[[], BudgetUsage],
        todos: Callable[[], TodoList],
        plan: Callable[[], Plan | None],
        prompt_name: str = "agent",
        run_id: str = "",
    ) -> None:
        self.spec = spec
        self.workspace = workspace
        self._emit, self._clock, self._usage = emit, clock, usage
        self._todos, self._plan = todos, plan
        self.prompt_name, self.run_id = prompt_name, run_id
        self.memories = {b.key: PolicyMemory(b.key) for b in spec.bindings}
        self.calls = 0
        self.recent: deque[ToolCallRecord] = deque(maxlen=RECENT_CALLS)
        self.last: Feedback | None = None
        self.last_by_provider: dict[str, Feedback] = {}
        started = clock()
        self._triggers = [_Trigger(last_time=started) for _ in spec.feedback]
        self._files = [
            c.trigger.on_file_created.filename if c.trigger.on_file_created else None
            for c in spec.feedback
        ]
        self.refusals = 0

    # -- policies ---------------------------------------------------------------------------

    def check(self, tool: Tool, params: Mapping[str, Any], *, turn: int) -> Denial | None:
        """Ask every policy that governs ``tool``; the first denial wins. Fail-closed: a
        policy that raises, or answers with something other than a decision, denies."""
        bindings = self.spec.by_tool.get(tool.name)
        if not bindings:
            return None
        now = self._clock()
        for binding in bindings:
            context = PolicyContext(
                self.workspace, self.memories[binding.key], turn, self.calls, now
            )
            decision = _ask(binding.policy, tool, params, context)
            if not decision.allowed:
                denial = Denial(binding.key, decision.reason or "denied")
                self._emit(
                    "policy_decision",
                    {
                        "tool": tool.name,
                        "allowed": False,
                        "policy": denial.policy,
                        "reason": denial.reason,
                        "policies": [b.key for b in bindings],
                    },
                )
                return denial
        self._emit(
            "policy_decision",
            {
                "tool": tool.name,
                "allowed": True,
                "policy": None,
                "reason": None,
                "policies": [b.key for b in bindings],
            },
        )
        return None

    def after_success(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, turn: int
    ) -> None:
        bindings = self.spec.by_tool.get(tool.name)
        if not bindings:
            return
        now = self._clock()
        for binding in bindings:
            context = PolicyContext(
                self.workspace, self.memories[binding.key], turn, self.calls, now
            )
            try:
                binding.policy.on_result(tool, params, result, context=context)
            except Exception as exc:
                self._emit(
                    "error",
                    {
                        "source": "policy",
                        "policy": binding.key,
                        "tool": tool.name,
                        "error_type": type(exc).__name__,
                        "message": str(exc),
                    },
                )

    def policy_state(self, name: str) -> PolicyState:
        try:
            return self.memories[name].state
        except KeyError:
            known = ", ".join(self.memories) or "none"
            raise RunError(f"no policy named {name!r} in this run; its policies: {known}") from None

    def reset_policies(self) -> None:
        for memory in self.memories.values():
            memory.reset()

    # -- feedback ---------------------------------------------------------------------------

    def after_call(
        self, tool: str, params: Mapping[str, Any], *, is_error: bool, turn: int
    ) -> list[Feedback]:
        """Count the call, then run every provider whose trigger fires; O(1) per config."""
        self.calls += 1
        now = self._clock()
        self.recent.append(ToolCallRecord(self.calls, tool, params, is_error, turn, now))
        if not self._triggers:
            return []
        blocks: list[Feedback] = []
        context: FeedbackContext | None = None
        for index, config in enumerate(self.spec.feedback):
            state, trigger = self._triggers[index], config.trigger
            fires = bool(
                (trigger.every_n_calls and self.calls - state.last_call >= trigger.every_n_calls)
                or (trigger.every_n_seconds and now - state.last_time >= trigger.every_n_seconds)
            )
            file_seen = not state.file_fired and self._file_exists(self._files[index])
            if not (fires or file_seen):
                continue
            if context is None:
                context = FeedbackContext(
                    self,
                    index,
                    workspace=self.workspace,
                    todos=self._todos(),
                    plan_source=self._plan,
                    budget=self._usage(),
                    now=now,
                )
            block = self._consult(index, context, now, tool)
            if block is _QUIET:
                continue
            state.last_call, state.last_time = self.calls, now
            state.file_fired = state.file_fired or file_seen
            if isinstance(block, Feedback):
                blocks.append(block)
        for block in blocks:  # stored after all ran: every provider saw the same history
            self.last = block
            self.last_by_provider[block.provider_name] = block
        return blocks

    def _consult(self, index: int, context: FeedbackContext, now: float, tool: str) -> object:
        """The provider's feedback, None when it ran with nothing to say, or _QUIET when
        ``should_run`` declined (the trigger stays armed)."""
        provider = self.spec.feedback[index].provider
        name = str(getattr(provider, "name", type(provider).__name__))
        try:
            if not provider.should_run(context=context):
                return _QUIET
            block = provider.provide(context=context)
            if block is None:
                return None
            if not isinstance(block, Feedback):
                raise TypeError(f"provide() returned {type(block).__name__}, not gr.Feedback")
        except Exception as exc:  # guidance is optional: report it, never break the call
            self._emit(
                "error",
                {
                    "source": "feedback",
                    "provider": name,
                    "error_type": type(exc).__name__,
                    "message": str(exc),
                },
            )
            return None
        block = dataclasses.replace(
            block,
            provider_name=block.provider_name or name,
            timestamp=datetime.fromtimestamp(now, UTC),
            call_index=self.calls,
            prompt_name=self.prompt_name,
        )
        self._emit(
            "feedback",
            {**block.to_json(), "text": block.render(), "tool": tool, "config": index},
        )
        return block

    def _file_exists(self, name: str | None) -> bool:
        if name is None:
            return False
        try:
            return file_stamp(self.workspace, canonical_path(self.workspace, name)) is not None
        except WorkspaceError:
            return False

    # -- task completion --------------------------------------------------------------------

    def judge_stop(self, kind: StopKind, tentative: Any) -> StopVerdict:
        """Ask the checker whether the run may stop; every answer is an event."""
        checker = self.spec.checker
        if checker is None:
            return StopVerdict(True)
        usage = self._usage()
        data: dict[str, Any] = {"stop": kind, "checker": type(checker).__name__}
        spent = usage.exhausted
        if spent:
            self._emit(
                "completion_check",
                {
                    **data,
                    "complete": None,
                    "bypassed": spent,
                    "feedback": None,
                    "refusals": self.refusals,
                },
            )
            return StopVerdict(True, bypassed=spent)
        context = TaskCompletionContext(
            workspace=self.workspace,
            todos=self._todos(),
            plan=self._plan(),
            tentative_output=tentative,
            stop_reason=kind,
            budget=usage,
            run_id=self.run_id,
        )
        try:
            result = checker.check(context)
            if not isinstance(result, TaskCompletionResult):
                raise TypeError(f"check() returned {type(result).__name__}, not a result")
        except Exception as exc:  # fail-closed, like a policy: an unverified stop is refused
            self._emit(
                "error",
                {
                    "source": "completion_checker",
                    "error_type": type(exc).__name__,
                    "message": str(exc),
                },
            )
            result = TaskCompletionResult.incomplete(
                f"The completion check failed ({type(exc).__name__}: {exc}), so the stop "
                "could not be confirmed."
            )
        if result.complete:
            self.refusals = 0
        else:
            self.refusals += 1
        give_up = not result.complete and self.refusals >= self.spec.max_refusals
        self._emit(
            "completion_check",
            {
                **data,
                "complete": result.complete,
                "bypassed": None,
                "feedback": result.feedback,
                "refusals": self.refusals,
                "give_up": give_up,
            },
        )
        return StopVerdict(result.complete, result.feedback, give_up=give_up)

    def note_work(self) -> None:
        """The model did something other than try to stop: the refusal streak is broken."""
        self.refusals = 0

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "policies": {key: memory.to_json() for key, memory in self.memories.items()},
            "feedback": {
                "calls": self.calls,
                "triggers": [
                    {
                        "provider": str(c.provider.name),
                        "last_call": t.last_call,
                        "last_time": t.last_time,
                        "file_fired": t.file_fired,
                    }
                    for c, t in zip(self.spec.feedback, self._triggers, strict=True)
                ],
                "last": self.last.to_json() if self.last else None,
                "last_by_provider": {k: f.to_json() for k, f in self.last_by_provider.items()},
                "recent": [dataclasses.asdict(r) for r in self.recent],
            },
            "completion": {"refusals": self.refusals},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Bring back a :meth:`snapshot`; the run is unchanged if the snapshot is refused."""
        try:
            staged = self._staged(snapshot)
        except (KeyError, TypeError, ValueError) as exc:
            raise RunError(
                f"this is not a guardrail snapshot of this agent ({type(exc).__name__}: {exc}); "
                "pass what run.snapshot() returned"
            ) from None
        memories, calls, triggers, last, by_provider, recent, refusals = staged
        self.memories, self.calls, self._triggers = memories, calls, triggers
        self.last, self.last_by_provider, self.refusals = last, by_provider, refusals
        self.recent = deque(recent, maxlen=RECENT_CALLS)

    def _staged(self, snapshot: Mapping[str, Any]) -> tuple[Any, ...]:
        if not isinstance(snapshot, Mapping) or snapshot.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"expected a snapshot of version {SNAPSHOT_VERSION}")
        policies = snapshot["policies"]
        if set(policies) != set(self.memories):
            raise ValueError(
                f"its policies are {sorted(policies)}, this run's are {sorted(self.memories)}"
            )
        memories = {}
        for key in self.memories:
            memories[key] = PolicyMemory(key)
            memories[key].load_json(policies[key])
        feedback = snapshot["feedback"]
        saved = feedback["triggers"]
        if len(saved) != len(self.spec.feedback):
            raise ValueError(
                f"it has {len(saved)} feedback triggers, this run has {len(self.spec.feedback)}"
            )
        triggers = [
            _Trigger(int(t["last_call"]), float(t["last_time"]), bool(t["file_fired"]))
            for t in saved
        ]
        last = _feedback_of(feedback["last"]) if feedback["last"] else None
        by_provider = {str(k): _feedback_of(v) for k, v in feedback["last_by_provider"].items()}
        recent = [ToolCallRecord(**r) for r in feedback["recent"]]
        return (
            memories,
            int(feedback["calls"]),
            triggers,
            last,
            by_provider,
            recent,
            int(snapshot["completion"]["refusals"]),
        )


_QUIET = object()


def _ask(
    policy: ToolPolicy, tool: Tool, params: Mapping[str, Any], context: PolicyContext
) -> PolicyDecision:
    """The policy's decision; fail-closed when it raises or answers something else."""
    try:
        answer: object = policy.check(tool, params, context=context)
    except Exception as exc:
        return PolicyDecision.deny(
            f"the policy failed while checking ({type(exc).__name__}: {exc}), so the call "
            "was not run"
        )
    if isinstance(answer, PolicyDecision):
        return answer
    return PolicyDecision.deny(
        f"the policy answered {type(answer).__name__}, not a PolicyDecision, so the call was "
        "not run"
    )


def _feedback_of(data: Mapping[str, Any]) -> Feedback:
    stamp = data.get("timestamp")
    return Feedback(
        provider_name=data["provider"],
        summary=data["summary"],
        severity=data["severity"],
        observations=tuple(
            Observation(o["category"], o["description"], o.get("evidence"))
            for o in data["observations"]
        ),
        suggestions=tuple(data["suggestions"]),
        call_index=int(data["call_index"]),
        timestamp=datetime.fromtimestamp(stamp, UTC) if stamp is not None else None,
        prompt_name=data.get("prompt_name", ""),
    )
