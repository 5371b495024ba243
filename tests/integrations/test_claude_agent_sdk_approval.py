"""A policy's ask in a Claude Agent SDK session: the SDK's own ``ask``, answered by gr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.events import ToolCallEvent
from gr_notebook.guardrails import ApprovalAnswer, ApprovalRequest
from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks
from tests.integrations.conftest import sdk_session

SCRIPT = [gr.tool_call("write_file", path="a.txt", content="hello\n"), gr.text("Done.")]


def agent_at(ws: Path, **kwargs: Any) -> gr.Agent:
    ws.mkdir(parents=True, exist_ok=True)
    return gr.Agent(
        workspace=ws,
        self_regulation=False,
        store=ws.parent / "store.sqlite",
        policies=[gr.ApprovalPolicy(tools=["write_file"])],
        **kwargs,
    )


def tool_results(session: Any) -> list[str]:
    last = session.turns[-1].body["messages"]
    return [
        str(block.get("content"))
        for message in last
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_an_ask_is_the_sdks_ask_and_a_persons_denial_reaches_claude(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    asked: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer.deny("write notes.md instead")

    session = await sdk_session(agent_at(ws, confirm=confirm), SCRIPT, ws)
    run = session.run
    assert [r.tool for r in asked] == ["Write"]
    assert not (ws / "a.txt").exists()
    assert any("Their reason: write notes.md instead" in t for t in tool_results(session))
    df = run.approvals_df()
    assert df[["asked", "decision", "by"]].values.tolist() == [["confirmer", "deny", "confirmer"]]
    [call] = [e for e in run.events if isinstance(e, ToolCallEvent)]
    assert call.is_error and "write notes.md instead" in call.result


async def test_an_edit_runs_as_edited(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    edited = {"file_path": str(ws / "b.txt"), "content": "edited\n"}
    session = await sdk_session(
        agent_at(ws, confirm=lambda r: ApprovalAnswer.edit(edited)), SCRIPT, ws
    )
    assert (ws / "b.txt").read_text() == "edited\n" and not (ws / "a.txt").exists()
    [call] = [e for e in session.run.events if isinstance(e, ToolCallEvent)]
    assert call.input["file_path"].endswith("b.txt") and not call.is_error


async def test_an_approval_runs_the_call(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    session = await sdk_session(agent_at(ws, confirm=lambda r: True), SCRIPT, ws)
    assert (ws / "a.txt").read_text() == "hello\n"
    assert session.run.approvals_df()["decision"].tolist() == ["approve"]


async def test_the_desk_is_attended_from_on_run(tmp_path: Path) -> None:
    from tests.guardrails.test_approval import approve_when_asked

    ws = tmp_path / "ws"
    agent = agent_at(ws)
    agent.on_run(approve_when_asked)
    session = await sdk_session(agent, SCRIPT, ws)
    assert (ws / "a.txt").read_text() == "hello\n"
    df = session.run.approvals_df()
    assert df[["asked", "decision", "by"]].values.tolist() == [["desk", "approve", "code"]]


async def test_nobody_to_ask_denies(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    session = await sdk_session(agent_at(ws), SCRIPT, ws)
    assert not (ws / "a.txt").exists()
    assert any("nobody is here to give it" in t for t in tool_results(session))


def test_options_that_would_swallow_the_ask_are_refused(tmp_path: Path) -> None:
    hooks = guardrail_hooks(agent_at(tmp_path / "ws"), cwd=tmp_path / "ws")
    with pytest.raises(ConfigError, match="dontAsk"):
        hooks.options(permission_mode="dontAsk")
    with pytest.raises(ConfigError, match="allowed_tools pre-approves Write"):
        hooks.options(allowed_tools=["Write", "Read"])
    assert hooks.options().can_use_tool is not None
