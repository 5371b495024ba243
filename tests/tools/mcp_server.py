"""A small MCP server for the tests, built with the SDK's own server API.

``python mcp_server.py [--http PORT] [--count FILE] [--no-start]``: over stdio by default,
over streamable HTTP on 127.0.0.1:PORT with ``--http``. Every tool call appends its tool's
name to ``--count`` (a file per server), so a test can prove a denied call never ran. Some
tools misbehave on purpose: ``crash`` exits the process, ``hang`` never answers, ``fail``
raises, ``malformed`` writes a line that is not JSON-RPC.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=0)
parser.add_argument("--count", default="")
parser.add_argument("--exit-at-once", action="store_true")
parser.add_argument("--name", default="demo")
options = parser.parse_args()
if options.exit_at_once:
    sys.exit(3)

server = MCPServer(options.name)


def counted(name: str) -> None:
    if options.count:
        with open(options.count, "a", encoding="utf-8") as file:
            file.write(name + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    counted("add")
    return a + b


@server.tool()
def greet(name: str, title: str | None = None) -> str:
    """Greet a person, with an optional title."""
    counted("greet")
    return f"Hello, {title + ' ' if title else ''}{name}!"


@server.tool()
def fail(reason: str = "the disk is full") -> str:
    """Always fails."""
    counted("fail")
    raise ValueError(reason)


@server.tool()
def crash() -> str:
    """Kills the server."""
    counted("crash")
    os._exit(1)


@server.tool()
def hang() -> str:
    """Never answers."""
    counted("hang")
    time.sleep(3600)
    return "never"


@server.tool()
def malformed() -> str:
    """Writes a line that is not JSON-RPC, then answers nothing."""
    counted("malformed")
    sys.stdout.write("this is not json\n")
    sys.stdout.flush()
    time.sleep(3600)
    return "never"


@server.tool()
def pid() -> int:
    """The server's process id."""
    counted("pid")
    return os.getpid()


if options.http:
    server.run("streamable-http", host="127.0.0.1", port=options.http)
else:
    server.run()
