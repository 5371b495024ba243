"""The guardrails a replay drives: the policies, feedback providers, checker and
interventions it is given (checked, with one clear error each), and what each of them reads
of the workspace, so a row can say "cannot tell" where the files are not known."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.completion import (
    CompositeChecker,
    FileOutputChecker,
    PlanBasedChecker,
    TaskCompletionChecker,
    as_checker,
)
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import InterventionConfig
from gr_notebook.guardrails.policies import ReadBeforeWritePolicy
from gr_notebook.guardrails.policy import PolicyContext, ToolPolicy
from gr_notebook.tools.base import Tool, ToolOutput

__all__ = [
    "NOTHING",
    "GuardrailSet",
    "WatchedPolicy",
    "checker_name",
    "checker_reads",
    "feedback_reads",
    "guardrail_set",
    "made_guardrail_set",
    "policy_reads",
    "provider_name",
]

KEYWORDS = ("policies", "feedback_providers", "task_completion_checker", "interventions")
"""The keyword arguments of ``replay_guardrails`` that name guardrails."""


@dataclass(frozen=True)
class GuardrailSet:
    """The guardrails one replay drives; ``names`` labels them in the result."""

    policies: tuple[ToolPolicy, ...] = ()
    feedback: tuple[FeedbackProviderConfig, ...] = ()
    checker: TaskCompletionChecker | None = None
    interventions: InterventionConfig | None = None

    @property
    def names(self) -> tuple[str, ...]:
        names = [f"policy {p.name}" for p in self.policies]
        names += [f"feedback {provider_name(c)}" for c in self.feedback]
        if self.checker is not None:
            names.append(f"checker {checker_name(self.checker)}")
        if self.interventions is not None:
            names.append("interventions")
        return tuple(names)


def guardrail_set(
    policies: object,
    feedback_providers: object,
    task_completion_checker: object,
    interventions: object,
) -> GuardrailSet:
    policy_list = _listed(policies, "policies")
    configs = _listed(feedback_providers, "feedback_providers")
    for config in configs:
        if not isinstance(config, FeedbackProviderConfig):
            raise ConfigError(
                "feedback_providers takes gr.FeedbackProviderConfig(provider=..., "
                f"trigger=gr.FeedbackTrigger(...)) items, not {type(config).__name__}"
            )
    checker = None
    if task_completion_checker is not None:
        checker = as_checker(task_completion_checker)  # type: ignore[arg-type]
    if interventions is not None and not isinstance(interventions, InterventionConfig):
        raise ConfigError(
            "interventions takes gr.InterventionConfig(...), not " + type(interventions).__name__
        )
    for policy in policy_list:
        missing = [m for m in ("name", "check", "on_result") if not hasattr(policy, m)]
        if missing or isinstance(policy, type):
            raise ConfigError(
                f"{getattr(policy, '__name__', type(policy).__name__)} is not a tool policy: "
                "policies takes instances with name, check(tool, params, *, context) and "
                "on_result(...), e.g. policies=[gr.ReadBeforeWritePolicy()]"
            )
    chosen = GuardrailSet(
        tuple(policy_list),  # type: ignore[arg-type]
        tuple(configs),  # type: ignore[arg-type]
        checker,
        interventions,
    )
    if not chosen.names:
        raise ConfigError(
            "replay_guardrails needs a guardrail to replay: policies=[...], "
            "feedback_providers=[...], task_completion_checker=... or interventions=..."
        )
    return chosen


def _listed(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError(f"{what} takes a list, e.g. {what}=[...], not {type(value).__name__}")
    return list(value)


class WatchedPolicy:
    """A policy as the guardrails ask it, keeping its last answer (or error) for the row."""

    def __init__(self, policy: ToolPolicy) -> None:
        self.policy = policy
        self.name = policy.name
        self.answer: object = None
        self.error: str | None = None

    def check(self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext) -> Any:
        self.answer, self.error = None, None
        try:
            self.answer = self.policy.check(tool, params, context=context)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            raise
        return self.answer

    def on_result(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, context: PolicyContext
    ) -> None:
        self.policy.on_result(tool, params, result, context=context)


# -- what a guardrail reads of the workspace ---------------------------------------------------

NOTHING: tuple[str, ...] = ()


def policy_reads(
    policy: object, tool: str, params: Mapping[str, Any], *, after: bool = False
) -> Sequence[str] | None:
    """The files ``policy`` reads deciding on a call of ``tool`` (``after``: recording its
    result): a tuple of paths, or None for the whole workspace (a guardrail of one's own
    that says ``reads_workspace = True``)."""
    if isinstance(policy, ReadBeforeWritePolicy):
        stamped = {*policy.write_tools, *(policy.read_tools if after else ())}
        if tool not in stamped:
            return NOTHING
        raw = next(
            (v for name in policy.path_params if isinstance(v := params.get(name), str)), None
        )
        return NOTHING if raw is None else (raw,)
    return None if getattr(policy, "reads_workspace", False) else NOTHING


def checker_reads(checker: object, plan_file: str) -> Sequence[str] | None:
    inner = getattr(checker, "function", None)
    if isinstance(checker, FileOutputChecker):
        return checker.files
    if isinstance(checker, PlanBasedChecker):
        return (plan_file,)
    if isinstance(checker, CompositeChecker):
        paths: list[str] = []
        for part in checker.checkers:
            found = checker_reads(part, plan_file)
            if found is None:
                return None
            paths += found
        return tuple(paths)
    owner = inner if inner is not None else checker
    return None if getattr(owner, "reads_workspace", False) else NOTHING


def feedback_reads(config: FeedbackProviderConfig) -> Sequence[str] | None:
    if getattr(config.provider, "reads_workspace", False):
        return None
    created = config.trigger.on_file_created
    return (created.filename,) if created is not None else NOTHING


def provider_name(config: FeedbackProviderConfig) -> str:
    return str(getattr(config.provider, "name", type(config.provider).__name__))


def checker_name(checker: object) -> str:
    inner = getattr(checker, "function", None)
    if inner is not None:
        return str(getattr(inner, "__name__", type(inner).__name__))
    return type(checker).__name__


def made_guardrail_set(make: Callable[..., object], combo: Mapping[str, Any]) -> GuardrailSet:
    """What ``make(**combo)`` builds, as a replay's guardrails; every error names the setting."""
    setting = ", ".join(f"{k}={v!r}" for k, v in combo.items())
    try:
        made = make(**combo)
    except ConfigError as exc:  # gr's own words already say what to pass
        raise ConfigError(f"the setting {setting} cannot be made: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"make({setting}) raised {type(exc).__name__}: {exc}; fix make for this setting, "
            "or leave it out of the grid"
        ) from exc
    if isinstance(made, Mapping):
        unknown = sorted(set(made) - set(KEYWORDS))
        if unknown:
            raise ConfigError(
                f"make({setting}) returned a dict with {', '.join(map(repr, unknown))}; its "
                f"keys are replay_guardrails' keyword arguments: {', '.join(KEYWORDS)}"
            )
        return guardrail_set(*(made.get(k) for k in KEYWORDS))
    items = list(made) if isinstance(made, (list, tuple)) else [made]
    sorted_: dict[str, list[object]] = {k: [] for k in KEYWORDS}
    for item in items:
        if isinstance(item, FeedbackProviderConfig):
            sorted_["feedback_providers"].append(item)
        elif isinstance(item, InterventionConfig):
            sorted_["interventions"].append(item)
        elif all(hasattr(item, m) for m in ("name", "check", "on_result")):
            sorted_["policies"].append(item)
        elif isinstance(item, TaskCompletionChecker) and not isinstance(item, type):
            sorted_["task_completion_checker"].append(item)
        else:
            raise ConfigError(
                f"make({setting}) returned {type(item).__name__}; return a guardrail (a policy, a "
                "FeedbackProviderConfig, a completion checker, an InterventionConfig), a list "
                "of them, or a dict of replay_guardrails keyword arguments"
            )
    if len(sorted_["task_completion_checker"]) > 1 or len(sorted_["interventions"]) > 1:
        raise ConfigError(
            f"make({setting}) returned two checkers or two InterventionConfigs; return one"
        )
    return guardrail_set(
        sorted_["policies"],
        sorted_["feedback_providers"],
        next(iter(sorted_["task_completion_checker"]), None),
        next(iter(sorted_["interventions"]), None),
    )
