"""The run's connections to its MCP servers, made with the official ``mcp`` SDK.

:func:`connect` opens every server of a run inside the run's own task (the SDK's sessions
are async context managers that must be left in the task that entered them), on the
``AsyncExitStack`` the run holds around its loop, so they close however the run ends:
done, failed, stopped, cancelled or interrupted. A stdio server leads a process group of its
own, and what it started (``uvx``'s and ``npx``'s servers, a browser, a language server) goes
with the group when it closes, also when the server itself exited cleanly. It returns the
servers' tools as gr tools, known before the first request. A server that cannot start is an
:class:`MCPServerError` naming it; a call that crashes, hangs past its timeout or answers
with something that is not MCP becomes an ``is_error`` result that says what happened and
what to do.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import IO, Any

from gr_notebook.errors import ConfigError, MCPServerError
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.tools.mcp import MCPServer, mcp_tool, mcp_tool_name, tool_output

__all__ = ["connect", "load_mcp"]

INSTALL = "pip install 'gr-notebook[mcp]'"
_CLOSED = (
    "has stopped (its connection closed: it may have crashed), and its tools cannot be "
    "called again in this run. Go on with the other tools, and say in your report what "
    "this server's tools would have done"
)
_GONE = (BrokenPipeError, ConnectionError, EOFError)
_STDERR_TAIL = 600
_LEADER = 'echo $$ > "$0"; exec "$@"'
"""Run by ``/bin/sh`` in the server's place: it notes its pid, the group's id (the SDK starts
the server in a session of its own), then becomes the server, keeping that pid."""
_GROUP_GRACE_S = 2.0
"""How long what is left of a server's group has to end on SIGTERM before SIGKILL (the SDK's
own grace for a server)."""


def load_mcp() -> Any:
    """The ``mcp`` package, or a one-line ConfigError with the line that installs it."""
    try:
        import mcp
        import mcp.client.stdio
        import mcp.client.streamable_http
    except ImportError:
        raise ConfigError(f"mcp_servers= needs the MCP SDK: {INSTALL}") from None
    return mcp


async def connect(servers: Sequence[MCPServer], stack: AsyncExitStack) -> list[Tool]:
    """Open every server on ``stack`` and return their tools, in the servers' order."""
    if not servers:
        return []
    load_mcp()
    tools: list[Tool] = []
    for server in servers:
        connection = _Connection(server)
        await connection.open(stack)
        tools += connection.tools
    return tools


