"""The guardrails of an agent definition, validated once when the agent is built.

Policies are resolved per tool here (agent-wide ones govern every tool, a toolset's govern
its own tools), so a tool call finds its policies with one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.approval import ApprovalPolicy
from gr_notebook.guardrails.completion import CheckerLike, TaskCompletionChecker, as_checker
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.policies import ReadBeforeWritePolicy, SequentialDependencyPolicy
from gr_notebook.guardrails.policy import PolicyBinding, ToolPolicy, bind_policies
from gr_notebook.tools.base import Tool
from gr_notebook.tools.toolset import Toolset
from gr_notebook.validation import whole_number

__all__ = ["DEFAULT_MAX_REFUSALS", "GuardrailSpec", "checked_policy"]

DEFAULT_MAX_REFUSALS = 8


@dataclass(frozen=True)
class GuardrailSpec:
    bindings: tuple[PolicyBinding, ...] = ()
    by_tool: Mapping[str, tuple[PolicyBinding, ...]] = field(default_factory=dict)
    feedback: tuple[FeedbackProviderConfig, ...] = ()
    checker: TaskCompletionChecker | None = None
    max_refusals: int = DEFAULT_MAX_REFUSALS
    agent_wide: tuple[PolicyBinding, ...] = ()
    """The policies that govern every tool, those a run adds when it starts too."""

    @classmethod
    def build(
        cls,
        *,
        tools: Sequence[Tool],
        toolsets: Iterable[Tool | Toolset] = (),
        policies: Iterable[ToolPolicy] = (),
        feedback_providers: Iterable[FeedbackProviderConfig] = (),
        checker: CheckerLike | None = None,
        max_refusals: int = DEFAULT_MAX_REFUSALS,
        check_names: bool = True,
    ) -> GuardrailSpec:
        """``check_names=False`` leaves the check of the tools policies name for later
        (:meth:`check_tool_names`): an agent whose tools live in another runtime (a
        LangChain app, a Claude Agent SDK session) learns them only when a bridge binds it."""
        agent_wide = [checked_policy(p) for p in _items(policies, "policies")]
        scoped: list[tuple[ToolPolicy, tuple[str, ...]]] = []
        for item in toolsets:
            if isinstance(item, Toolset):
                names = tuple(t.name for t in item.tools)
                scoped += [(checked_policy(p), names) for p in item.policies]
        bound = bind_policies([*agent_wide, *(p for p, _ in scoped)])
        if check_names:
            _check_names(bound.values(), tools)
        by_tool: dict[str, list[PolicyBinding]] = {}
        for tool in tools:
            chosen = [bound[id(p)] for p in agent_wide]
            chosen += [bound[id(p)] for p, names in scoped if tool.name in names]
            unique = list({id(b): b for b in chosen}.values())
            if unique:
                by_tool[tool.name] = unique
        configs: list[FeedbackProviderConfig] = []
        for config in _items(feedback_providers, "feedback_providers"):
            if not isinstance(config, FeedbackProviderConfig):
                raise ConfigError(
                    "feedback_providers takes gr.FeedbackProviderConfig(provider=..., "
                    f"trigger=gr.FeedbackTrigger(...)) items, not {type(config).__name__}"
                )
            configs.append(config)
        whole_number(max_refusals, "max_refusals")
        return cls(
            bindings=tuple(bound.values()),
            by_tool={name: tuple(b) for name, b in by_tool.items()},
            feedback=tuple(configs),
            checker=None if checker is None else as_checker(checker),
            max_refusals=max_refusals,
            agent_wide=tuple(bound[id(p)] for p in agent_wide),
        )

    def with_tools(self, added: Sequence[Tool], *, known: Iterable[Tool]) -> GuardrailSpec:
        """These guardrails once a run has the tools it learnt as it started (``added``, an
        MCP server's): the agent-wide policies govern them too, and the tools every policy
        names are checked against all the run's tools (``known`` and ``added``)."""
        self.check_tool_names([*known, *added])
        if not self.agent_wide or not added:
            return self
        by_tool = dict(self.by_tool)
        for tool in added:
            by_tool[tool.name] = self.agent_wide
        return replace(self, by_tool=by_tool)

    def check_tool_names(self, tools: Iterable[Tool]) -> None:
        """A ConfigError if a built-in policy names a tool not among ``tools``."""
        _check_names(self.bindings, tools)

    def describe(self) -> dict[str, object]:
        """The guardrails as plain data, for the run's recorded configuration."""
        return {
            "policies": [b.key for b in self.bindings],
            "feedback_providers": [str(c.provider.name) for c in self.feedback],
            "task_completion_checker": type(self.checker).__name__ if self.checker else None,
            "max_refusals": self.max_refusals,
        }


def _items(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(f"{what} takes a list, e.g. {what}=[...], not {type(value).__name__}")
    return list(value)


def checked_policy(policy: object) -> ToolPolicy:
    """``policy`` if it is a tool policy (an instance), else the ConfigError that says why."""
    missing = [m for m in ("name", "check", "on_result") if not hasattr(policy, m)]
    if missing or isinstance(policy, type):
        hint = " (pass an instance, not the class)" if isinstance(policy, type) else ""
        raise ConfigError(
            f"{getattr(policy, '__name__', type(policy).__name__)} is not a tool policy{hint}: "
            f"a policy has name, check(tool, params, *, context) and on_result(...)"
            + (f"; it lacks {', '.join(missing)}" if missing and not hint else "")
        )
    return policy  # type: ignore[return-value]


def _check_names(bindings: Iterable[PolicyBinding], tools: Iterable[Tool]) -> None:
    known = {t.name for t in tools}
    for binding in bindings:
        _check_tool_names(binding.policy, known)


def _check_tool_names(policy: ToolPolicy, known: set[str]) -> None:
    """A built-in policy that names a tool the agent does not have is a typo, caught now."""
    names: set[str] = set()
    if isinstance(policy, SequentialDependencyPolicy):
        for tool, needs in policy.dependencies.items():
            names |= {tool, *needs}
    elif isinstance(policy, ReadBeforeWritePolicy):
        names |= {*policy.read_tools, *policy.write_tools}
    elif isinstance(policy, ApprovalPolicy):
        names |= set(policy.tools)
    unknown = sorted(names - known)
    if unknown and isinstance(policy, SequentialDependencyPolicy | ApprovalPolicy):
        raise ConfigError(
            f"policy {policy.name!r} names tools this agent does not have: "
            f"{', '.join(unknown)}. Its tools are: {', '.join(sorted(known))}"
        )
    if unknown and isinstance(policy, ReadBeforeWritePolicy) and names == set(unknown):
        raise ConfigError(
            f"policy {policy.name!r} governs none of this agent's tools "
            f"({', '.join(unknown)}); name its read and write tools"
        )
