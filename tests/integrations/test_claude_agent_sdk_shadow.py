"""Shadow guardrails in a Claude Agent SDK session: the hooks ask them where they ask the
live guardrails, record their decisions in Claude's terms, and tell Claude nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gr_notebook as gr
from tests.integrations.conftest import sdk_session
from tests.integrations.test_claude_agent_sdk import SCRIPT, agent_at

TOKENS_LEFT = re.compile(r"<total_tokens>\d+ tokens left</total_tokens>")
SHADOWS: list[object] = [
    gr.ReadBeforeWritePolicy(),  # the first write of data.md comes before any read of it
    gr.FeedbackProviderConfig(
        provider=gr.StaticFeedbackProvider("Check your work.", name="Checker"),
        trigger=gr.FeedbackTrigger(every_n_calls=1),
    ),
    gr.FileOutputChecker(["report.md"]),
    gr.InterventionConfig(
        check_every=1,
        min_steps_before_intervention=1,
        consecutive_stuck_tolerance=1,
        grace_period_after_reset=0,
        active_edit_threshold=99,
    ),
]


def _results(requests: list[Any], root: Path) -> list[str]:
    """What Claude was told of its calls, turn by turn: every tool result (and whatever
    context a hook added to it), with the session's own folder and the CLI's count of
    tokens left (its estimate of the request, which varies) left out."""
    return [
        TOKENS_LEFT.sub("", str(block.get("content")).replace(str(root), ""))
        for r in requests
        for message in r.body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_shadows_decide_in_the_session_and_claude_hears_nothing(tmp_path: Path) -> None:
    sessions = {}
    for label, shadow in (("plain", []), ("shadow", SHADOWS)):  # folders of one length
        ws = tmp_path / label / "ws"
        agent = agent_at(ws, shadow=shadow, interventions=None)
        (ws / "data.md").write_text("old\n")
        sessions[label] = await sdk_session(agent, SCRIPT, ws)
    plain, shadowed = sessions["plain"], sessions["shadow"]
    run = shadowed.run
    assert run.status == plain.run.status == "ended"
    sent = _results(shadowed.turns, tmp_path / "shadow")
    assert len(sent) > 3 and sent == _results(plain.turns, tmp_path / "plain")
    assert "Check your work" not in str(sent) and "Denied" not in str(sent)
    assert not run.tool_calls_df().is_error.any()
    # recorded in Claude's terms, as shadow decisions
    [denial] = run.policy_df().query("decision == 'deny'").itertuples()
    assert (denial.mode, denial.tool) == ("shadow", "Write")
    assert "Read" in denial.reason and "read_file" not in denial.reason
    assert set(run.feedback_df()["mode"]) == {"shadow"}
    assert set(run.feedback_df().tool) == {"Write", "Read"}
    assert list(run.completion_df().complete) == [False]
    assert set(run.interventions_df()["mode"]) == {"shadow"}
    kinds = set(run.shadow_df().kind)
    assert kinds == {"policy", "feedback", "checker", "intervention"}
    assert plain.run.shadow_df().empty
    assert gr.lint_guidance(run) == []
    await run.wait()
