"""Tool policies (seed 002): gates that every call of a tool they govern must pass.

A policy is a small object with a ``name``, ``check`` before the call and ``on_result``
after a successful one. Its memory of earlier calls is a :class:`PolicyMemory` that belongs
to the run, one per policy, so two policies never overwrite each other's history and a
snapshot of the run captures all of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from gr_notebook.errors import ConfigError, RunError

if TYPE_CHECKING:
    from gr_notebook.tools.base import Tool, ToolOutput
    from gr_notebook.workflow.workspace import Workspace

__all__ = [
    "PolicyContext",
    "PolicyDecision",
    "PolicyMemory",
    "PolicyState",
    "ToolPolicy",
    "Verdict",
]


Verdict = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """A policy's answer for one call: allow it, deny it, or ask a person.

    An ask is not ``allowed``: code that reads only ``allowed`` treats it as a denial, so
    a question nobody answers never lets a call through.
    """

    allowed: bool
    reason: str | None = None
    needs_approval: bool = False
    """A person must approve the call before it runs (see :meth:`ask`)."""

    @classmethod
    def allow(cls) -> PolicyDecision:
        return _ALLOW

    @classmethod
    def deny(cls, reason: str) -> PolicyDecision:
        """Deny with a reason the model can act on: what to do instead."""
        return cls(False, _text(reason, "deny", "read the file first") or "denied by policy")

    @classmethod
    def ask(cls, reason: str) -> PolicyDecision:
        """Hold the call until a person approves, denies or edits it; ``reason`` is what
        the person reads."""
        reason = _text(reason, "ask", "this writes outside the docs folder")
        return cls(False, reason or "a person must approve this call", True)

    @property
    def verdict(self) -> Verdict:
        if self.allowed:
            return "allow"
        return "ask" if self.needs_approval else "deny"


_ALLOW = PolicyDecision(True)


def _text(reason: object, verdict: str, example: str) -> str:
    """The reason, stripped; a reason that is not text would reach the model as ``None``."""
    if not isinstance(reason, str):
        raise ConfigError(
            f"PolicyDecision.{verdict} takes the reason as text, what the "
            f"{'person' if verdict == 'ask' else 'model'} reads, e.g. "
            f"PolicyDecision.{verdict}({example!r}); got {type(reason).__name__}"
        )
    return reason.strip()


@dataclass(frozen=True, slots=True)
class PolicyState:
    """A policy's memory at one moment: the tools and (tool, key) pairs that succeeded."""

    policy_name: str
    invoked_tools: frozenset[str] = frozenset()
    invoked_keys: frozenset[tuple[str, str]] = frozenset()


class PolicyMemory:
    """One policy's history in one run, mutable in O(1) per call.

    A key may carry a ``stamp`` (a JSON value, not changed once recorded: record a new
    one), such as the size and mtime of the file that was read, so a policy can tell that
    a file changed since.
    """

    __slots__ = ("_keys", "_tools", "policy_name")

    def __init__(self, policy_name: str) -> None:
        self.policy_name = policy_name
        self._tools: set[str] = set()
        self._keys: dict[tuple[str, str], Any] = {}

    def record(self, tool: str, key: str | None = None, *, stamp: Any = None) -> None:
        self._tools.add(tool)
        if key is not None:
            self._keys[(tool, key)] = stamp

    def invoked(self, tool: str) -> bool:
        return tool in self._tools

    def has_key(self, tool: str, key: str) -> bool:
        return (tool, key) in self._keys

    def stamp(self, tool: str, key: str) -> Any:
        return self._keys.get((tool, key))

    def reset(self) -> None:
        self._tools.clear()
        self._keys.clear()

    @property
    def state(self) -> PolicyState:
        return PolicyState(self.policy_name, frozenset(self._tools), frozenset(self._keys))

    def to_json(self) -> dict[str, Any]:
        return {
            "invoked_tools": sorted(self._tools),
            "invoked_keys": [
                [t, k, list(s) if isinstance(s, tuple) else s] for (t, k), s in self._keys.items()
            ],
        }

    def load_json(self, data: object) -> None:
        if not isinstance(data, Mapping):
            raise RunError(f"policy {self.policy_name!r}: expected an object in the snapshot")
        tools, keys = data.get("invoked_tools", []), data.get("invoked_keys", [])
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise RunError(f"policy {self.policy_name!r}: invoked_tools must be a list of names")
        if not isinstance(keys, list) or not all(
            isinstance(k, list) and len(k) == 3 and isinstance(k[0], str) and isinstance(k[1], str)
            for k in keys
        ):
            raise RunError(
                f"policy {self.policy_name!r}: invoked_keys must be [tool, key, stamp] triples"
            )
        self._tools = set(tools)
        self._keys = {(t, k): _stamp_of(s) for t, k, s in keys}

    def __repr__(self) -> str:
        return (
            f"<PolicyMemory {self.policy_name!r}: {len(self._tools)} tools, {len(self._keys)} keys>"
        )


def _stamp_of(value: Any) -> Any:
    """JSON turns tuples into lists; a stamp compares equal either way once it is a tuple."""
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may consult: the workspace and its own memory in this run."""

    workspace: Workspace
    state: PolicyMemory
    turn: int = 0
    call_index: int = 0
    """Tool calls the run made before this one."""
    now: float = 0.0
    plan_file: str = "main_plan.md"
    """The run's plan file (the agent's ``plan_file``), one of the loop's own files."""


@runtime_checkable
class ToolPolicy(Protocol):
    """Gates the tools it governs. Every governing policy must allow a call; a policy that
    raises denies it (fail-closed)."""

    @property
    def name(self) -> str: ...

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext
    ) -> PolicyDecision: ...

    def on_result(
        self,
        tool: Tool,
        params: Mapping[str, Any],
        result: ToolOutput,
        *,
        context: PolicyContext,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyBinding:
    """A policy under the unique name its state is kept by in a run."""

    key: str
    policy: ToolPolicy = field(compare=False)


def bind_policies(policies: Iterable[ToolPolicy]) -> dict[int, PolicyBinding]:
    """Give each distinct policy object a unique state key: its name, suffixed ``#2``, ``#3``
    when two different policies share a name. The same object declared twice is one policy
    with one history."""
    bound: dict[int, PolicyBinding] = {}
    seen: dict[str, int] = {}
    for policy in policies:
        if id(policy) in bound:
            continue
        name = str(policy.name)
        seen[name] = seen.get(name, 0) + 1
        key = name if seen[name] == 1 else f"{name}#{seen[name]}"
        bound[id(policy)] = PolicyBinding(key, policy)
    return bound
