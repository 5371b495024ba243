"""``guardrail_hooks(agent)``: an agent's guardrails inside a Claude Agent SDK session.

The returned :class:`GuardrailHooks` holds ``.hooks`` (what ``ClaudeAgentOptions(hooks=...)``
takes) and ``.run`` (the :class:`gr.Run <gr_notebook.Run>` that records the session). Its
:meth:`~GuardrailHooks.query` runs a session with both wired in; a person driving
``ClaudeSDKClient`` passes each message to :meth:`~GuardrailHooks.observe` instead, so the
run learns of the model calls (turns, tokens) and of the session's end.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gr_notebook.agent import Agent
from gr_notebook.engine.outcome import LoopOutcome, RunStatus
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.integrations.claude_agent_sdk.hooks import HookCallbacks
from gr_notebook.integrations.claude_agent_sdk.permission import (
    CanUseTool,
    check_asks_reach_a_person,
)
from gr_notebook.integrations.claude_agent_sdk.session import Session
from gr_notebook.integrations.claude_agent_sdk.tools import ToolAlias, ToolNames
from gr_notebook.integrations.extras import load_extra
from gr_notebook.integrations.hosted_session import session_root
from gr_notebook.run import Run
from gr_notebook.tools.mcp import MCPServer
from gr_notebook.tools.toolset import Toolset

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

__all__ = ["EXTRA", "GuardrailHooks", "guardrail_hooks", "load_sdk"]

EXTRA = "pip install 'gr-notebook[claude-agent-sdk]'"


def load_sdk() -> ModuleType:
    """The ``claude_agent_sdk`` module, or a one-line error that names the extra."""
    return load_extra("claude_agent_sdk", what="the Claude Agent SDK", extra=EXTRA)


def guardrail_hooks(
    agent: Agent,
    *,
    cwd: str | os.PathLike[str] | None = None,
    tools: Iterable[str] | None = None,
    tool_map: Mapping[str, ToolAlias | str] | None = None,
    model: str = "claude-agent-sdk",
    instructions: str = "",
) -> GuardrailHooks:
    """The agent's guardrails (policies, toolset policies, feedback providers, completion
    checker, budget, interventions) as Claude Agent SDK hooks, for one session.

    ``cwd`` is the session's working directory, the workspace the guardrails read (default:
    the agent's workspace, else the current directory). ``tools`` names the session's
    tools, checked against the policies now (else when the session starts). ``tool_map``
    adds SDK tools to the map of Claude Code's file tools onto gr's, e.g.
    ``{"mcp__files__save": gr.ToolAlias("write_file", "target")}``.
    """
    sdk = load_sdk()
    root = session_root(agent, cwd, "guardrail_hooks")
    toolset_tools = {t.name for ts in agent.user_tools if isinstance(ts, Toolset) for t in ts.tools}
    servers = [s.name for s in agent.mcp_servers]
    names = ToolNames.of(root, tool_map, toolset_tools, servers)
    session = Session(agent, names, tools=tools, model=model, instructions=instructions)
    return GuardrailHooks(sdk, session)


def _claude_mcp_config(server: MCPServer) -> dict[str, Any]:
    """A ``gr.MCPServer`` as ``ClaudeAgentOptions(mcp_servers={...})`` takes it."""
    if server.url is not None:
        return {"type": "http", "url": server.url, "headers": dict(server.headers or {})}
    if server.cwd is not None:
        raise ConfigError(
            f"MCPServer {server.name!r} has cwd=, which a Claude Agent SDK session cannot "
            "give its servers: drop cwd= and give the server's paths in full in args="
        )
    return {
        "type": "stdio",
        "command": server.command,
        "args": list(server.args),
        "env": dict(server.env or {}),
    }


class GuardrailHooks:
    """An agent's guardrails for one Claude Agent SDK session: ``.hooks`` and ``.run``."""

    def __init__(self, sdk: ModuleType, session: Session) -> None:
        self._sdk, self._session = sdk, session
        self._callbacks = callbacks = HookCallbacks(session, session.view)
        self._quiet: set[int] = set()
        """Options built with the stream events on by default (not passed on)."""
        matcher = sdk.HookMatcher
        self.hooks: dict[str, list[Any]] = {
            # fail-closed (seed 002): if this hook itself fails, the CLI blocks the call
            "PreToolUse": [matcher(hooks=[callbacks.pre_tool_use], on_failure="block")],
            "PostToolUse": [matcher(hooks=[callbacks.post_tool_use])],
            "PostToolUseFailure": [matcher(hooks=[callbacks.post_tool_use_failure])],
            "Stop": [matcher(hooks=[callbacks.stop])],
        }

    @property
    def run(self) -> Run:
        return self._session.run

    @property
    def cwd(self) -> Path:
        return self._session.names.cwd

    def observe(self, message: Any) -> None:
        """Tell the run about one message of the session's stream (turns, tokens, the end);
        :meth:`query` does it for every message."""
        self._session.observe(message)

    def options(self, **fields: Any) -> ClaudeAgentOptions:
        """``ClaudeAgentOptions`` with these hooks (before any of ``hooks=``), the session's
        ``cwd``, ``max_turns`` (and ``max_budget_usd`` under a cost limit) from the agent's
        ``gr.Budget`` and the API's stream events on
        (``include_partial_messages``, for whole model calls); other fields as given."""
        sdk, session = self._sdk, self._session
        theirs = fields.pop("hooks", None) or {}
        _check_async(theirs, fields.get("can_use_tool"))
        cwd = Path(fields.setdefault("cwd", self.cwd)).expanduser().resolve()
        if cwd != self.cwd:
            raise ConfigError(
                f"cwd {str(cwd)!r} is not the guardrails' cwd {str(self.cwd)!r}; pass "
                "cwd= to guardrail_hooks(agent, cwd=...) instead"
            )
        if fields.get("permission_mode") == "bypassPermissions" and _root():
            raise ConfigError(
                "the Claude Code CLI refuses permission_mode='bypassPermissions' as root; use "
                "'acceptEdits' (file edits) with allowed_tools=[...] for the rest"
            )
        spec = session.state.guards.spec
        check_asks_reach_a_person(spec, fields)
        if spec.bindings and not fields.get("permission_prompt_tool_name"):
            # a policy may ask: the CLI asks can_use_tool, which gr answers (or passes on)
            fields["can_use_tool"] = CanUseTool(sdk, self._callbacks, fields.get("can_use_tool"))
        fields.setdefault("max_turns", session.agent.budget.max_iterations)
        if session.agent.budget.max_cost_usd is not None:  # the CLI's own backstop
            fields.setdefault("max_budget_usd", session.agent.budget.max_cost_usd)
        # the API's stream events give each model call whole (its text, tool uses and final
        # output tokens); query() passes them on only to a caller who asked for them
        quiet = "include_partial_messages" not in fields
        fields.setdefault("include_partial_messages", True)
        if session.tools is not None and "tools" not in fields:
            fields["tools"] = list(session.tools)
        if session.agent.mcp_servers and "mcp_servers" not in fields:
            # the same servers under the same names: Claude Code calls their tools
            # mcp__<server>__<tool>, the names the policies read
            servers = session.agent.mcp_servers
            fields["mcp_servers"] = {s.name: _claude_mcp_config(s) for s in servers}
        hooks = {event: list(matchers) for event, matchers in self.hooks.items()}
        for event, matchers in theirs.items():
            hooks.setdefault(event, []).extend(matchers)
        options: ClaudeAgentOptions = sdk.ClaudeAgentOptions(hooks=hooks, **fields)
        if quiet:
            self._quiet.add(id(options))
        return options

    async def query(
        self, prompt: str, *, options: ClaudeAgentOptions | None = None, **fields: Any
    ) -> AsyncIterator[Any]:
        """Run one session (``claude_agent_sdk.query``) under the guardrails, yielding its
        messages; ``options`` defaults to :meth:`options` of ``fields``."""
        sdk, session = self._sdk, self._session
        if options is None:
            options = self.options(**fields)
        elif fields:
            raise ConfigError("give options=ClaudeAgentOptions(...) or option fields, not both")
        else:
            _check_async(options.hooks or {}, options.can_use_tool)
            if not _has_ours(options.hooks or {}, self.hooks):
                raise ConfigError(
                    "these options lack the guardrail hooks; build them with "
                    "hooks.options(...), or pass ClaudeAgentOptions(hooks=hooks.hooks, ...)"
                )
        session.join(None)
        quiet = id(options) in self._quiet
        try:
            async for message in sdk.query(prompt=prompt, options=options):
                session.observe(message)
                if not (quiet and type(message).__name__ == "StreamEvent"):
                    yield message
        except sdk.ClaudeSDKError as exc:
            reported = getattr(sdk, "ResultError", None)
            if reported is not None and isinstance(exc, reported) and session.run.done:
                return  # the CLI's error result (a limit), already passed on and recorded
            session.finish(LoopOutcome("failed", f"{type(exc).__name__}: {exc}", exc))
            if isinstance(exc, sdk.CLIConnectionError | sdk.ProcessError):
                raise RunError(
                    f"the Claude Code CLI could not start or stopped ({type(exc).__name__}: "
                    f"{_first_line(exc)}); check ClaudeAgentOptions(cli_path=...), or "
                    f"reinstall the extra, which bundles the CLI: {EXTRA}"
                ) from exc
            raise
        except BaseException as exc:
            status: RunStatus = "failed" if isinstance(exc, Exception) else "interrupted"
            session.finish(LoopOutcome(status, f"{type(exc).__name__}: {exc}", exc))
            raise
        finally:
            if not session.run.done:
                session.finish(
                    session.outcome or LoopOutcome("failed", "the session ended with no result")
                )

    def __repr__(self) -> str:
        return f"<GuardrailHooks for {self.run.run_id} in {self.cwd}: {self.run.status}>"


