"""MCP tools in gr's own loop: what a call costs next to a native tool, and what a start costs.

One agent with a scripted model runs ``add`` N times (N = 0 and N = 60): as a native gr tool,
as ``mcp__demo__add`` on a stdio server, and on a streamable HTTP server on 127.0.0.1 (the
small SDK server of ``tests/tools/mcp_server.py``). The cost of a call is the difference
between the two runs over 60; the cost of a start is the run with no call minus the native
one (spawn or connect, ``initialize``, the tool list, and the close at the end).

Goals: an MCP call over stdio costs under 20 ms more than a native one; a stdio start under 3 s.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _util

import gr_notebook as gr

SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "tools" / "mcp_server.py")
CALLS = 60
REPEATS = 3


def add(_context: object, params: dict[str, int]) -> str:
    return str(params["a"] + params["b"])


NATIVE = gr.Tool(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    add,  # type: ignore[arg-type]
)


def one_run(name: str, calls: int, servers: list[gr.MCPServer]) -> float:
    script = [gr.tool_call(name, a=i, b=1) for i in range(calls)] + [gr.text("Done.")]
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as scratch:
        agent = gr.Agent(
            gr.ScriptedModel(script),
            workspace=Path(scratch) / "ws",
            store=False,
            tools=[] if servers else [NATIVE],
            mcp_servers=servers,
            max_iterations=CALLS * 2,
            interventions=None,
            stuck_turns=None,
        )
        started = time.perf_counter()
        run = agent.run_sync("Add.")
        elapsed = time.perf_counter() - started
        assert run.status != "failed", run.reason
    return elapsed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    goals = _util.Goals()
    port = free_port()
    http = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        sides = {
            "native tool": ("add", []),
            "MCP over stdio": (
                "mcp__demo__add",
                [gr.MCPServer("demo", command=sys.executable, args=[SERVER])],
            ),
            "MCP over HTTP": (
                "mcp__demo__add",
                [gr.MCPServer("demo", url=f"http://127.0.0.1:{port}/mcp")],
            ),
        }
        figures: dict[str, tuple[float, float]] = {}
        for label, (name, servers) in sides.items():
            empty = _util.median([one_run(name, 0, servers) for _ in range(REPEATS)])
            full = _util.median([one_run(name, CALLS, servers) for _ in range(REPEATS)])
            figures[label] = (empty, (full - empty) / CALLS)
    finally:
        http.kill()
        http.wait()
    native_start, native_call = figures["native tool"]
    _util.section(f"A tool call and a run's start (medians of {REPEATS}; {CALLS} calls a run)")
    rows = []
    for label, (start, call) in figures.items():
        rows.append(
            [
                label,
                f"{call * 1000:.2f} ms",
                f"{call / native_call:.1f} x",
                f"{(start - native_start) * 1000:.0f} ms",
            ]
        )
    _util.print_table(["side", "per call", "vs native", "start (over native)"], rows)
    stdio_start, stdio_call = figures["MCP over stdio"]
    goals.check(
        "stdio call", stdio_call - native_call < 0.020, f"{(stdio_call - native_call) * 1e3:.1f} ms"
    )
    goals.check(
        "stdio start", stdio_start - native_start < 3.0, f"{stdio_start - native_start:.2f} s"
    )
    return goals.report()


if __name__ == "__main__":
    raise SystemExit(main())
