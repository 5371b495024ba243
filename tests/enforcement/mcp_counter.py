"""A real MCP server (the ``mcp`` SDK's own server API, over stdio) whose tools count their
executions: ``python mcp_counter.py <counts folder>``."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

COUNTS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()

server = MCPServer("records")


def _record(tool: str) -> str:
    with (COUNTS / f"{tool}.runs").open("a", encoding="utf-8") as runs:
        runs.write("ran\n")
    return f"{tool} ran"


@server.tool(description="Read records with a query.")
def query(key: str) -> str:
    return _record("query")


@server.tool(description="Drop the records table.")
def drop_table(key: str) -> str:
    return _record("drop_table")


if __name__ == "__main__":
    server.run("stdio")