def _root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _has_ours(hooks: Mapping[Any, Any], ours: Mapping[str, list[Any]]) -> bool:
    def callbacks(source: Mapping[Any, Any], event: str) -> set[Any]:
        return {cb for m in source.get(event, ()) for cb in getattr(m, "hooks", ())}

    return all(callbacks(ours, event) <= callbacks(hooks, event) for event in ours)


def _check_async(hooks: Mapping[Any, Any], can_use_tool: Any) -> None:
    """The SDK awaits every hook and ``can_use_tool``: a plain function fails only when the
    CLI first calls it, mid-session, so it is refused here."""
    for event, matchers in hooks.items():
        for matcher in matchers:
            for callback in getattr(matcher, "hooks", ()):
                if not _is_async(callback):
                    name = getattr(callback, "__name__", type(callback).__name__)
                    raise ConfigError(
                        f"the {event} hook {name!r} is a plain function, and the SDK awaits "
                        f"its hooks: define it as `async def {name}(input, tool_use_id, "
                        "context)`"
                    )
    if can_use_tool is not None and not _is_async(can_use_tool):
        name = getattr(can_use_tool, "__name__", type(can_use_tool).__name__)
        raise ConfigError(
            f"can_use_tool {name!r} is a plain function, and the SDK awaits it: define it as "
            f"`async def {name}(tool_name, input, context)`"
        )


def _is_async(callback: Any) -> bool:
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    )
