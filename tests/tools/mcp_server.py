"""A small MCP server for the tests, built with the SDK's own server API.

``python mcp_server.py [--http PORT] [--count FILE] [--exit-at-once] [--spawn FILE]``: over
stdio by default, over streamable HTTP on 127.0.0.1:PORT with ``--http``. Every tool call
appends its tool's name to ``--count`` (a file per server), so a test can prove a denied call
never ran. ``--spawn`` starts a child that outlives the server unless its process group goes
(as ``uvx``, ``npx``, a browser or a language server start one), and writes its pid. Some
tools misbehave on purpose: ``crash`` exits the process, ``hang`` never answers, ``fail``
raises, ``malformed`` writes a line that is not JSON-RPC. Over HTTP, the end of a session
(the client's DELETE) is counted too, with the Authorization header it carried.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=0)
parser.add_argument("--count", default="")
parser.add_argument("--exit-at-once", action="store_true")
parser.add_argument("--name", default="demo")
parser.add_argument("--spawn", default="")
options = parser.parse_args()
if options.exit_at_once:
    sys.exit(3)
if options.spawn:
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    with open(options.spawn, "w", encoding="utf-8") as file:
        file.write(str(child.pid))

server = MCPServer(options.name)
WIRE = os.dup(1)
"""The protocol's own channel: the SDK sends fd 1 (and print) to stderr once it serves."""


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
    os.write(WIRE, b"this is not json\n")
    time.sleep(3600)
    return "never"


class Point(BaseModel):
    x: int
    y: int


@server.tool()
def manhattan(point: Point, origin: Point | None = None) -> int:
    """The Manhattan distance of a point from the origin (a pydantic model argument)."""
    counted("manhattan")
    zero = origin or Point(x=0, y=0)
    return abs(point.x - zero.x) + abs(point.y - zero.y)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def look(name: str) -> str:
    """Look a name up (read-only, as its annotations say)."""
    counted("look")
    return f"found {name}"


@server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=True))
def remove(name: str) -> str:
    """Remove a name (idempotent and destructive, as its annotations say)."""
    counted("remove")
    return f"removed {name}"


@server.tool()
def pid() -> int:
    """The server's process id."""
    counted("pid")
    return os.getpid()


if options.http:
    import uvicorn

    app = server.streamable_http_app()

    async def recorded(scope, receive, send):  # type: ignore[no-untyped-def]
        """The app, noting each session the client ends (its DELETE) and its headers."""
        if scope["type"] == "http" and scope["method"] == "DELETE":
            headers = dict(scope["headers"])
            counted(f"DELETE auth={headers.get(b'authorization', b'').decode()}")
        await app(scope, receive, send)

    uvicorn.run(recorded, host="127.0.0.1", port=options.http, log_level="warning")
else:
    server.run()
