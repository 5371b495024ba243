"""The compatibility kit's guardrail scenarios, through the Claude Agent SDK: each script runs
on gr's own loop (ScriptedModel, gr's file tools) and as a Claude Code session (the real SDK
and CLI against the local server, Claude's file tools), and both must make the same
guardrail decisions, turn for turn. The sessions also show that what the guardrails decide
reaches the model as an order it can follow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_dashboard, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.display.timeline import describe
from gr_notebook.models import ModelResponse
from tests.gr_loop_text import GR_LOOP_TEXT
from tests.integrations.conftest import (
    AgentOf,
    agent_of,
    decisions,
    native_run,
    prepared,
    sdk_session,
)


async def both(
    tmp_path: Path,
    make: AgentOf,
    script: list[ModelResponse],
    files: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    native_ws = prepared(tmp_path / "native" / "ws", files or {})
    sdk_ws = prepared(tmp_path / "sdk" / "ws", files or {})
    native = await native_run(make, script, native_ws)
    session = await sdk_session(make(gr.ScriptedModel([]), sdk_ws), script, sdk_ws)
    assert not native.events.of_kind("error") and not session.run.events.of_kind("error")
    return decisions(native, native_ws), decisions(session.run, sdk_ws), session


def _tool_results(request_body: dict[str, Any]) -> list[dict[str, Any]]:
    last = request_body["messages"][-1]
    return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


async def test_a_policy_denial(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.tool_call("read_file", path="data.md"),
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.text("Wrote data.md."),
    ]
    make = agent_of(policies=[gr.ReadBeforeWritePolicy()])
    native, sdk, session = await both(tmp_path, make, script, {"data.md": "old\n"})
    assert sdk == native
    assert [(row[1], row[2]) for row in sdk["policy"]] == [
        ("write_file", "deny"),
        ("read_file", "allow"),
        ("write_file", "allow"),
    ]
    ws = tmp_path / "sdk" / "ws"
    assert (ws / "data.md").read_text() == "new\n"  # the second write ran, the first did not
    # The denial reached Claude as the failed call's result, in Claude's own terms: the
    # tool it has (Read, not read_file) and the absolute path Read takes.
    [denied] = _tool_results(session.turns[1].body)
    assert denied["is_error"] is True
    assert f"read it first with Read('{ws}/data.md')" in denied["content"]
    assert "read_file" not in denied["content"]
    policy = session.run.policy_df()
    assert list(policy["tool"]) == ["Write", "Read", "Write"]  # what Claude called


async def test_feedback_on_its_cadence(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="a.md", content="a\n"),
        gr.tool_call("read_file", path="a.md"),
        gr.tool_call("write_file", path="b.md", content="b\n"),
        gr.tool_call("read_file", path="b.md"),
        gr.tool_call("write_file", path="c.md", content="c\n"),
        gr.text("Done."),
    ]
    static = gr.StaticFeedbackProvider("Check the style guide before the next file.")
    make = agent_of(
        feedback_providers=[gr.FeedbackProviderConfig(static, gr.FeedbackTrigger(every_n_calls=2))]
    )
    native, sdk, session = await both(tmp_path, make, script)
    assert sdk == native
    assert [row[2] for row in sdk["feedback"]] == [2, 4]  # every second call
    # Delivered as seed 002 says: PostToolUse's additionalContext, beside that call's result.
    with_feedback = [
        turn
        for turn, request in enumerate(session.turns)
        if "Check the style guide" in json.dumps(request.body["messages"][-1])
    ]
    assert with_feedback == [2, 4]


async def test_a_refused_early_stop(tmp_path: Path) -> None:
    script = [
        gr.text("All done!"),
        gr.tool_call("write_file", path="report.md", content="# Report\n"),
        gr.text("Done: report.md is written."),
    ]
    make = agent_of(task_completion_checker=gr.FileOutputChecker(["report.md"]))
    native, sdk, session = await both(tmp_path, make, script)
    assert sdk == native
    assert [(row[2], row[4]) for row in sdk["completion"]] == [(False, 1), (True, 0)]
    assert sdk["status"] == "completed"
    # The Stop hook's block reached Claude with the checker's feedback, and it went on.
    refusal = json.dumps(session.turns[1].body["messages"][-1])
    assert "STOP REFUSED" in refusal and "report.md" in refusal
    assert len(session.turns) == 3


async def test_the_check_is_bypassed_once_the_budget_is_spent(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="a.md", content="a\n"),
        gr.tool_call("write_file", path="b.md", content="b\n"),
        gr.text("Stopping here."),
    ]
    make = agent_of(task_completion_checker=gr.FileOutputChecker(["report.md"]), max_iterations=3)
    native, sdk, session = await both(tmp_path, make, script)
    assert sdk == native
    [(turn, _, complete, bypassed, _, _)] = sdk["completion"]
    assert (turn, complete, bypassed) == (3, None, "the iteration cap of 3 was reached")
    assert sdk["status"] == "budget_exhausted"  # a limit ended it with work left
    assert session.run.outcome is not None and session.run.outcome.limit is not None
    assert session.messages[-1].num_turns == 3  # max_turns came from gr.Budget


async def test_an_intervention_on_the_same_steps(tmp_path: Path) -> None:
    script = [gr.tool_call("read_file", path="a.md") for _ in range(6)] + [gr.text("Done.")]
    config = gr.InterventionConfig(
        check_every=1,
        min_steps_before_intervention=1,
        grace_period_after_reset=0,
        consecutive_stuck_tolerance=1,
    )
    native, sdk, session = await both(
        tmp_path, agent_of(interventions=config), script, {"a.md": "a"}
    )
    assert sdk["interventions"] == native["interventions"]
    assert [row[2] for row in sdk["interventions"] if row[3]] == [1, 2, 3]
    assert sdk["status"] == native["status"] == "stuck"
    # Tier 1 reached Claude beside the result, without naming gr's rewind tool.
    told = [json.dumps(r.body["messages"][-1]) for r in session.turns]
    strategy = [i for i, text in enumerate(told) if "STRATEGY CHECK" in text]
    assert strategy and "todo_rewind" not in told[strategy[0]]
    assert len(session.turns) == 4  # tier 3 stopped the session after step 4 of 6
    # Tier 2 reads as what the session had: a second strategy check, no todo list rewound.
    [tier_2] = [describe(e) for e in session.run.events.of_kind("intervention") if e.tier == 2]
    assert tier_2.endswith(": a second strategy check: the agent is told to start over another way")
    assert "after two strategy checks" in str(session.run.reason)
    tracker = RunTracker()
    for event in session.run.events:
        tracker.add(event)
    state = tracker.snapshot(session.run)
    shown = render_dashboard(state) + text_dashboard(state)
    assert "a second strategy check" in shown
    for words in GR_LOOP_TEXT:
        assert words not in shown, words


@pytest.mark.parametrize("denying", [True, False])
async def test_a_policy_that_raises_denies(tmp_path: Path, denying: bool) -> None:
    class Broken:
        name = "broken"

        def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
            if denying:
                raise RuntimeError("no database")
            return gr.PolicyDecision.allow()

        def on_result(self, *args: Any, **kwargs: Any) -> None:
            pass

    script = [gr.tool_call("write_file", path="a.md", content="a\n"), gr.text("Done.")]
    ws = prepared(tmp_path / "ws", {})
    session = await sdk_session(agent_of(policies=[Broken()])(gr.ScriptedModel([]), ws), script, ws)
    [row] = session.run.policy_df().to_dict("records")
    assert row["decision"] == ("deny" if denying else "allow")
    assert (ws / "a.md").exists() is (not denying)  # fail-closed: the write never ran
    if denying:
        assert "RuntimeError: no database" in row["reason"]