class _Connection:
    """One server's session, its tools, and what went wrong with it lately."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.session: Any = None
        self.tools: list[Tool] = []
        self.noise: str | None = None
        """The last thing the server sent that is not MCP, for the next error message."""
        self.stderr: IO[str] | None = None
        self.closed = False
        """The connection ended (the server stopped); no call is sent any more."""

    async def open(self, stack: AsyncExitStack) -> None:
        server = self.server
        own = AsyncExitStack()
        try:
            async with asyncio.timeout(server.connect_timeout_s):
                await self._start(own)
                listed = await self._list()
        except BaseException as exc:
            failure: BaseException = exc
            try:
                await own.aclose()
            except Exception as cause:  # what made the SDK's task group cancel the start
                if not isinstance(exc, Exception):
                    failure = cause
            if isinstance(failure, MCPServerError) or not isinstance(failure, Exception):
                raise failure from None
            raise self._not_started(failure) from None
        stack.push_async_exit(own)
        self.tools = [mcp_tool(server, item, self.call) for item in listed]

    def _not_started(self, exc: Exception) -> MCPServerError:
        server = self.server
        if isinstance(exc, TimeoutError):
            return MCPServerError(
                f"MCP server {server.name!r} ({server.where}) did not answer initialize and "
                f"list its tools within connect_timeout_s={server.connect_timeout_s:g}"
                f"{self._said()}; check that it is an MCP server, or raise the timeout"
            )
        return MCPServerError(
            f"MCP server {server.name!r} ({server.where}) could not start: "
            f"{_what(exc)}{self._said()}"
        )

    async def _start(self, stack: AsyncExitStack) -> None:
        mcp = load_mcp()
        server = self.server
        if server.command is not None:
            _check_command(server)
            self.stderr = stack.enter_context(
                tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            )
            command, args = server.command, list(server.args)
            if os.name == "posix":  # on Windows the SDK's job object ends the whole tree
                fd, pid_file = tempfile.mkstemp(prefix="gr-mcp-", suffix=".pid")
                os.close(fd)
                stack.push_async_callback(_end_group, pid_file)  # once the SDK stopped it
                command, args = "/bin/sh", ["-c", _LEADER, pid_file, command, *args]
            params = mcp.client.stdio.StdioServerParameters(
                command=command,
                args=args,
                env=dict(server.env) if server.env else None,
                cwd=server.cwd,
            )
            streams = await stack.enter_async_context(
                mcp.client.stdio.stdio_client(params, errlog=self.stderr)
            )
        else:
            import httpx2

            client = httpx2.AsyncClient(
                headers=dict(server.headers or {}),
                # reads wait as long as a call may (the SDK's default, 300 s, at least): an
                # idle stream of the server's messages is no failure; calls have their own
                timeout=httpx2.Timeout(
                    server.connect_timeout_s, read=max(300.0, server.call_timeout_s + 5)
                ),
            )
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                mcp.client.streamable_http.streamable_http_client(server.url, http_client=client)
            )
        read, write = streams
        self.session = await stack.enter_async_context(
            mcp.ClientSession(
                read,
                write,
                read_timeout_seconds=server.connect_timeout_s,
                message_handler=self._on_message,
            )
        )
        await self.session.initialize()

    async def _list(self) -> list[Any]:
        mcp = load_mcp()
        listed: list[Any] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.session.list_tools(params=params)
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                return listed

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.noise = _what(message).splitlines()[0][:160]

    async def call(self, tool: str, params: Mapping[str, Any]) -> ToolOutput:
        """Call ``tool``; any failure of the server is an error result, never a crash."""
        server, name = self.server, mcp_tool_name(self.server.name, tool)
        self.noise = None
        if self.closed:
            return self._failed(name, _CLOSED)
        try:
            async with asyncio.timeout(server.call_timeout_s + 1):
                result = await self.session.call_tool(
                    tool, dict(params), read_timeout_seconds=server.call_timeout_s
                )
        except Exception as exc:
            text = _what(exc)
            if isinstance(exc, TimeoutError) or "timed out" in text.lower():
                return self._failed(
                    name,
                    f"did not answer within {server.call_timeout_s:g}s. The call may or may "
                    "not have taken effect: check before you call it again, and if it times "
                    "out again, go on without this server's tools",
                )
            if "connection closed" in text.lower() or isinstance(exc, _GONE):
                self.closed = True
                return self._failed(name, _CLOSED)
            return self._failed(
                name,
                f"failed: {text}. Check the arguments against the tool's schema and try "
                "again once; if it fails again, go on without it",
            )
        try:
            return tool_output(result, name=name)
        except Exception as exc:  # content the SDK let through but that cannot be read
            return self._failed(
                name,
                f"answered with content that cannot be read ({_what(exc)}); go on without "
                "this tool, or try it once more with other arguments",
            )

    def _failed(self, name: str, what: str) -> ToolOutput:
        noise = f" It also wrote output that is not MCP: {self.noise}." if self.noise else ""
        return ToolOutput(
            f"Error: {name} was not answered: MCP server {self.server.name!r} {what}.{noise}",
            True,
        )

    def _said(self) -> str:
        """The tail of the server's stderr, when it wrote any."""
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            text = self.stderr.read().strip()
        except (OSError, ValueError):
            return ""
        if not text:
            return ""
        tail = text[-_STDERR_TAIL:]
        return f". It wrote on stderr: {tail}"


def _check_command(server: MCPServer) -> None:
    """A command that is not there, named, rather than a bare FileNotFoundError."""
    command = server.command or ""
    if os.sep in command or (os.altsep and os.altsep in command):
        found = os.path.isfile(command) and os.access(command, os.X_OK)
    else:
        found = shutil.which(command, path=(server.env or {}).get("PATH")) is not None
        found = found or shutil.which(command) is not None
    if not found:
        raise MCPServerError(
            f"MCP server {server.name!r} could not start: the command {command!r} was not "
            "found; install it, or give its full path as command="
        )


async def _end_group(pid_file: str) -> None:
    """End what is left of a stdio server's process group, whose id ``pid_file`` holds once
    the server started: SIGTERM, then SIGKILL after a grace period, or at once if the run's
    task is cancelled meanwhile. The SDK does this only for a server that would not exit."""
    try:
        text = Path(pid_file).read_text().strip()
    except OSError:
        text = ""
    finally:
        with suppress(OSError):
            os.unlink(pid_file)
    if not text.isdigit():
        return  # the server never started
    group = int(text)
    alive = _signal(group, signal.SIGTERM)
    deadline = time.monotonic() + _GROUP_GRACE_S
    try:
        while alive and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            alive = _signal(group, 0)
    finally:
        if alive:
            _signal(group, signal.SIGKILL)


def _signal(group: int, number: int) -> bool:
    """Send ``number`` to the process group; False once no process is left in it (a zombie
    not yet reaped still counts, as it does for the SDK)."""
    try:
        os.killpg(group, number)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # some member may not be ours to signal: it does not prove the group gone
    return True


def _what(exc: BaseException) -> str:
    """An exception as one line, including the group an anyio task group raises."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text
