"""How a Claude Code tool call looks to gr_notebook's policies, and how their words look to
Claude.

Policies are written against gr's tool names (``read_file``, ``write_file``, ``edit_file``)
and workspace-relative paths. Claude Code's file tools take an absolute ``file_path``. A
:class:`ToolAlias` says which gr tool an SDK tool stands for and which input names its
file; :class:`ToolNames` turns a call into the name and input a policy reads, and turns the
policy's reply back into Claude's terms (its tool names, absolute paths), since the reply
is an order that Claude must be able to follow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gr_notebook.errors import ConfigError
from gr_notebook.tools.base import Effect, Tool, ToolOutput

__all__ = ["CLAUDE_CODE_FILE_TOOLS", "CLAUDE_CODE_TOOLS", "Call", "ToolAlias", "ToolNames"]


@dataclass(frozen=True, slots=True)
class ToolAlias:
    """The gr tool an SDK tool stands for: ``name``, and the input field (if any) that
    holds a file path, which policies read as ``path`` relative to the session's cwd."""

    name: str
    path_param: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("ToolAlias needs the gr tool name it stands for, e.g. 'write_file'")


CLAUDE_CODE_FILE_TOOLS: Mapping[str, ToolAlias] = {
    "Read": ToolAlias("read_file", "file_path"),
    "Write": ToolAlias("write_file", "file_path"),
    "Edit": ToolAlias("edit_file", "file_path"),
    "MultiEdit": ToolAlias("edit_file", "file_path"),
    "NotebookEdit": ToolAlias("edit_file", "notebook_path"),
}
"""Claude Code's file tools as ``ReadBeforeWritePolicy`` knows them: one read, four writes."""

CLAUDE_CODE_TOOLS: tuple[str, ...] = (
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "MultiEdit",
    "NotebookEdit",
    "Read",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
)
"""The tools assumed before the session says which it has (its ``init`` message)."""

_BUILT_IN_EFFECTS: Mapping[str, Effect] = {
    "read_file": "read",
    "write_file": "idempotent",
    "edit_file": "idempotent",
    "Glob": "read",
    "Grep": "read",
    "WebFetch": "read",
    "WebSearch": "read",
    "TodoWrite": "idempotent",
}
"""The effect class of the tools Claude Code brings (by gr's name for them): its file tools
as gr's own, its searches ``read``; the rest (Bash) is ``once``."""

_MCP = re.compile(r"^mcp__[^_].*?__(?P<tool>.+)$")


@dataclass(frozen=True, slots=True)
class Call:
    """One SDK tool call as the guardrails see it."""

    sdk_name: str
    tool: Tool
    """A stand-in :class:`Tool` under the gr name the policies read."""
    params: Mapping[str, Any]
    """The input, with the aliased path relative to the cwd under ``path``."""
    path: tuple[str, str] | None = None
    """(relative, as Claude gave it) for a call that names a file."""


@dataclass
class ToolNames:
    """The session's map from SDK tool names to what gr's guardrails read."""

    cwd: Path
    aliases: Mapping[str, ToolAlias]
    toolset_tools: frozenset[str] = frozenset()
    """Names of the agent's own toolset tools: ``mcp__<server>__<name>`` stands for one."""
    mcp_servers: frozenset[str] = frozenset()
    """The agent's own ``gr.MCPServer`` names: their tools keep their ``mcp__`` names."""
    _stubs: dict[str, Tool] = field(default_factory=dict, repr=False)
    _pattern: tuple[re.Pattern[str], dict[str, str]] | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls,
        cwd: Path,
        tool_map: Mapping[str, ToolAlias | str] | None,
        toolset_tools: Iterable[str] = (),
        mcp_servers: Iterable[str] = (),
    ) -> ToolNames:
        aliases = dict(CLAUDE_CODE_FILE_TOOLS)
        for sdk_name, alias in (tool_map or {}).items():
            if isinstance(alias, str):
                alias = ToolAlias(alias)
            if not isinstance(alias, ToolAlias):
                raise ConfigError(
                    f"tool_map[{sdk_name!r}] takes a gr tool name or ToolAlias(name, "
                    f"path_param), not {type(alias).__name__}"
                )
            aliases[sdk_name] = alias
        return cls(cwd, aliases, frozenset(toolset_tools), frozenset(mcp_servers))

    def gr_name(self, sdk_name: str) -> str:
        alias = self.aliases.get(sdk_name)
        if alias is not None:
            return alias.name
        match = _MCP.match(sdk_name)
        if match and match["tool"] in self.toolset_tools and not self._gr_mcp(sdk_name):
            return match["tool"]
        return sdk_name

    def _gr_mcp(self, sdk_name: str) -> bool:
        return any(sdk_name.startswith(f"mcp__{server}__") for server in self.mcp_servers)

    def stub(self, gr_name: str) -> Tool:
        tool = self._stubs.get(gr_name)
        if tool is None:
            tool = self._stubs[gr_name] = Tool(
                gr_name,
                f"a Claude Agent SDK tool, as gr's {gr_name}",
                {},
                _not_run_here,
                effect=_BUILT_IN_EFFECTS.get(gr_name, "once"),
            )
        return tool

    def call(self, sdk_name: str, tool_input: Mapping[str, Any]) -> Call:
        params = dict(tool_input)
        alias = self.aliases.get(sdk_name)
        path = None
        if alias is not None and alias.path_param is not None:
            raw = params.pop(alias.path_param, None)
            if isinstance(raw, str):
                relative = self.relative(raw)
                params["path"], path = relative, (relative, raw)
        return Call(sdk_name, self.stub(self.gr_name(sdk_name)), params, path)

    def relative(self, raw: str) -> str:
        """A path as the workspace reads it: relative to the cwd (``..`` when outside, which
        the policies refuse as leaving the workspace)."""
        if not os.path.isabs(raw):
            return raw
        return Path(os.path.relpath(raw, self.cwd)).as_posix()

    def in_claude_terms(self, text: str, call: Call | None = None) -> str:
        """``text`` with gr tool names as Claude knows them, and the call's relative path
        (quoted, as policies quote it) as Claude gave it."""
        if self._pattern is None:
            names = self._claude_names()
            alternatives = "|".join(map(re.escape, sorted(names))) or "(?!)"
            self._pattern = (re.compile(r"\b(" + alternatives + r")\b"), names)
        pattern, names = self._pattern
        text = pattern.sub(lambda m: names[m.group(1)], text)
        if call is not None and call.path is not None:
            relative, raw = call.path
            if relative != raw:
                text = text.replace(f"'{relative}'", f"'{raw}'")
        return text

    def _claude_names(self) -> dict[str, str]:
        """gr name → the first SDK name that stands for it (Edit before MultiEdit)."""
        names: dict[str, str] = {}
        for sdk_name, alias in self.aliases.items():
            if alias.name != sdk_name:
                names.setdefault(alias.name, sdk_name)
        return names


def _not_run_here(_context: object, _params: Mapping[str, Any]) -> ToolOutput:
    raise RuntimeError("a Claude Agent SDK tool runs in the Claude Code CLI, not in gr")
