"""The compatibility kit's guardrail scenarios, through LangChain: each script runs on gr's
own loop (ScriptedModel) and as a LangChain agent (``create_agent`` with the guardrail
middleware and a fake chat model that calls tools), and both must make the same guardrail
decisions, turn for turn; what the guardrails decide reaches the model as an order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

import gr_notebook as gr
from gr_notebook.display.timeline import describe
from gr_notebook.models import ModelResponse
from tests.integrations.conftest import AgentOf, agent_of, decisions, native_run, prepared
from tests.integrations.langchain_kit import LangChainSession, langchain_session


async def both(
    tmp_path: Path,
    make: AgentOf,
    script: list[ModelResponse],
    files: dict[str, str] | None = None,
    *,
    sync: bool = False,
) -> tuple[dict[str, Any], dict[str, Any], LangChainSession]:
    native_ws = prepared(tmp_path / "native" / "ws", files or {})
    lc_ws = prepared(tmp_path / "langchain" / "ws", files or {})
    native = await native_run(make, script, native_ws)
    session = await langchain_session(make(gr.ScriptedModel([]), lc_ws), script, lc_ws, sync=sync)
    assert not native.events.of_kind("error") and not session.run.events.of_kind("error")
    return decisions(native, native_ws), decisions(session.run, lc_ws), session


def _tool_messages(session: LangChainSession) -> list[ToolMessage]:
    return [m for m in session.messages if isinstance(m, ToolMessage)]


async def test_a_policy_denial(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.tool_call("read_file", path="data.md"),
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.text("Wrote data.md."),
    ]
    make = agent_of(policies=[gr.ReadBeforeWritePolicy()])
    native, lc, session = await both(tmp_path, make, script, {"data.md": "old\n"})
    assert lc == native
    assert [(row[1], row[2]) for row in lc["policy"]] == [
        ("write_file", "deny"),
        ("read_file", "allow"),
        ("write_file", "allow"),
    ]
    assert (tmp_path / "langchain" / "ws" / "data.md").read_text() == "new\n"
    denied = _tool_messages(session)[0]
    assert denied.status == "error"
    assert "read it first with read_file('data.md')" in denied.text


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
    native, lc, session = await both(tmp_path, make, script)
    assert lc == native
    assert [row[2] for row in lc["feedback"]] == [2, 4]
    # inside the result of the call that triggered it, as gr's loop delivers it
    told = ["Check the style guide" in m.text for m in _tool_messages(session)]
    assert told == [False, True, False, True, False]


async def test_a_refused_early_stop(tmp_path: Path) -> None:
    script = [
        gr.text("All done!"),
        gr.tool_call("write_file", path="report.md", content="# Report\n"),
        gr.text("Done: report.md is written."),
    ]
    make = agent_of(task_completion_checker=gr.FileOutputChecker(["report.md"]))
    native, lc, session = await both(tmp_path, make, script)
    assert lc == native
    assert [(row[2], row[4]) for row in lc["completion"]] == [(False, 1), (True, 0)]
    assert lc["status"] == "completed"
    # the refusal reached the model as the next message, and it went on
    refusal = session.model.seen[1][-1]
    assert isinstance(refusal, HumanMessage)
    assert "STOP REFUSED" in refusal.text and "report.md" in refusal.text
    assert "todo" not in refusal.text  # a LangChain agent has no todo list of gr's
    assert len(session.model.seen) == 3


async def test_the_check_is_bypassed_once_the_budget_is_spent(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="a.md", content="a\n"),
        gr.tool_call("write_file", path="b.md", content="b\n"),
        gr.text("Stopping here."),
    ]
    make = agent_of(task_completion_checker=gr.FileOutputChecker(["report.md"]), max_iterations=3)
    native, lc, session = await both(tmp_path, make, script)
    assert lc == native
    [(turn, _, complete, bypassed, _, _)] = lc["completion"]
    assert (turn, complete, bypassed) == (3, None, "the iteration cap of 3 was reached")
    assert lc["status"] == "budget_exhausted"
    assert session.run.outcome is not None and session.run.outcome.limit is not None


async def test_a_spent_budget_ends_the_session(tmp_path: Path) -> None:
    script = [gr.tool_call("write_file", path=f"{i}.md", content="x\n") for i in range(5)]
    make = agent_of(max_iterations=3)
    native, lc, session = await both(tmp_path, make, script)
    assert lc == native
    assert lc["status"] == "budget_exhausted"
    assert len(session.model.seen) == 3  # the fourth call was never made
    assert session.run.outcome is not None and session.run.outcome.limit is not None
    assert session.run.outcome.limit.kind == "iterations"


async def test_an_intervention_on_the_same_steps(tmp_path: Path) -> None:
    script = [gr.tool_call("read_file", path="a.md") for _ in range(6)] + [gr.text("Done.")]
    config = gr.InterventionConfig(
        check_every=1,
        min_steps_before_intervention=1,
        grace_period_after_reset=0,
        consecutive_stuck_tolerance=1,
    )
    native, lc, session = await both(
        tmp_path, agent_of(interventions=config), script, {"a.md": "a"}
    )
    assert lc["interventions"] == native["interventions"]
    assert [row[2] for row in lc["interventions"] if row[3]] == [1, 2, 3]
    assert lc["status"] == native["status"] == "stuck"
    results = [m.text for m in _tool_messages(session)]
    strategy = [i for i, text in enumerate(results) if "STRATEGY CHECK" in text]
    assert strategy and "todo_rewind" not in results[strategy[0]]
    assert len(session.model.seen) == 4  # tier 3 ended the session after step 4 of 6
    [tier_2] = [describe(e) for e in session.run.events.of_kind("intervention") if e.tier == 2]
    assert "a second strategy check" in tier_2


async def test_sync_invoke_makes_the_same_decisions(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.tool_call("read_file", path="data.md"),
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.text("Wrote data.md."),
    ]
    make = agent_of(policies=[gr.ReadBeforeWritePolicy()])
    native, lc, _ = await both(tmp_path, make, script, {"data.md": "old\n"}, sync=True)
    assert lc == native
