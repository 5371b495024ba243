"""A Claude Agent SDK session shown and spoken to as what it is: its dashboard has its tool
calls, decisions, feedback, meters and real outcome, never gr's todo layer or plan; and what
the guardrails tell Claude names only what Claude has (no todo list, none of gr's tools).

The notebook-09 scenario runs through the real SDK and CLI against the local server."""

from __future__ import annotations

import re
from html import unescape as html_unescape
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_dashboard, render_run_card, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.events import FeedbackEvent, PromptInjectedEvent, ToolCallEvent
from gr_notebook.harness import CLAUDE_AGENT_SDK
from gr_notebook.jupyter.magics import status_line
from gr_notebook.workflow.prompts import stop_refused_prompt
from tests.gr_loop_text import GR_LOOP_TEXT
from tests.integrations.conftest import Session, sdk_session

GR_LOOP_WORDS = re.compile(
    r"todo|job_complete|summarize_progress|check_resources|assess_task|"
    r"\bread_file\b|\bwrite_file\b|\bedit_file\b",
    re.IGNORECASE,
)
"""What an order to Claude must not name: gr's todo list and gr's own tools."""
SECRET_MARKERS = ("API_KEY=", "sk-live-")
CHANGELOG = "## 1.1\n- Faster startup\n\n## 1.0\n- First release\n"
SCRIPT = [  # notebook 09's session, in gr's terms (conftest turns it into Claude's)
    gr.tool_call("write_file", path="CHANGELOG.md", content=CHANGELOG),
    gr.tool_call("read_file", path="CHANGELOG.md"),
    gr.tool_call("write_file", path="CHANGELOG.md", content=CHANGELOG + "API_KEY=sk-live-42\n"),
    gr.tool_call("write_file", path="CHANGELOG.md", content=CHANGELOG),
    gr.text("CHANGELOG.md is updated."),
    gr.tool_call("write_file", path="RELEASE.md", content="# 1.1\nFaster startup.\n"),
    gr.text("Done: CHANGELOG.md and RELEASE.md are written."),
]


class NoSecretsPolicy:
    name = "no_secrets"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        text = str(params.get("content", "")) + str(params.get("new_string", ""))
        found = [m for m in SECRET_MARKERS if m in text]
        if tool.name in ("write_file", "edit_file") and found:
            return gr.PolicyDecision.deny(
                f"the new content contains {found[0]!r}, which looks like a credential; "
                "write the file again without it"
            )
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


def release_agent(ws: Path, **overrides: Any) -> gr.Agent:
    """Notebook 09's agent: two policies, feedback every 3 calls, RELEASE.md required."""
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "CHANGELOG.md").write_text("## 1.0\n- First release\n")
    guardrails: dict[str, Any] = dict(
        policies=[NoSecretsPolicy(), gr.ReadBeforeWritePolicy()],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Keep each changelog entry to one line."),
                gr.FeedbackTrigger(every_n_calls=3),
            )
        ],
        task_completion_checker=gr.FileOutputChecker(["RELEASE.md"]),
    )
    return gr.Agent(workspace=ws, store=False, self_regulation=False, **{**guardrails, **overrides})


def told_by_gr(run: gr.Run) -> list[str]:
    """Every text the guardrails sent Claude: denials, feedback blocks, refused stops and
    other injected orders."""
    texts = []
    for event in run.events:
        if isinstance(event, PromptInjectedEvent | FeedbackEvent):
            texts.append(event.text)
        elif isinstance(event, ToolCallEvent) and event.directive is not None:
            texts.append(event.result)
    return texts


def stop_feedback(session: Session) -> list[str]:
    """The Stop hook's feedback as Claude read it, from the CLI's requests."""
    found = []
    for request in session.turns:
        for block in request.body["messages"][-1]["content"]:
            text = block.get("text", "") if isinstance(block, dict) else ""
            if text.startswith("Stop hook feedback:"):
                found.append(text)
    return found


async def test_the_notebook_09_session_on_its_dashboard(tmp_path: Path) -> None:
    from gr_notebook.jupyter.widgets import Dashboard, TodoPanel

    ws = tmp_path / "ws"
    session = await sdk_session(release_agent(ws), SCRIPT, ws)
    run = session.run
    assert run.harness == CLAUDE_AGENT_SDK
    assert run.status == "completed" and (ws / "RELEASE.md").exists()
    assert run.job is not None and run.job.source == "completion_check"
    assert run.job.summary == "Done: CHANGELOG.md and RELEASE.md are written."
    assert run.completion_df()["complete"].tolist() == [False, True]

    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    state = tracker.snapshot(run)
    assert state.note is None and not state.ended_early  # a success, said as one
    assert [c.describe() for c in reversed(state.calls)] == [
        "Write CHANGELOG.md: denied by read_before_write",
        "Read CHANGELOG.md: ran",
        "Write CHANGELOG.md: denied by no_secrets",
        "Write CHANGELOG.md: ran",
        "Write RELEASE.md: ran",
    ]
    html, text = render_dashboard(state), text_dashboard(state)
    card = render_run_card(state, turns=run.turns, phases_completed=0)
    for shown in (html, text, card, repr(run)):
        for words in GR_LOOP_TEXT:
            assert words not in shown, (words, shown)
    assert "class='gr-todos'" not in html and "class='gr-plan'" not in html
    assert "class='gr-calls'" in html and "class='gr-meters'" in html
    assert "denied by no_secrets" in html and "Keep each changelog entry" in html
    assert text.startswith(f"Run {run.run_id}: completed\nJob complete: Done: CHANGELOG.md")
    assert "Tool calls (newest first, 5 in all):" in text
    assert "refused" in text  # the refused stop is on the timeline
    assert "job complete" in repr(run) and "a Claude Agent SDK session" in repr(run)

    # The widget, on the finished session, as it settled in the notebook.
    dash = Dashboard(run)
    assert dash.todos is None and dash.calls is not None
    assert not any(isinstance(c, TodoPanel) for c in _tree(dash))
    assert "<code>Write</code> RELEASE.md: <span" in dash.calls.value
    assert [b.description for b in dash._controls.children] == ["Stop"]
    dash.toggle_pause()
    assert f"cannot pause: run {run.run_id} is a Claude Agent SDK session" in dash.log_panel.value
    with pytest.raises(gr.RunError, match="is a Claude Agent SDK session") as refused:
        run.pause()
    assert str(refused.value) in html_unescape(dash.log_panel.value)  # one wording for both
    bundle = dash._repr_mimebundle_()
    for words in GR_LOOP_TEXT:
        assert words not in bundle["text/html"] and words not in bundle["text/plain"]
    dash.close()

    # What Claude was told is worded for Claude, and the orders do not contradict.
    told = told_by_gr(run)
    assert any(t.startswith("STOP REFUSED") for t in told) and len(told) >= 4
    assert all(not GR_LOOP_WORDS.search(t) for t in told), told
    [refusal] = stop_feedback(session)
    assert "RELEASE.md" in refusal and "Keep working on the task" in refusal
    assert not GR_LOOP_WORDS.search(refusal)
    assert gr.lint_guidance(run) == []


