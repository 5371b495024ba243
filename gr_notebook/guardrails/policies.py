"""The built-in tool policies of seed 002, corrected where WINK goes wrong.

``ReadBeforeWritePolicy`` compares canonical paths (WINK denies ``./a.txt`` after a read of
``a.txt``), denies paths that escape the workspace (WINK allows ``../../etc/passwd`` as a
"new file"), and asks for a fresh read when a file changed after it was read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError, WorkspaceError
from gr_notebook.guardrails.paths import canonical_path, file_stamp
from gr_notebook.guardrails.policy import PolicyContext, PolicyDecision

if TYPE_CHECKING:
    from gr_notebook.tools.base import Tool, ToolOutput

__all__ = ["ReadBeforeWritePolicy", "SequentialDependencyPolicy"]


@dataclass(frozen=True)
class SequentialDependencyPolicy:
    """Tool B runs only after each of its prerequisites has succeeded at least once."""

    dependencies: Mapping[str, Iterable[str]]
    name: str = "sequential_dependency"

    def __post_init__(self) -> None:
        graph: dict[str, frozenset[str]] = {}
        for tool, needs in dict(self.dependencies).items():
            if isinstance(needs, str):
                raise ConfigError(
                    f"dependencies[{tool!r}] is the string {needs!r}; give a set of tool "
                    f"names, e.g. {{{tool!r}: {{{needs!r}}}}}"
                )
            graph[str(tool)] = frozenset(str(n) for n in needs)
        cycle = _find_cycle(graph)
        if cycle:
            raise ConfigError(
                "the dependencies form a cycle, so no tool in it could ever run: "
                + " → ".join(cycle)
            )
        object.__setattr__(self, "dependencies", graph)

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext
    ) -> PolicyDecision:
        required: frozenset[str] = self.dependencies.get(tool.name, frozenset())  # type: ignore[assignment]
        missing = sorted(r for r in required if not context.state.invoked(r))
        if not missing:
            return PolicyDecision.allow()
        return PolicyDecision.deny(
            f"'{tool.name}' requires {', '.join(missing)} to have succeeded first; "
            f"call {missing[0]} before {tool.name}."
        )

    def on_result(
        self,
        tool: Tool,
        params: Mapping[str, Any],
        result: ToolOutput,
        *,
        context: PolicyContext,
    ) -> None:
        context.state.record(tool.name)


def _find_cycle(graph: Mapping[str, frozenset[str]]) -> list[str] | None:
    """A dependency cycle as a path that returns to its start, each tool needing the next,
    or None. Sorted first, so the same dependencies always name the same cycle."""
    try:
        TopologicalSorter({tool: sorted(needs) for tool, needs in sorted(graph.items())}).prepare()
    except CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists each tool before those needing it
    return None


@dataclass(frozen=True)
class ReadBeforeWritePolicy:
    """An existing file must be read in this run, as it is now, before it is overwritten.

    New files may be created freely. A file the agent wrote itself counts as known, so it
    can be rewritten, unless something else changed it since (size or mtime differ).
    """

    read_tools: Iterable[str] = frozenset({"read_file"})
    write_tools: Iterable[str] = frozenset({"write_file", "edit_file"})
    mount_point: str | None = None
    """A prefix the model's paths may carry, such as ``/workspace``; stripped before use."""
    path_params: tuple[str, ...] = ("path", "file_path")
    name: str = "read_before_write"
    _known: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reads, writes = (
            _names(self.read_tools, "read_tools"),
            _names(self.write_tools, "write_tools"),
        )
        if not writes:
            raise ConfigError("write_tools is empty; name the tools that overwrite files")
        if reads & writes:
            raise ConfigError(
                f"{', '.join(sorted(reads & writes))} cannot be both a read and a write tool"
            )
        object.__setattr__(self, "read_tools", reads)
        object.__setattr__(self, "write_tools", writes)
        object.__setattr__(self, "_known", reads | writes)

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext
    ) -> PolicyDecision:
        if tool.name not in self.write_tools:
            return PolicyDecision.allow()
        raw = self._raw_path(params)
        if raw is None:
            return PolicyDecision.allow()
        try:
            key = canonical_path(context.workspace, raw, mount_point=self.mount_point)
        except WorkspaceError as exc:
            return PolicyDecision.deny(str(exc))
        current = file_stamp(context.workspace, key)
        if current is None:
            return PolicyDecision.allow()  # a new file
        state = context.state
        seen = [state.stamp(t, key) for t in self._known if state.has_key(t, key)]
        if current in seen:
            return PolicyDecision.allow()
        reader = min(self.read_tools)
        if seen:
            return PolicyDecision.deny(
                f"'{raw}' changed since you last read it (its size or modification time "
                f"differ); read it again with {reader}('{key}') before writing it."
            )
        return PolicyDecision.deny(
            f"'{raw}' already exists and was not read in this run; read it first with "
            f"{reader}('{key}'), then write it."
        )

    def on_result(
        self,
        tool: Tool,
        params: Mapping[str, Any],
        result: ToolOutput,
        *,
        context: PolicyContext,
    ) -> None:
        if tool.name not in self._known:
            return
        raw = self._raw_path(params)
        if raw is None:
            return
        try:
            key = canonical_path(context.workspace, raw, mount_point=self.mount_point)
        except WorkspaceError:
            return
        context.state.record(tool.name, key, stamp=file_stamp(context.workspace, key))

    def _raw_path(self, params: Mapping[str, Any]) -> str | None:
        for name in self.path_params:
            value = params.get(name)
            if isinstance(value, str):
                return value
        return None


def _names(value: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(value, str):
        raise ConfigError(f"{what} takes a set of tool names, e.g. {{{value!r}}}, not a string")
    return frozenset(str(v) for v in value)
