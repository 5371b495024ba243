"""``ClaudeOrStandIn``: notebook 09's offline set-up in one object. With no key, the real SDK
and CLI run a session against a local server playing a gr script as Claude; the same script
on gr's loop makes the same decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.examples import changelog_job
from gr_notebook.integrations.claude_agent_sdk import (
    ClaudeOrStandIn,
    claude_script,
    guardrail_hooks,
)
from gr_notebook.messages import ToolUseBlock


def test_it_says_where_sessions_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    claude = ClaudeOrStandIn(changelog_job().script, cwd=tmp_path, config_dir=tmp_path / "c")
    assert claude.sdk and claude.stand_in and not claude.on_claude
    assert str(claude).startswith("ANTHROPIC_API_KEY is not set, so sessions run on a stand-in")
    with pytest.raises(RuntimeError, match="start the stand-in first"):
        _ = claude.options
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    keyed = ClaudeOrStandIn((), cwd=tmp_path, config_dir=tmp_path / "c")
    assert keyed.on_claude and not keyed.stand_in
    assert keyed.options == {"env": {"CLAUDE_CONFIG_DIR": str(tmp_path / "c")}}
    with keyed:
        assert keyed.turns == []  # on Claude nothing is recorded here


async def test_a_stand_in_session_decides_as_grs_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    job = changelog_job()
    ws = job.prepare(tmp_path / "sdk").root

    def agent(model: object, at: Path) -> gr.Agent:
        return gr.Agent(
            model,
            workspace=at,
            store=False,
            self_regulation=False,
            policies=[gr.ReadBeforeWritePolicy()],
            task_completion_checker=gr.FileOutputChecker(["RELEASE.md"]),
        )

    hooks = guardrail_hooks(agent(None, ws), model="claude-agent-sdk:claude-sonnet-4-6")
    claude = ClaudeOrStandIn(job.script, cwd=ws, config_dir=tmp_path / "claude-config")
    assert [
        b.name
        for r in claude_script(job.script, ws)
        for b in r.content
        if isinstance(b, ToolUseBlock)
    ] == [
        "Write",
        "Read",
        "Write",
        "Write",
        "Write",
    ]
    with claude:
        async for _ in hooks.query(
            job.instructions,
            permission_mode="acceptEdits",
            tools=["Read", "Write"],
            **claude.options,
        ):
            pass
    run = hooks.run
    assert run.status == "completed" and (ws / "RELEASE.md").is_file()
    assert "Denied by policy 'read_before_write': 'CHANGELOG.md' already exists" in claude.told(2)
    assert str(ws) not in claude.told(2)  # paths are the workspace's own

    native_ws = job.prepare(tmp_path / "native").root
    native = await agent(gr.ScriptedModel(list(job.script)), native_ws).run(job.instructions)
    columns = ["turn", "decision", "guardrail"]
    assert native.policy_df()[columns].equals(run.policy_df()[columns])
