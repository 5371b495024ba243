"""The dashboard of a run another harness ran (a Claude Agent SDK session): its tool calls in
place of the todo layer, no plan panel, its real outcome; gr's own runs are drawn as before.
Pure values, no kernel and no SDK."""

from __future__ import annotations

import dataclasses

from gr_notebook.display.render import (
    render_calls,
    render_dashboard,
    render_run_card,
    text_dashboard,
)
from gr_notebook.display.state import DashboardState, Meter, RunTracker, ToolCallEntry
from gr_notebook.events import EventLog, GuidanceRecord
from gr_notebook.harness import CLAUDE_AGENT_SDK, GR_LOOP
from gr_notebook.workflow import TodoList
from tests.gr_loop_text import GR_LOOP_TEXT


def _order(source: str) -> GuidanceRecord:
    return GuidanceRecord(
        source=source,
        action="do_first",
        text="read it first",
        reads=(),
        avoid_reads=(),
        from_limits=False,
        phase_name="",
        phase_kind="",
        tasks_left=0,
        phases_left=None,
        job_done=False,
        tokens_pct=None,
        iterations_pct=None,
        deadline_pct=None,
        limits_pct=None,
    )


def _calls(log: EventLog) -> None:
    log.append("tool_call", _call("Write", {"file_path": "/ws/a.md"}, True, "policy:rbw"), turn=1)
    log.append("tool_call", _call("Read", {"file_path": "/ws/a.md"}, False), turn=2)
    log.append("tool_call", _call("Bash", {"command": "pytest -q"}, True), turn=3)
    log.append("tool_call", _call("Glob", {}, False), turn=4)


def _call(tool: str, params: dict[str, str], error: bool, order: str | None = None) -> dict:
    directive = dataclasses.asdict(_order(order)) if order else None
    result = "Exit code 1\n3 failed" if error and not order else "ok"
    return {
        "tool": tool,
        "tool_use_id": f"t-{tool}",
        "input": params,
        "is_error": error,
        "result": result,
        "duration_s": 0.1,
        "directive": directive,
    }


def _state(**changes: object) -> DashboardState:
    base = DashboardState(
        run_id="s1",
        status="completed",
        reason="the model ended its turn",
        todos=TodoList(),
        plan=None,
        meters=(Meter("Iterations", 7, 50, "turns"),),
        timeline=(),
        timeline_total=0,
        feedback=(),
        feedback_total=0,
        job_summary="Done: RELEASE.md is written.",
        harness=CLAUDE_AGENT_SDK,
        calls=(
            ToolCallEntry(6, "Write", "RELEASE.md", "ran"),
            ToolCallEntry(3, "Write", "CHANGELOG.md", "denied", "no_secrets"),
        ),
        calls_total=2,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_tool_call_entries_say_how_each_call_went() -> None:
    log = EventLog(lambda: 0.0)
    _calls(log)
    tracker = RunTracker()
    for event in log:
        assert tracker.add(event) is True  # each call changes what the panel shows
    entries = [entry.relative_to("/ws") for entry in tracker.calls]
    assert [e.describe() for e in entries] == [
        "Write a.md: denied by rbw",
        "Read a.md: ran",
        "Bash pytest -q: failed: Exit code 1",
        "Glob: ran",
    ]
    assert tracker.calls_total == 4


def test_the_panel_keeps_the_latest_calls_only() -> None:
    log = EventLog(lambda: 0.0)
    tracker = RunTracker(calls_size=3)
    for i in range(10):
        tracker.add(log.append("tool_call", _call("Read", {"file_path": f"{i}.md"}, False)))
    assert [c.target for c in tracker.calls] == ["7.md", "8.md", "9.md"]
    html = render_calls(tuple(reversed(tracker.calls)), tracker.calls_total)
    assert "10 in all" in html and "… 7 earlier" in html


def test_a_session_dashboard_has_its_calls_and_no_todo_layer_or_plan() -> None:
    state = _state()
    html, text = render_dashboard(state), text_dashboard(state)
    assert "class='gr-calls'" in html and "class='gr-meters'" in html
    assert "class='gr-todos'" not in html and "class='gr-plan'" not in html
    for words in GR_LOOP_TEXT:
        assert words not in html and words not in text, words
    assert text.startswith("Run s1: completed\nJob complete: Done: RELEASE.md is written.\n")
    assert "Tool calls (newest first, 2 in all):\n  turn 6: Write RELEASE.md: ran\n" in text
    assert "turn 3: Write CHANGELOG.md: denied by no_secrets" in text
    card = render_run_card(state, turns=7, phases_completed=0)
    assert "a Claude Agent SDK session" in card and "phase" not in card


def test_a_session_that_nothing_checked_does_not_claim_the_job() -> None:
    """The model ended its turn and no checker judged it: neither done nor not done."""
    unchecked = [
        _state(status=s, job_summary=None, harness=h)
        for s in ("completed", "ended")
        for h in (CLAUDE_AGENT_SDK, GR_LOOP)  # one wording: neither had a checker
    ]
    unchecked = [state for state in unchecked if state.ended_early]
    assert len(unchecked) == 2  # the status that run ends with (the status table), either harness
    for state in unchecked:
        assert state.note == "the model ended its turn; no completion check confirmed the job"
        html = render_dashboard(state)
        assert "no completion check confirmed the job" in html
        assert "the job is not complete" not in html


def test_a_run_of_gr_loop_keeps_its_todo_layer_and_plan() -> None:
    state = _state(harness=GR_LOOP)
    html = render_dashboard(state)
    assert "class='gr-todos'" in html and "class='gr-plan'" in html
    assert "class='gr-calls'" not in html
    assert "ACTIVE TODO LIST" in text_dashboard(state)
    assert "phases complete" in render_run_card(state, turns=7, phases_completed=0)
