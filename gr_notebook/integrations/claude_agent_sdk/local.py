"""A Claude Agent SDK session on this machine: the Claude Code CLI against a local Messages
API server, and a stand-in that plays Claude from a script.

The CLI the SDK bundles honours ``ANTHROPIC_BASE_URL``; with non-essential traffic off it
sends nothing but model requests, so a session runs on loopback with no key and no network
(tests, and notebook 09 when no key is set, use :class:`gr_notebook.testing.MessagesServer`).
Its own files (settings, session transcripts) go to ``config_dir`` rather than ``~/.claude``.
:class:`ClaudeOrStandIn` is that set-up in one object, for a notebook that runs on Claude
when a key is set and on the stand-in otherwise.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from gr_notebook.integrations.claude_agent_sdk.bridge import EXTRA
from gr_notebook.messages import ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.scripted import text
from gr_notebook.testing.messages_server import MessagesServer, RecordedRequest

__all__ = ["MODEL", "ClaudeOrStandIn", "claude_script", "local_env", "side_request"]

MODEL = "claude-sonnet-4-6"
"""The model a stand-in session names (the server answers whatever it is asked)."""
_CLAUDE_OF = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit"}
_REMINDER_TAIL = "<system-reminder>\n<total"
"""Where the CLI's own note on the tokens left begins, at the end of a request."""


def local_env(base_url: str, config_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``ClaudeAgentOptions(env=...)`` for a session against the server at ``base_url``."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "local-server",  # the CLI wants one; the local server ignores it
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CONFIG_DIR": os.fspath(config_dir),
        "DISABLE_AUTOUPDATER": "1",
    }


def claude_script(
    script: Iterable[ModelResponse], cwd: str | os.PathLike[str]
) -> list[ModelResponse]:
    """A script of gr's responses (``gr.tool_call("write_file", path=...)``) as Claude Code
    takes it: gr's file tools as ``Read``, ``Write`` and ``Edit``, with the absolute
    ``file_path`` in ``cwd`` they take; any other block as it is."""
    root = Path(cwd)
    out = []
    for response in script:
        blocks = []
        for block in response.content:
            if isinstance(block, ToolUseBlock) and block.name in _CLAUDE_OF:
                params = dict(block.input)
                params["file_path"] = str(root / params.pop("path"))
                block = ToolUseBlock(block.id, _CLAUDE_OF[block.name], params)
            blocks.append(block)
        out.append(replace(response, content=tuple(blocks)))
    return out


def side_request(body: Mapping[str, Any]) -> ModelResponse | None:
    """A request with no tools is the CLI's own (a title, a summary), not the agent's turn:
    the stand-in answers it without using up the script."""
    return None if body.get("tools") else text("(a side request)")


class ClaudeOrStandIn:
    """Where a notebook's session gets its model: Claude when ``ANTHROPIC_API_KEY`` is set
    (``on_claude``), else a stand-in that plays ``script`` (gr's responses, as for a
    ``gr.ScriptedModel``) from a local Messages API server. The real SDK and its Claude Code
    CLI run either way; ``sdk`` says whether the SDK is installed.

    Used as a context manager it starts and stops the stand-in's server; ``options`` are
    the ``hooks.query(...)`` fields that point the CLI at it (or keep the CLI's files in
    ``config_dir`` on Claude), and :meth:`told` shows what the CLI sent at a turn."""

    def __init__(
        self,
        script: Sequence[ModelResponse],
        *,
        cwd: str | os.PathLike[str],
        config_dir: str | os.PathLike[str],
    ) -> None:
        self.cwd, self.config_dir = Path(cwd), Path(config_dir)
        self.sdk = importlib.util.find_spec("claude_agent_sdk") is not None
        self.on_claude = self.sdk and bool(os.environ.get("ANTHROPIC_API_KEY"))
        self._script = claude_script(script, self.cwd)
        self._server: MessagesServer | None = None
        self._requests: list[RecordedRequest] = []

    @property
    def stand_in(self) -> bool:
        """A session runs on the stand-in (the SDK is installed and no key is set)."""
        return self.sdk and not self.on_claude

    def __enter__(self) -> Self:
        if self.stand_in:
            self._server = MessagesServer(self._script, side=side_request).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._requests = self._server.requests
            self._server.close()
            self._server = None

    @property
    def options(self) -> dict[str, Any]:
        """The fields of ``hooks.query(prompt, **fields)`` that say where the model is."""
        if self._server is not None:
            return {"model": MODEL, "env": local_env(self._server.url, self.config_dir)}
        if self.stand_in:
            raise RuntimeError("start the stand-in first: with claude: ... hooks.query(...)")
        return {"env": {"CLAUDE_CONFIG_DIR": os.fspath(self.config_dir)}}

    @property
    def turns(self) -> list[RecordedRequest]:
        """The stand-in's requests that were the agent's turns (none on Claude)."""
        requests = self._server.requests if self._server is not None else self._requests
        return [r for r in requests if r.body.get("tools")]

    def told(self, turn: int) -> str:
        """What the CLI sent Claude at its ``turn``-th request (from 1) after the last
        answer: tool results and notes, paths relative to ``cwd``."""
        last = self.turns[turn - 1].body["messages"][-1]["content"]
        texts = [b["content"] if b["type"] == "tool_result" else b["text"] for b in last]
        said = "\n".join(t if isinstance(t, str) else str(t) for t in texts)
        return said.replace(f"{self.cwd}/", "").split(_REMINDER_TAIL)[0]

    def __str__(self) -> str:
        if not self.sdk:
            return f"The Claude Agent SDK is not installed, so the SDK cells are skipped: {EXTRA}"
        if self.on_claude:
            return "Sessions run on Claude (ANTHROPIC_API_KEY is set); they cost real money."
        return (
            "ANTHROPIC_API_KEY is not set, so sessions run on a stand-in: the real SDK and "
            "Claude Code CLI, offline, against a local server replaying a script that plays Claude."
        )
