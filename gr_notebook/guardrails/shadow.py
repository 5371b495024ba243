"""Shadow guardrails: they decide on every call, stop and check as live ones would, and
nothing they decide reaches the run.

``gr.Agent(shadow=[...])`` takes any guardrail: a tool policy, a feedback provider's
configuration, a completion checker, an intervention configuration. The live guardrails
(:class:`~gr_notebook.guardrails.runtime.Guardrails`) tee every call, stop and check to their
shadow, which sees read-only copies (:mod:`gr_notebook.guardrails.readonly`) and records its
decisions as the usual events stamped ``mode="shadow"``. Its answers are dropped: no denial,
feedback text, refused stop or intervention reaches the model, so the run makes the same
requests and writes the same files as without it. A shadow that raises (one that tries to
change the call among them) is recorded as an ``error`` event whose source starts
``shadow:``, and the run goes on. (The idea is AWS Bedrock AgentCore's
``LOG_ONLY`` policies: try a guardrail on real traffic before you turn it on.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from gr_notebook.errors import ConfigError, RunError
from gr_notebook.events import (
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    PolicyDecisionEvent,
)
from gr_notebook.guardrails.completion import CheckerLike, StopKind
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import (
    InterventionConfig,
    InterventionEngine,
    ProgressTracker,
)
from gr_notebook.guardrails.policy import PolicyBinding, PolicyDecision, ToolPolicy
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.spec import DEFAULT_MAX_REFUSALS, GuardrailSpec, checked_policy
from gr_notebook.guardrails.view import RelayView, failure
from gr_notebook.harness import GR_LOOP, Harness

if TYPE_CHECKING:
    from gr_notebook.guardrails.view import RunView
    from gr_notebook.tools.base import Tool, ToolOutput

__all__ = ["SHADOW_KINDS", "Shadow", "ShadowSpec", "ShadowView", "run_guardrails"]

SHADOW_KINDS = (
    "a tool policy (e.g. gr.ReadBeforeWritePolicy()), a gr.FeedbackProviderConfig(...), a "
    "completion checker (an object with check(context), or a function) or a "
    "gr.InterventionConfig(...)"
)
"""What ``shadow=`` takes, in the words of its error."""

_DECISIONS = (PolicyDecisionEvent, FeedbackEvent, CompletionCheckEvent, InterventionCheckEvent)
T = TypeVar("T")


@dataclass(frozen=True)
class ShadowSpec:
    """An agent's shadow guardrails, sorted by kind and validated once."""

    policies: tuple[ToolPolicy, ...] = ()
    feedback: tuple[FeedbackProviderConfig, ...] = ()
    checker: CheckerLike | None = None
    interventions: InterventionConfig | None = None
    max_refusals: int = DEFAULT_MAX_REFUSALS
    guardrails: GuardrailSpec = field(default_factory=GuardrailSpec)
    """The policies, feedback and checker as a run's guardrails hold them, bound to tools."""

    @classmethod
    def build(
        cls,
        shadow: Iterable[object],
        *,
        tools: Sequence[Tool],
        max_refusals: int = DEFAULT_MAX_REFUSALS,
        check_names: bool = True,
    ) -> ShadowSpec:
        """Sort ``shadow`` by kind: one ConfigError for anything that is no guardrail, a
        class given for an instance, or a second checker or intervention configuration."""
        if isinstance(shadow, (str, bytes)) or not isinstance(shadow, Iterable):
            raise ConfigError(
                f"shadow takes a list of guardrails, e.g. shadow=[gr.ReadBeforeWritePolicy()], "
                f"not {type(shadow).__name__}"
            )
        policies: list[ToolPolicy] = []
        feedback: list[FeedbackProviderConfig] = []
        checkers: list[CheckerLike] = []
        interventions: list[InterventionConfig] = []
        for item in shadow:
            if isinstance(item, FeedbackProviderConfig):
                feedback.append(item)
            elif isinstance(item, InterventionConfig):
                interventions.append(item)
            elif isinstance(item, type):
                name = item.__name__
                raise ConfigError(
                    f"shadow got the class {name}; pass an instance, e.g. {name}(...). "
                    f"shadow takes {SHADOW_KINDS}"
                )
            elif all(hasattr(item, m) for m in ("name", "check", "on_result")):
                policies.append(checked_policy(item))
            elif callable(getattr(item, "check", None)) or callable(item):
                checkers.append(item)  # type: ignore[arg-type]
            elif hasattr(item, "provide"):
                raise ConfigError(
                    f"shadow got the feedback provider {type(item).__name__} alone; give it "
                    "a trigger: gr.FeedbackProviderConfig(provider=..., "
                    "trigger=gr.FeedbackTrigger(every_n_calls=5))"
                )
            else:
                raise ConfigError(
                    f"shadow takes {SHADOW_KINDS}; got {type(item).__name__} ({item!r:.60})"
                )
        if len(checkers) > 1 or len(interventions) > 1:
            what = "completion checkers" if len(checkers) > 1 else "InterventionConfigs"
            raise ConfigError(
                f"shadow got {len(checkers) if len(checkers) > 1 else len(interventions)} "
                f"{what}; it takes one of each (to compare several on recorded runs, replay "
                "them: gr.replay_guardrails)"
            )
        spec = cls(
            policies=tuple(policies),
            feedback=tuple(feedback),
            checker=checkers[0] if checkers else None,
            interventions=interventions[0] if interventions else None,
            max_refusals=max_refusals,
        )
        return spec.bound_to(tools, check_names=check_names)

    def bound_to(self, tools: Sequence[Tool], *, check_names: bool = True) -> ShadowSpec:
        """The same shadows, their policies governing ``tools`` (every one, as an agent-wide
        policy does)."""
        guardrails = GuardrailSpec.build(
            tools=tools,
            policies=self.policies,
            feedback_providers=self.feedback,
            checker=self.checker,
            max_refusals=self.max_refusals,
            check_names=check_names,
        )
        return replace(self, guardrails=guardrails)

    @property
    def empty(self) -> bool:
        return not (self.policies or self.feedback or self.checker or self.interventions)

    def describe(self) -> dict[str, object] | None:
        """The shadows as plain data, for the run's recorded configuration; None for none."""
        if self.empty:
            return None
        described = self.guardrails.describe()
        del described["max_refusals"]
        interventions = self.interventions
        return {**described, "interventions": interventions.describe() if interventions else None}


