"""Claude Agent SDK sessions against the local Messages API server: the real SDK and the
Claude Code CLI it bundles, on loopback, with no key."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import gr_notebook as gr
from gr_notebook.integrations.claude_agent_sdk import (
    CLAUDE_CODE_FILE_TOOLS,
    GuardrailHooks,
    claude_script,
    guardrail_hooks,
    local_env,
    side_request,
)
from gr_notebook.integrations.claude_agent_sdk.local import MODEL
from gr_notebook.models import Model, ModelResponse
from gr_notebook.testing import MessagesServer, RecordedRequest

TOOLS = ["Read", "Write", "Edit"]


@dataclass
class Session:
    hooks: GuardrailHooks
    requests: list[RecordedRequest]
    messages: list[Any]

    @property
    def run(self) -> gr.Run:
        return self.hooks.run

    @property
    def turns(self) -> list[RecordedRequest]:
        return [
            r for r in self.requests if r.path == "/v1/messages" and side_request(r.body) is None
        ]


async def sdk_session(
    agent: gr.Agent, script: Sequence[ModelResponse], ws: Path, **fields: Any
) -> Session:
    """One session of ``agent``'s guardrails over the (gr) ``script``, in ``ws``."""
    hooks = guardrail_hooks(agent, cwd=ws, model=f"claude-agent-sdk:{MODEL}")
    fields.setdefault("tools", TOOLS)
    with MessagesServer(claude_script(script, ws), side=side_request) as server:
        options = hooks.options(
            permission_mode="acceptEdits",
            model=MODEL,
            env=local_env(server.url, ws.parent / "claude-config"),
            **fields,
        )
        messages = [m async for m in hooks.query("Do the job.", options=options)]
        return Session(hooks, server.requests, messages)


async def native_run(
    agent_of: Callable[[Model, Path], gr.Agent], script: Sequence[ModelResponse], ws: Path
) -> gr.Run:
    """The same script on gr's own loop, awaited on the test's loop as the session is
    (``run_sync`` in a running loop would run it on a worker thread's loop of its own)."""
    return await agent_of(gr.ScriptedModel(list(script)), ws).run("Do the job.")


_NAMES = re.compile(r"\b(" + "|".join(CLAUDE_CODE_FILE_TOOLS) + r")\b")


def decisions(run: gr.Run, ws: Path) -> dict[str, Any]:
    """The guardrails' decisions in gr's terms: tool names and workspace-relative paths."""

    def plain(value: Any) -> Any:
        if isinstance(value, str):
            value = value.replace(f"{ws}/", "")
            return _NAMES.sub(lambda m: CLAUDE_CODE_FILE_TOOLS[m.group(1)].name, value)
        return None if isinstance(value, float) and pd.isna(value) else value

    def rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
        return [tuple(plain(r[c]) for c in columns) for r in frame.to_dict("records")]

    return {
        "status": run.status,
        "policy": rows(run.policy_df(), ["turn", "tool", "decision", "guardrail", "reason"]),
        "feedback": rows(run.feedback_df(), ["turn", "provider", "call_index", "tool", "text"]),
        "completion": rows(
            run.completion_df(), ["turn", "stop", "complete", "bypassed", "refusals", "feedback"]
        ),
        "interventions": rows(
            run.interventions_df(), ["step", "turn", "tier", "fired", "skip_reason"]
        ),
    }


AgentOf = Callable[[Model, Path], gr.Agent]


def agent_of(**guardrails: Any) -> AgentOf:
    """The same agent definition on either side of a compatibility scenario; self-regulation
    is gr's own tools, which a bridged session does not have."""

    def make(model: Model, ws: Path) -> gr.Agent:
        guardrails.setdefault("interventions", None)
        return gr.Agent(model, workspace=ws, store=False, self_regulation=False, **guardrails)

    return make


def prepared(ws: Path, files: dict[str, str]) -> Path:
    """``ws``, made and holding ``files``."""
    ws.mkdir(parents=True)
    for name, content in files.items():
        (ws / name).write_text(content)
    return ws