async def test_a_dashboard_opened_before_the_session_shows_it_live(tmp_path: Path) -> None:
    """As in the notebook: the dashboard is shown first, then the session runs under it."""
    from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks, local_env
    from gr_notebook.jupyter.widgets import Dashboard
    from gr_notebook.testing import MessagesServer
    from tests.integrations.conftest import MODEL, claude_script, side_request

    ws = tmp_path / "ws"
    hooks = guardrail_hooks(release_agent(ws), cwd=ws, model=f"claude-agent-sdk:{MODEL}")
    dash = Dashboard(hooks.run)
    before = render_dashboard(dash.state())
    assert "No tool calls yet." in before and "class='gr-todos'" not in before
    with MessagesServer(claude_script(SCRIPT, ws), side=side_request) as server:
        async for _ in hooks.query(
            "Do the job.",
            permission_mode="acceptEdits",
            tools=["Read", "Write", "Edit"],
            model=MODEL,
            env=local_env(server.url, tmp_path / "config"),
        ):
            pass
    dash.refresh()
    assert dash.calls is not None and "denied by read_before_write" in dash.calls.value
    assert "completed" in dash.header.value and "Done: CHANGELOG.md" in dash.header.value
    assert "not complete" not in dash.header.value
    dash.close()


async def test_a_plan_checker_refuses_in_claudes_words(tmp_path: Path) -> None:
    """PlanBasedChecker in a session: a plan file with a step left refuses the stop without
    naming gr's todo tools; the plan revised, the stop goes through."""
    ws = tmp_path / "ws"
    ws.mkdir()
    plan = "# Plan\n\n## Phase 1: Release\n- [{}] Write RELEASE.md\n"
    (ws / "main_plan.md").write_text(plan.format(" "))
    agent = gr.Agent(
        workspace=ws,
        store=False,
        self_regulation=False,
        task_completion_checker=gr.PlanBasedChecker(),
    )
    script = [
        gr.text("All done."),
        gr.tool_call("write_file", path="main_plan.md", content=plan.format("x")),
        gr.text("Done."),
    ]
    session = await sdk_session(agent, script, ws)
    assert session.run.status == "completed"
    [refusal] = stop_feedback(session)
    assert "The plan has 1 unfinished step in 1 phase: Write RELEASE.md" in refusal
    assert "Finish them, or revise the plan" in refusal
    assert not GR_LOOP_WORDS.search(refusal), refusal
    assert gr.lint_guidance(session.run) == []


async def test_without_a_checker_the_outcome_is_not_claimed(tmp_path: Path) -> None:
    """No completion check: the session ended, and nothing confirmed the job."""
    ws = tmp_path / "ws"
    agent = release_agent(ws, task_completion_checker=None)
    session = await sdk_session(agent, [*SCRIPT[:2], gr.text("Done.")], ws)
    run = session.run
    assert run.job is None
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    state = tracker.snapshot(run)
    assert state.ended_early
    assert state.note == "the model ended its turn; no completion check confirmed the job"
    assert "no completion check confirmed the job" in render_dashboard(state)
    line = status_line(run)  # %agent status
    assert "a Claude Agent SDK session" in line and "tasks" not in line, line


def _tree(widget: Any) -> list[Any]:
    children = list(getattr(widget, "children", ()))
    return children + [d for c in children for d in _tree(c)]


def test_gr_loop_keeps_its_wording() -> None:
    """gr's own loop is still told of its todo list and tools, so the pattern above would
    catch the same words sent to Claude."""
    native = stop_refused_prompt("<blocker>x</blocker>", refusals=1, limit=8)
    claude = stop_refused_prompt(
        "<blocker>x</blocker>", refusals=1, limit=8, harness=CLAUDE_AGENT_SDK
    )
    assert "Keep working through your todo list" in native and GR_LOOP_WORDS.search(native)
    assert "Keep working on the task" in claude and not GR_LOOP_WORDS.search(claude)