def run_guardrails(
    spec: GuardrailSpec,
    run: RunView,
    *,
    harness: Harness = GR_LOOP,
    shadow: ShadowSpec | None = None,
) -> Guardrails:
    """A run's live guardrails, teeing every point to its shadow ones when it has any."""
    tee = Shadow(shadow, run, harness=harness) if shadow is not None and not shadow.empty else None
    return Guardrails(spec, run, harness=harness, shadow=tee)


class ShadowView(RelayView):
    """The run as its shadow reads it: all of it, except that what the shadow records is
    stamped ``mode="shadow"`` (a failure's source starts ``shadow:``)."""

    def emit(self, event: Event) -> None:
        if isinstance(event, _DECISIONS):
            event = replace(event, mode="shadow")
        elif isinstance(event, ErrorEvent) and not event.source.startswith("shadow:"):
            event = replace(event, source=f"shadow:{event.source}")
        self.run.emit(event)


class Shadow:
    """A run's shadow guardrails: its own policy memories, trigger state, refusal streak and
    intervention tracker, fed what really happened and heard by no one. Every method
    swallows what a shadow raises, as an ``error`` event: a shadow never breaks the run."""

    def __init__(self, spec: ShadowSpec, run: RunView, *, harness: Harness = GR_LOOP) -> None:
        self.spec = spec
        self.view = ShadowView(run)
        self.guards = Guardrails(_reporting(spec.guardrails, self.view), self.view, harness=harness)
        self.interventions = (
            InterventionEngine(spec.interventions, log_prefix="[shadow, not acted on] ")
            if spec.interventions is not None
            else None
        )

    def rebind(self, tools: Sequence[Tool]) -> None:
        """Govern other tools (a Claude Agent SDK session named its own); memories stay."""
        self.spec = self.spec.bound_to(tools)
        self.guards.spec = _reporting(self.spec.guardrails, self.view)

    # -- the points the run asks at -------------------------------------------------------------

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, turn: int, tool_use_id: str | None
    ) -> None:
        """Before a call runs (after the live policies): the shadow policies' decision."""
        if self.guards.spec.by_tool.get(tool.name):
            self._quietly(
                "policy",
                lambda: self.guards.check(tool, params, turn=turn, tool_use_id=tool_use_id),
            )

    def judge_stop(self, kind: StopKind, tentative: Any) -> None:
        """An attempt to stop that the live checker judged (or would have, had it one)."""
        if self.guards.spec.checker is not None:
            self._quietly("completion_checker", lambda: self.guards.judge_stop(kind, tentative))

    def after_success(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, turn: int
    ) -> None:
        """A call that really ran and succeeded: the shadow policies remember it."""
        if self.guards.spec.by_tool.get(tool.name):
            self._quietly(
                "policy", lambda: self.guards.after_success(tool, params, result, turn=turn)
            )

    def after_call(
        self,
        tool: str,
        params: Mapping[str, Any],
        result: str,
        *,
        is_error: bool,
        turn: int,
        observe: bool = True,
    ) -> None:
        """After every call, as the live run does: the intervention check (unless
        ``observe`` is off: told to wrap up, the run is winding down, not stuck), then the
        feedback providers."""
        engine = self.interventions
        if engine is not None and observe:
            phased = self.guards.harness.phased

            def check() -> None:
                found = engine.observe(tool, params, result, is_error=is_error)
                if found is not None:
                    self.view.emit(found.event(phased=phased))

            self._quietly("intervention", check)
        if not self.spec.feedback:  # nothing to deliver: the call is only counted
            self.guards.feedback.calls += 1
            return
        self._quietly(
            "feedback",
            lambda: self.guards.after_call(tool, params, is_error=is_error, turn=turn),
        )

    def note_work(self) -> None:
        self.guards.note_work()

    def note_reset(self) -> None:
        """The run really reset its strategy (a rewind): the shadow's grace period begins."""
        if self.interventions is not None:
            self.interventions.note_reset()

    def reset_policies(self) -> None:
        self.guards.reset_policies()

    def _quietly(self, what: str, step: Callable[[], T]) -> T | None:
        try:
            return step()
        except Exception as exc:
            self.view.emit(failure(what, exc))
            return None

    # -- snapshots ------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The shadow's state as JSON values. Its feedback's recent tool calls are left out:
        they are the live guardrails' (the same calls), kept once."""
        engine = self.interventions
        return {
            "guardrails": self.guards.snapshot(recent=False),
            "interventions": engine.to_json() if engine is not None else None,
        }

    def restore(self, snapshot: Mapping[str, Any], *, recent: Any) -> None:
        """Bring back a :meth:`snapshot`; ``recent`` are the live feedback's recent calls.
        Refused whole (RunError) when it does not fit this run's shadows."""
        try:
            guardrails = dict(snapshot["guardrails"])
            guardrails["feedback"] = {**guardrails["feedback"], "recent": recent}
            saved = snapshot["interventions"]
            if (saved is None) != (self.interventions is None):
                raise ValueError("its shadow interventions do not match this agent's")
            tracker = ProgressTracker.from_json(saved) if saved is not None else None
        except (KeyError, TypeError, ValueError) as exc:
            raise RunError(
                f"this is not a shadow snapshot of this agent ({type(exc).__name__}: {exc})"
            ) from None
        self.guards.restore(guardrails)
        if self.interventions is not None and tracker is not None:
            self.interventions.tracker = tracker


def _reporting(spec: GuardrailSpec, view: ShadowView) -> GuardrailSpec:
    """``spec`` with each policy wrapped so that a raising ``check`` is recorded as an error
    before the guardrails turn it into the denial it would be live."""
    wrapped = {b.key: PolicyBinding(b.key, _Reported(b.policy, b.key, view)) for b in spec.bindings}
    return replace(
        spec,
        bindings=tuple(wrapped[b.key] for b in spec.bindings),
        by_tool={tool: tuple(wrapped[b.key] for b in bs) for tool, bs in spec.by_tool.items()},
    )


class _Reported:
    """A shadow policy whose failures are recorded (live, a failure is only a denial); its
    other members (``name``, ``on_result``, ...) are the policy's own."""

    def __init__(self, policy: ToolPolicy, key: str, view: ShadowView) -> None:
        self.policy, self.key, self.view = policy, key, view

    def check(self, tool: Tool, params: Mapping[str, Any], *, context: Any) -> PolicyDecision:
        try:
            return self.policy.check(tool, params, context=context)
        except Exception as exc:
            self.view.emit(failure("policy", exc, policy=self.key, tool=tool.name))
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)
