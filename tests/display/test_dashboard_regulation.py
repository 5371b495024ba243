"""The dashboard and self-regulation: meters against the assessed budget, and the
interventions, pruning and denied confirmations on the timeline."""

from __future__ import annotations

import re
from collections.abc import Callable

import gr_notebook as gr
from gr_notebook.display.render import STATE_COLOURS, TONE_STYLES, render_header, render_timeline
from gr_notebook.display.state import Meter, RunTracker
from gr_notebook.events import EventLog
from gr_notebook.jupyter.widgets import Dashboard
from gr_notebook.models import ModelResponse

Factory = Callable[..., gr.Agent]
READ = gr.tool_call("read_file", path="instructions.md")


def assess(files: int) -> ModelResponse:
    """8 files: 80,000 tokens and 20 iterations; 20 files: 160,000, above the threshold."""
    return gr.tool_call(
        "assess_task",
        task_type="codebase_audit",
        estimated_files=files,
        estimated_iterations=15,
        strategy="read the entry points first",
    )


def by_label(meters: tuple[Meter, ...]) -> dict[str, tuple[int, int | None]]:
    return {m.label: (m.used, m.limit) for m in meters}


def test_an_approved_assessment_moves_the_meters_at_once(make_agent: Factory) -> None:
    budget = gr.Budget(max_tokens=1_000_000, max_iterations=200)
    model = gr.ScriptedModel([READ, assess(8), READ, READ, gr.text("done")])
    run = make_agent(model, budget=budget, max_iterations=None).run_sync("job")
    tracker = RunTracker()
    seen: dict[str, dict[str, tuple[int, int | None]]] = {}
    for event in run.events:
        tracker.add(event)
        if event.kind in ("model_call", "task_assessed"):
            seen.setdefault(f"{event.kind}@{event.turn}", by_label(tracker.meters(run)))
    tokens = run.summary()["input_tokens"] + run.summary()["output_tokens"]
    allotted = run.events.of_kind("task_assessed")[0].data["token_budget"]
    calls = run.turns_df()
    # Before the assessment, the run's own limits; right after it, the assessment's, with
    # its usage counted from the assessment on.
    assert seen["model_call@1"]["Tokens used"] == (tokens, 1_000_000)
    assert seen["model_call@1"]["Iterations"] == (5, 200)
    assert seen["task_assessed@2"]["Tokens used (assessed)"] == (0, allotted)
    assert seen["task_assessed@2"]["Iterations (assessed)"] == (0, 20)
    after = int(calls.tokens_used[2] - calls.tokens_used[1])
    assert seen["model_call@3"]["Tokens used (assessed)"] == (after, allotted)
    assert seen["model_call@3"]["Iterations (assessed)"] == (1, 20)
    assert allotted >= 80_000
    assert by_label(tracker.meters(run))["Context"][1] == run.limits.context_window
    [line] = [e for e in tracker.timeline if e.kind == "task_assessed"]
    assert line.text == (  # the task type in words, said to be the budget table's row
        f"Model assessed the bootstrap as 'codebase audit' work (a task type of the budget "
        f"table): {allotted:,} tokens and 20 turns allotted"
    )


async def test_the_live_dashboard_shows_the_assessed_budget(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([assess(8), READ, gr.text("done")])).start("job")
    dash = Dashboard(run)
    await run.wait()
    allotted = run.events.of_kind("task_assessed")[0].data["token_budget"]
    since = int(run.turns_df().tokens_used.iloc[-1] - run.turns_df().tokens_used.iloc[0])
    assert f"Tokens used (assessed): {since:,} / {allotted:,} tokens" in dash.meters.value
    assert "Iterations (assessed): 2 / 20 turns (10%)" in dash.meters.value
    assert "Context: " in dash.meters.value


def test_a_denied_assessment_keeps_the_limits_and_says_why(make_agent: Factory) -> None:
    model = gr.ScriptedModel([assess(20), gr.text("done")])
    run = make_agent(model, confirm_above_tokens=100_000).run_sync("job")
    state = Dashboard(run).state()
    asked = run.events.of_kind("confirmation")[0].data["estimated_tokens"]
    labels = {m.label: m.limit for m in state.meters}
    assert labels["Iterations"] == 200 and labels["Tokens used"] is None
    [line] = [e for e in state.timeline if e.kind == "confirmation"]
    assert line.tone == "notice"
    assert line.text == (
        f"Request for {asked:,} tokens by assess task denied (a person confirms anything over "
        "100,000): no confirmer (headless runs deny)"
    )
    assert not any(e.kind == "task_assessed" for e in state.timeline)


