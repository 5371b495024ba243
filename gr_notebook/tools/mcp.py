"""MCP servers as the agent's tools: the server value, the naming rule, the results.

``gr.Agent(mcp_servers=[gr.MCPServer("files", command="npx", args=[...])])`` connects to each
server when a run starts and offers its tools to the model next to the agent's own.

**Naming rule.** An MCP tool is named ``mcp__<server>__<tool>``, exactly as Claude Code
names MCP tools, so a policy, a feedback provider, the DataFrames and the Claude Agent SDK
bridge all read one name: ``SequentialDependencyPolicy({"mcp__files__write": [...]})``.
A server name is letters, digits, ``_`` and ``-``, starts with a letter or digit, and holds
no ``__`` and no trailing ``_`` (either would make the name ambiguous). A whole name must
fit what the model APIs accept (``^[a-zA-Z0-9_-]{1,64}$``): a server tool whose name does
not is an error when the run starts, naming it.

The connections themselves are :mod:`gr_notebook.tools.mcp_client`'s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gr_notebook.errors import ConfigError
from gr_notebook.tools.base import Effect, Tool, ToolContext, ToolOutput

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "MCP_PREFIX",
    "MCPServer",
    "check_servers",
    "effect_of_annotations",
    "mcp_tool",
    "mcp_tool_name",
    "tool_output",
]

MCP_PREFIX = "mcp__"
DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""Time for a server to start, answer ``initialize`` and list its tools."""
DEFAULT_CALL_TIMEOUT_S = 120.0
"""Time for one tool call to answer; past it the call is an error result."""

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_API_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 64

Call = Callable[[str, Mapping[str, Any]], Awaitable[ToolOutput]]
"""Calls one tool of a connected server by its own name: what an MCP tool's handler runs."""


