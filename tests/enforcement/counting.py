"""Tools that count their executions, each in a file of its own.

A runtime proves it enforced a denial only by what the tool did, not by what the guardrails
recorded: each counting tool appends a line to ``<tool>.runs`` when its body runs, in
whatever process runs it (gr's loop, the Claude Code CLI's in-process MCP server, a LangChain
tool node, an MCP server's own process).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gr_notebook as gr

LOCAL_TOOLS: Mapping[str, str] = {
    "lookup": "Look a record up by its key.",
    "purge": "Delete every record for good.",
}
"""The runtime's own tools: the allowed one and the one the policy refuses."""

MCP_SERVER = "records"
"""The MCP server's name; its tools are ``mcp__records__<tool>`` in every runtime."""

MCP_TOOLS: Mapping[str, str] = {
    "query": "Read records with a query.",
    "drop_table": "Drop the records table.",
}

SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"key": {"type": "string", "description": "The record's key."}},
    "required": ["key"],
    "additionalProperties": False,
}


def mcp_name(tool: str) -> str:
    """An MCP tool as every runtime names it (Claude Code's rule, and gr's)."""
    return f"mcp__{MCP_SERVER}__{tool}"


@dataclass(frozen=True)
class Counter:
    """The folder of run counts: one file per tool, one line per execution."""

    root: Path

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def record(self, tool: str, params: Mapping[str, Any] | None = None) -> str:
        """One execution of ``tool``; with ``params``, the input it ran with too (one JSON
        line in ``<tool>.inputs``), so that an edited call shows what really ran."""
        with (self.root / f"{tool}.runs").open("a", encoding="utf-8") as runs:
            runs.write("ran\n")
        if params is not None:
            with (self.root / f"{tool}.inputs").open("a", encoding="utf-8") as inputs:
                inputs.write(json.dumps(dict(params), sort_keys=True) + "\n")
        return f"{tool} ran"

    def inputs(self, tool: str) -> list[dict[str, Any]]:
        """The inputs ``tool`` ran with, in order (those its runs recorded)."""
        path = self.root / f"{tool}.inputs"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def runs(self, tool: str) -> int:
        path = self.root / f"{tool}.runs"
        return path.read_text(encoding="utf-8").count("ran\n") if path.exists() else 0

    def all_runs(self, tools: Mapping[str, object]) -> dict[str, int]:
        return {tool: self.runs(tool) for tool in tools}


def gr_tools(counter: Counter) -> list[gr.Tool]:
    """The local tools as gr tools, for gr's loop (and as the agent's own in a session)."""

    def make(name: str, description: str) -> gr.Tool:
        def handler(_context: gr.tools.ToolContext, params: Mapping[str, Any]) -> str:
            return counter.record(name, params)

        return gr.Tool(name, description, dict(SCHEMA), handler)

    return [make(name, description) for name, description in LOCAL_TOOLS.items()]