def test_interventions_fire_loud_and_held_off_checks_stay_muted(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([READ] * 60)).run_sync("job")
    assert run.status == "stuck"
    tracker = RunTracker(timeline_size=1000)
    for event in run.events:
        tracker.add(event)
    lines = [e for e in tracker.timeline if e.kind.startswith("intervention")]
    assert [e.text for e in lines] == [  # counted in tool calls, with no internal codes
        "No intervention after 5 tool calls: too early (fewer than 10 tool calls so far)",
        "No intervention after 10 tool calls: not stuck yet (2 checks in a row without "
        "progress; 3 count as stuck)",
        "Intervention 1 of 3, after 15 tool calls with no progress in the last 15: the agent "
        "is told to rethink its approach",
        "No intervention after 20 tool calls: not stuck yet (1 check in a row without "
        "progress; 3 count as stuck)",
        "No intervention after 25 tool calls: not stuck yet (2 checks in a row without "
        "progress; 3 count as stuck)",
        "Intervention 2 of 3, after 30 tool calls with no progress in the last 30: the todo "
        "list is rewound",
        "No intervention at 3 checks, from 35 to 45 tool calls: grace period after a rewind "
        "or a start-over (15 of 15 tool calls since)",
        "Intervention 3 of 3, after 50 tool calls with no progress in the last 50: the run "
        "is stopped",
    ]
    assert not any(re.search(r"\b[a-z]+_[a-z_]+\b", e.text) for e in lines)
    tones = ["muted", "muted", "notice", "muted", "muted", "notice", "muted", "alert"]
    assert [e.tone for e in lines] == tones
    html = render_timeline(tuple(reversed(tracker.timeline)))
    stop = re.search(r"gr-event-intervention gr-tone-alert' style='([^']*)'", html)
    held = re.search(r"gr-event-intervention_skipped gr-tone-muted' style='([^']*)'", html)
    assert stop and TONE_STYLES["alert"] in stop.group(1) and "font-weight:700" in stop.group(1)
    assert held and TONE_STYLES["muted"] in held.group(1)


def test_a_stuck_run_has_its_own_colour(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([READ] * 60)).run_sync("job")
    header = render_header(Dashboard(run).state())
    assert f"background:{STATE_COLOURS['stuck']}" in header and ">stuck</span>" in header
    others = {k: v for k, v in STATE_COLOURS.items() if k != "stuck"}
    assert STATE_COLOURS["stuck"] not in others.values()
    assert "intervention 3 of 3, after 50 tool calls" in header  # the reason, by the state


def test_held_off_checks_share_a_line_only_while_nothing_else_happens() -> None:
    log = EventLog(lambda: 0.0)
    tracker = RunTracker(timeline_size=4)
    log.subscribe(tracker.add)
    for step in range(5, 5_005, 5):
        log.append("intervention_skipped", {"step": step, "skip_reason": "not_stuck"})
    assert [e.text for e in tracker.timeline] == [
        "No intervention at 1,000 checks, from 5 to 5,000 tool calls: the agent made "
        "progress since the previous check"
    ]
    log.append("rewind", {"source": "person", "issue": "try the index"})
    log.append("intervention_skipped", {"step": 5005, "skip_reason": "not_stuck"})
    log.append("intervention_skipped", {"step": 5010, "skip_reason": "grace_period"})
    assert [e.text for e in tracker.timeline][1:] == [
        "Rewind by the person: try the index",
        "No intervention after 5,005 tool calls: the agent made progress since the previous check",
        "No intervention after 5,010 tool calls: grace period after a rewind or a "
        "start-over (0 tool calls since)",
    ]
    assert tracker.timeline_total == 4  # lines shown, not events seen


def test_held_off_checks_make_way_before_any_other_line() -> None:
    log = EventLog(lambda: 0.0)
    tracker = RunTracker(timeline_size=3)
    log.subscribe(tracker.add)
    log.append("run_paused")
    for step in range(5, 55, 5):  # reasons alternate, so no two share a line
        reason = "grace_period" if step % 10 == 0 else "not_stuck"
        log.append("intervention_skipped", {"step": step, "skip_reason": reason})
    log.append("run_unpaused")
    assert [e.text for e in tracker.timeline] == [
        "Paused",
        "No intervention after 50 tool calls: grace period after a rewind or a start-over "
        "(0 tool calls since)",
        "Unpaused",
    ]
    assert tracker.timeline_total == 12
    log.append("run_paused")
    assert [e.text for e in tracker.timeline] == ["Paused", "Unpaused", "Paused"]
    log.append("intervention_skipped", {"step": 55, "skip_reason": "not_stuck"})
    assert [e.kind for e in tracker.timeline] == [  # the newest line stays, even muted
        "run_unpaused",
        "run_paused",
        "intervention_skipped",
    ]


def test_pruning_after_summarize_progress_gets_a_line(make_agent: Factory) -> None:
    summary = gr.tool_call(
        "summarize_progress",
        key_findings=["the parser is in core.py"],
        files_examined=["instructions.md", "core.py"],
        next_steps=["write the report"],
    )
    model = gr.ScriptedModel([*[READ] * 8, summary, gr.text("done")])
    run = make_agent(model).run_sync("job")
    [pruned] = run.events.of_kind("conversation_pruned")
    [line] = [e for e in Dashboard(run).state().timeline if e.kind == "conversation_pruned"]
    assert line.text == (
        f"Pruned after summarize_progress: {pruned['messages_removed']} messages removed, "
        f"conversation {pruned['tokens_before']:,} → {pruned['tokens_after']:,} tokens; "
        "the model's summary lists 2 files it already read"
    )
    assert pruned["tokens_after"] < pruned["tokens_before"]


def test_the_status_line_measures_against_the_assessed_budget(make_agent: Factory) -> None:
    from gr_notebook.jupyter.magics import status_line

    run = make_agent(gr.ScriptedModel([assess(8), READ, gr.text("done")])).run_sync("job")
    summary = run.summary()
    allotted = summary["tokens_budget"]
    assert allotted >= 80_000 and summary["iterations_max"] == 20
    line = status_line(run)
    # the hard limit, and the allotment in force beside it, counted from the assessment
    assert "turn 3/200 (2/20 assessed for the bootstrap); " in line
    used = summary["budget_tokens_used"]
    assert f"; {summary['tokens_used']:,} tokens ({used:,}/{allotted:,} assessed); " in line
    assert "$" not in line  # the scripted model has no price: no cost shown, never a guess