@dataclass(frozen=True, slots=True)
class MCPServer:
    """An MCP server the agent's runs connect to: a ``command`` started over stdio, or a
    ``url`` spoken to over streamable HTTP (exactly one of the two).

    ``connect_timeout_s`` bounds the start (spawn or connect, ``initialize``, the tool list);
    ``call_timeout_s`` bounds each tool call, which past it is an error result the model
    reads. ``env`` is added to the environment the MCP SDK gives a stdio server (``PATH``,
    ``HOME`` and a few more: not the whole of yours, so pass what it needs, an API key say);
    ``headers`` go with every HTTP request (an ``Authorization`` header, say). ``env`` and
    ``headers`` are never shown in a repr or a message.
    """

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not _SERVER_NAME.match(name) or "__" in name:
            raise ConfigError(
                f"MCPServer name {name!r} cannot be used: a name is letters, digits, '_' and "
                "'-', starts with a letter or digit, and holds no '__' (its tools are named "
                "mcp__<server>__<tool>), e.g. gr.MCPServer('files', command=...)"
            )
        if name.endswith("_"):
            raise ConfigError(
                f"MCPServer name {name!r} ends with '_', which makes mcp__{name}__<tool> "
                f"ambiguous: call it {name.rstrip('_')!r}"
            )
        if len(MCP_PREFIX) + len(name) + 3 > MAX_NAME:
            raise ConfigError(
                f"MCPServer name {name!r} is too long: its tools' names "
                f"(mcp__{name}__<tool>) must fit in {MAX_NAME} characters; use a shorter name"
            )
        if (self.command is None) == (self.url is None):
            raise ConfigError(
                f"MCPServer {name!r} needs exactly one of command= (a server started over "
                "stdio, e.g. command='uvx', args=['mcp-server-time']) or url= (streamable "
                "HTTP, e.g. url='http://127.0.0.1:8000/mcp')"
            )
        if self.command is not None:
            if not isinstance(self.command, str) or not self.command.strip():
                raise ConfigError(f"MCPServer {name!r}: command= takes the program to run")
            if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
                raise ConfigError(
                    f"MCPServer {name!r}: args= takes a list of strings, e.g. "
                    "args=['server.py', '--verbose']"
                )
            if self.headers is not None:
                raise ConfigError(
                    f"MCPServer {name!r}: headers= belong to a url= server; a command= "
                    "server takes env="
                )
            object.__setattr__(self, "args", tuple(self.args))
        else:
            url = self.url
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"MCPServer {name!r}: url= takes an http:// or https:// address of a "
                    f"streamable HTTP endpoint, e.g. 'http://127.0.0.1:8000/mcp'; got {url!r}"
                )
            if self.args or self.env is not None or self.cwd is not None:
                raise ConfigError(
                    f"MCPServer {name!r}: args=, env= and cwd= belong to a command= server; "
                    "a url= server takes headers="
                )
        for what in ("env", "headers"):
            value = getattr(self, what)
            if value is not None:
                if not isinstance(value, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()
                ):
                    raise ConfigError(
                        f"MCPServer {name!r}: {what}= takes a dict of strings to strings"
                    )
                object.__setattr__(self, what, dict(value))
        for what in ("connect_timeout_s", "call_timeout_s"):
            value = getattr(self, what)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ConfigError(
                    f"MCPServer {name!r}: {what} takes a number of seconds above 0, got {value!r}"
                )

    @property
    def prefix(self) -> str:
        """What the names of this server's tools begin with."""
        return f"{MCP_PREFIX}{self.name}__"

    @property
    def where(self) -> str:
        """The command or the address, for messages: no arguments, credentials or query,
        which may hold secrets (env and headers are never shown)."""
        if self.url is None:
            return repr(self.command)
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model, the policies and the DataFrames use for ``tool`` of ``server``."""
    return f"{MCP_PREFIX}{server}__{tool}"


def check_servers(servers: object) -> tuple[MCPServer, ...]:
    """``mcp_servers=`` as a tuple of servers with distinct names, or the ConfigError."""
    if isinstance(servers, (str, bytes, MCPServer)) or not isinstance(servers, Sequence | tuple):
        raise ConfigError(
            "mcp_servers takes a list of gr.MCPServer(...), e.g. "
            "mcp_servers=[gr.MCPServer('files', command='uvx', args=['mcp-server-files'])]"
        )
    checked: dict[str, MCPServer] = {}
    for server in servers:
        if not isinstance(server, MCPServer):
            raise ConfigError(
                f"mcp_servers takes gr.MCPServer(...) items, got {type(server).__name__}"
            )
        if server.name in checked:
            raise ConfigError(
                f"two MCP servers are named {server.name!r}: their tools would share the "
                f"names mcp__{server.name}__<tool>; give each server its own name"
            )
        checked[server.name] = server
    return tuple(checked.values())


def mcp_tool(server: MCPServer, listed: Any, call: Call) -> Tool:
    """The gr tool for one tool ``listed`` by ``server`` (an ``mcp.types.Tool``); its
    handler runs ``call``. A name or schema the model APIs would refuse is a ConfigError."""
    own = listed.name
    name = mcp_tool_name(server.name, own)
    if not _API_NAME.match(name):
        raise ConfigError(
            f"MCP server {server.name!r} has a tool {own!r} whose name, {name!r}, the model "
            f"APIs refuse (letters, digits, '_' and '-', at most {MAX_NAME} characters): "
            "give the server a shorter name, or leave that tool out on the server's side"
        )
    schema = listed.input_schema
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ConfigError(
            f"MCP server {server.name!r} describes tool {own!r} with an input schema that is "
            "not a JSON object schema; the model APIs take only those"
        )
    schema = _inlined({k: v for k, v in schema.items() if k != "title"} | {"type": "object"})
    description = (listed.description or listed.title or "").strip()
    first = description.split("\n\n", 1)[0].strip() or f"The {own} tool of MCP server"
    summary = f"{first} (MCP server {server.name!r})" if description else f"{first} {server.name!r}"

    async def handler(_context: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
        return await call(own, params)

    effect = effect_of_annotations(getattr(listed, "annotations", None))
    return Tool(name, summary, schema, handler, docs=description, effect=effect)


def effect_of_annotations(annotations: Any) -> Effect:
    """A tool's effect class from its MCP annotations (hints the server gives): ``read``
    when ``readOnlyHint`` is true, else ``idempotent`` when ``idempotentHint`` is true, else
    ``once``, as for a tool with no annotations. ``destructiveHint`` does not change the
    class: a destructive call that is idempotent (a delete) is safe to run again, and one
    that is not is ``once`` already."""
    if annotations is None:
        return "once"

    def hint(name: str, alias: str) -> bool:
        if isinstance(annotations, Mapping):
            value = annotations.get(alias, annotations.get(name))
        else:
            value = getattr(annotations, name, None)
            if value is None:
                value = getattr(annotations, alias, None)
        return value is True

    if hint("readOnlyHint", "read_only_hint"):
        return "read"
    if hint("idempotentHint", "idempotent_hint"):
        return "idempotent"
    return "once"


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$ref``s (``#/$defs/Name``, as pydantic writes a model
    argument) replaced by what they name, so gr's validator checks the nested arguments
    too; a recursive definition keeps its ``$ref`` and the ``$defs`` stay for it."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    if not isinstance(defs, Mapping) or not defs:
        return schema
    kept = False

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal kept
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            target = defs.get(name) if ref.startswith(("#/$defs/", "#/definitions/")) else None
            if isinstance(target, Mapping) and name not in seen:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return walk({**target, **rest}, (*seen, name))
            kept = True
            return dict(node)
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    inlined: dict[str, Any] = walk(schema, ())
    if kept:
        inlined["$defs" if "$defs" in schema else "definitions"] = defs
    return inlined


def tool_output(result: Any, *, name: str) -> ToolOutput:
    """An MCP ``CallToolResult`` as the model reads it: the text blocks, a short note for
    each image, audio or resource block, the structured content when nothing else says it,
    and ``is_error`` kept."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            mime = getattr(block, "mime_type", "") or kind
            parts.append(f"[{kind} ({mime}) returned by the tool; not shown here]")
        elif kind == "resource_link":
            parts.append(f"[a link to {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            uri = getattr(resource, "uri", "")
            parts.append(
                str(text) if text is not None else f"[a binary resource {uri}; not shown here]"
            )
        else:
            parts.append(f"[a {kind or 'content'} block the tool returned; not shown here]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not parts:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if getattr(result, "is_error", False):
        said = f": {text}" if text else ""
        return ToolOutput(
            f"Error: {name} failed{said}. Check the arguments against its schema and try "
            "again, or go on without it.",
            True,
        )
    return ToolOutput(text or "(the tool returned nothing)")
