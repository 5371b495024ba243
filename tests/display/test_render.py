"""Pure renderers and dashboard state: HTML and text from values, no kernel involved."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import get_args

import pytest

import gr_notebook as gr
from gr_notebook.display.experiment import render_status_counts
from gr_notebook.display.render import (
    LEVEL_COLOURS,
    STATE_COLOURS,
    render_dashboard,
    render_feedback,
    render_meter,
    render_plan,
    render_timeline,
    render_todos,
    text_dashboard,
)
from gr_notebook.display.state import (
    DashboardState,
    FeedbackEntry,
    Meter,
    RunTracker,
    TimelineEntry,
    describe,
    meter_level,
)
from gr_notebook.events import EventLog
from gr_notebook.run import RunStatus
from gr_notebook.workflow import TodoItem, TodoList


def strip_tags(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&#x27;", "'").replace("&lt;", "<")


def todos(done: int = 2, total: int = 5) -> TodoList:
    items = [TodoItem(f"Task {i}", i <= done) for i in range(1, total + 1)]
    return TodoList(
        items=tuple(items), phase_number=2, phase_total=4, phase_name="Write", kind="phase"
    )


def test_todo_layer_html_reads_exactly_like_the_seed_display() -> None:
    listing = todos()
    html = render_todos(listing)
    assert strip_tags(html).replace("&amp;", "&") == listing.render()


def test_todo_layer_highlights_the_current_task_only() -> None:
    html = render_todos(todos(done=2))
    current = re.findall(r"<span class='gr-current'[^>]*>(.*?)</span></span>", html)
    assert [strip_tags(line) for line in current] == ["[ ] 3. Task 3      ← CURRENT"]


def test_todo_titles_are_escaped() -> None:
    listing = TodoList(items=(TodoItem("<script>alert(1)</script>"),), kind="phase")
    html = render_todos(listing)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_plan_marks_complete_current_and_pending_phases() -> None:
    plan = gr.workflow.Plan.parse(
        "# Execution Plan\n\n## Phase 1: Gather ✓ COMPLETE\n- [x] a\n\n"
        "## Phase 2: Write ← CURRENT\n- [ ] b\n\n## Phase 3: Review\n- [ ] c\n"
    )
    html = render_plan(plan)
    states = re.findall(r"gr-phase gr-phase-(\w+)", html)
    assert states == ["complete", "current", "pending"]
    assert "Plan: Execution Plan" in html
    assert "No plan yet" in render_plan(None)
    assert plan._repr_html_() == html


def test_a_long_plan_shows_a_window_around_the_current_phase() -> None:
    phases = [(f"Part {i}", ["step"]) for i in range(1, 201)]
    plan = gr.workflow.Plan.from_phases(phases)
    for _ in range(150):
        plan = plan.advance()
    html = render_plan(plan)
    assert (
        re.findall(r"gr-phase gr-phase-(\w+)", html)
        == ["complete"] * 2 + ["current"] + ["pending"] * 9
    )
    assert "✔ Phases 1–148: 148 of 148 complete" in html and "○ 40 more phases" in html
    assert "Phase 151: Part 151" in html and "Phase 161: Part 161" not in html


@pytest.mark.parametrize(
    ("used", "limit", "level"),
    [(0, 100, "ok"), (50, 100, "ok"), (51, 100, "warn"), (80, 100, "warn"), (81, 100, "high"),
     (250, 100, "high"), (10, None, "none"), (10, 0, "none")],
)  # fmt: skip
def test_meter_levels_turn_at_50_and_80_percent(used: int, limit: int | None, level: str) -> None:
    assert meter_level(used, limit) == level
    assert Meter("x", used, limit).level == level


def test_meter_bar_width_and_colour_follow_the_level() -> None:
    html = render_meter(Meter("Context", 90, 100, "tokens"))
    assert "width:90.0%" in html and LEVEL_COLOURS["high"] in html
    assert "Context: 90 / 100 tokens (90%)" in html
    over = render_meter(Meter("Tokens", 300, 100))
    assert "width:100.0%" in over  # the bar never spills past its track
    assert "no limit set" in render_meter(Meter("Tokens used", 1234, None, "tokens"))
    assert "no limit set" in render_meter(Meter("Tokens used", 1234, 0, "tokens"))


def test_feedback_blocks_render_with_severity_and_provider() -> None:
    entry = FeedbackEntry(
        turn=7,
        provider="Deadline",
        summary="3 minutes left",
        severity="warning",
        observations=("time: 5 minutes spent",),
        suggestions=("Finish the critical work",),
    )
    html = render_feedback([entry], total=1)
    assert "&lt;feedback provider='Deadline'&gt;" in html
    assert "3 minutes left" in html and "→ Finish the critical work" in html
    assert "Feedback (1)" in html
    assert "No feedback yet" in render_feedback([])


def test_feedback_entries_come_from_feedback_events() -> None:
    log = EventLog(lambda: 0.0)
    event = log.append(
        "feedback",
        {
            "provider": "Static",
            "summary": "Remember the tests",
            "severity": "caution",
            "observations": [{"category": "tests", "description": "none run yet"}],
            "suggestions": ["run them"],
        },
        turn=4,
    )
    assert FeedbackEntry.from_event(event) == FeedbackEntry(
        4, "Static", "Remember the tests", "caution", ("tests: none run yet",), ("run them",)
    )


def test_timeline_describes_the_events_people_watch() -> None:
    log = EventLog(lambda: 0.0)
    transition = log.append(
        "phase_transition",
        {"from_phase": 2, "name": "Write", "kind": "phase", "outcome": "complete",
         "tasks": 5, "done": 5, "archive": "archive/phase_02_complete.json"},
    )  # fmt: skip
    compaction = log.append(
        "compaction", {"messages_removed": 20, "tokens_before": 3000, "tokens_after": 300}
    )
    rewind = log.append("rewind", {"issue": "wrong source", "source": "person"})
    error = log.append(
        "error",
        {"source": "tool", "tool": "read_file", "error_type": "OSError", "message": "missing"},
    )
    unknown = log.append("policy_denied", {"tool": "write_file"})
    assert describe(transition) == (
        "Phase 2 'Write' complete: 5/5 tasks → archive/phase_02_complete.json"
    )
    assert describe(compaction) == (
        "Compacted: 20 messages folded into a recap, conversation 3,000 → 300 tokens"
    )
    assert describe(rewind) == "Rewind by the person: wrong source"
    assert describe(error) == "Error in read_file: OSError: missing"
    assert describe(unknown) == "policy_denied: {'tool': 'write_file'}"


def test_tracker_keeps_a_bounded_newest_first_timeline() -> None:
    log = EventLog(lambda: 0.0)
    tracker = RunTracker(timeline_size=3)
    for i in range(10):
        tracker.add(log.append("rewind", {"issue": f"issue {i}"}, turn=i))
    assert tracker.add(log.append("model_call", {})) is False
    assert [e.turn for e in reversed(tracker.timeline)] == [9, 8, 7]
    assert tracker.timeline_total == 10
    html = render_timeline(tuple(reversed(tracker.timeline)), tracker.timeline_total)
    assert "… 7 earlier" in html and html.index("issue 9") < html.index("issue 7")


def test_the_timelines_earlier_lines_unfold_bounded(tmp_path: Path) -> None:
    run = gr.Agent(gr.ScriptedModel([gr.text("ok")]), workspace=tmp_path, store=False)
    run = run.run_sync("job")  # its run-level fields; the lines below are the tracker's
    log = EventLog(lambda: 0.0)
    tracker = RunTracker(timeline_size=3, earlier_size=4)
    log.subscribe(tracker.add)
    for i in range(5):
        log.append("rewind", {"issue": f"issue {i}"}, turn=i)
    state = tracker.snapshot(run)
    assert [e.turn for e in state.timeline_earlier] == [1, 0]  # newest first
    html = render_dashboard(state)
    folded = html[html.index("<details class='gr-timeline-earlier'>") :]
    assert "… 2 earlier</summary>" in folded
    assert folded.index("issue 1") < folded.index("issue 0") and "older" not in folded
    for i in range(5, 20):
        log.append("rewind", {"issue": f"issue {i}"}, turn=i)
    html = render_dashboard(tracker.snapshot(run))
    folded = html[html.index("<details class='gr-timeline-earlier'>") :]
    assert "… 17 earlier</summary>" in folded
    assert [f"issue {i}<" in folded for i in (16, 13, 12)] == [True, True, False]  # 4 kept
    assert "… and 13 older: run.events_df() has every event" in folded


def _state(**changes: object) -> DashboardState:
    base = DashboardState(
        run_id="r1",
        status="completed",
        reason=None,
        todos=todos(),
        plan=None,
        meters=(Meter("Tokens used", 10, None), Meter("Iterations", 3, 50)),
        timeline=(TimelineEntry(0, 3, "job_complete", "Job complete: done"),),
        timeline_total=1,
        feedback=(),
        feedback_total=0,
        job_summary="done",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_dashboard_html_holds_every_panel() -> None:
    html = render_dashboard(_state())
    for cls in ("gr-dashboard", "gr-header", "gr-todos", "gr-plan", "gr-meters", "gr-feedback",
                "gr-timeline"):  # fmt: skip
        assert f"class='{cls}" in html, cls


def test_text_dashboard_shows_state_todos_meters_and_timeline() -> None:
    text = text_dashboard(_state())
    assert text.startswith("Run r1: completed\nJob complete: done\n")
    assert todos().render() in text
    assert "Iterations: 3 / 50 turns (6%)" not in text  # no unit was given
    assert "Iterations: 3 / 50 (6%)" in text
    assert "turn 3: Job complete: done" in text


def test_a_model_that_quits_early_is_not_shown_as_a_success() -> None:
    """gr's loop ends a run ``ended`` only with no checker, as a session does: nothing judged
    the job either way, and the note says no more than that, in one wording for both."""
    early = _state(status="ended", job_summary=None, reason="the model ended its turn")
    note = "the model ended its turn; no completion check confirmed the job"
    assert early.ended_early and early.note == note
    html = render_dashboard(early)
    assert ">ended</span>" in html and note in html
    assert "the job is not complete" not in html
    assert "background:#ef6c00" in html  # amber, never the green of a success
    assert text_dashboard(early).startswith(f"Run r1: ended ({note})")
    assert _state().note is None and not _state().ended_early


def test_every_status_has_its_colour_and_ended_is_amber_everywhere() -> None:
    """The experiment's table takes its colours from the same map as the dashboard."""
    assert set(get_args(RunStatus)) <= STATE_COLOURS.keys()
    assert STATE_COLOURS["ended"] == STATE_COLOURS["budget_exhausted"] == "#ef6c00"
    table = render_status_counts({"a": {"ended": 2, "completed": 1}}, done=3, total=3)
    assert "color:#ef6c00'>ended</th>" in table


def test_settled_means_finished_or_paused() -> None:
    assert _state().settled and _state(status="paused").settled
    assert not _state(status="running").settled and not _state(status="pausing").settled
