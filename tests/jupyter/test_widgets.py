"""The live widgets, driven the way a click would drive them: no browser, no kernel."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

import gr_notebook as gr
from gr_notebook.jupyter.widgets import Dashboard, TodoPanel
from tests.test_run_controls import gated_after_phase_1, slow_reader, until

Factory = Callable[..., gr.Agent]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


async def test_stop_click_stops_the_run(make_agent: Factory) -> None:
    run = make_agent(slow_reader()).start("job")
    dash = Dashboard(run)
    await until(lambda: run.turns >= 2)
    dash.stop_button.click()
    await run.wait()
    assert run.status == "cancelled" and run.reason == "stopped by the person"
    assert run.turns < 100
    assert "Stop requested." in dash.log_panel.value
    assert all(c.disabled for c in (dash.stop_button, dash.pause_button, dash.rewind_button))
    assert "cancelled" in dash.header.value


async def test_pause_click_holds_the_run_and_a_second_click_unpauses(make_agent: Factory) -> None:
    run = make_agent(slow_reader(40)).start("job")
    dash = Dashboard(run)
    await until(lambda: run.turns >= 2)
    dash.pause_button.click()
    assert dash.pause_button.description == "Unpause"
    await until(lambda: run.paused)
    held = run.turns
    await asyncio.sleep(0.03)
    assert run.turns == held
    dash.pause_button.click()
    assert dash.pause_button.description == "Pause"
    await run.wait()
    assert run.status == "ended"
    kinds = [e.text for e in dash.tracker.timeline]
    assert "Paused" in kinds and "Unpaused" in kinds


async def test_rewind_click_sends_the_typed_issue_to_the_model(make_agent: Factory) -> None:
    model, gate = gated_after_phase_1(gr.text("stopping here"))
    run = make_agent(model).start("job")
    dash = Dashboard(run)
    await asyncio.wait_for(gate.entered.wait(), 10)  # the model is mid-turn: the rewind waits
    dash.rewind_button.click()
    assert "Type what is wrong" in dash.log_panel.value
    dash.issue.value = "The sources are out of date"
    dash.rewind_button.click()
    assert dash.issue.value == ""
    gate.opened.set()
    await run.wait()
    rewinds = [e for e in run.events if e.kind == "rewind"]
    assert [(e.data["source"], e.data["issue"]) for e in rewinds] == [
        ("person", "The sources are out of date")
    ]
    assert "The sources are out of date" in model.requests[-1].messages[-1].text
    assert "The sources are out of date" in run.workspace.read_text("experiences.md")


async def test_a_live_dashboard_has_no_stale_text_and_a_settled_one_shows_the_end(
    make_agent: Factory,
) -> None:
    run = make_agent(slow_reader(5)).start("job")
    dash = Dashboard(run)
    live = dash._repr_mimebundle_()
    assert WIDGET_VIEW in live
    assert live["text/plain"] == f"Dashboard of run {run.run_id} (a live widget)"
    await run.wait()
    final = dash._repr_mimebundle_()
    assert final["text/plain"] == repr(dash)
    assert final["text/plain"].startswith(f"Run {run.run_id}: ended")
    assert "class='gr-dashboard'" in final["text/html"] and "gr-timeline" in final["text/html"]


async def test_widgets_follow_the_run_and_render_at_most_ten_times_a_second(
    make_agent: Factory,
) -> None:
    script = [gr.tool_call("read_file", path="instructions.md")] * 400 + [gr.text("done")]
    run = make_agent(gr.ScriptedModel(script), max_iterations=500, interventions=None).start("job")
    dash = Dashboard(run)
    started = time.monotonic()
    await run.wait()
    elapsed = time.monotonic() - started
    assert len(run.events) > 800
    assert 1 <= dash.renders <= elapsed / 0.1 + 2  # + the first and the final draw
    assert ">ended</span>" in dash.header.value
    assert "Iterations: 401 / 500 turns" in dash.meters.value
    assert "Run ended" in dash.timeline.value


def test_a_dashboard_of_a_finished_run_replays_its_history(make_agent: Factory) -> None:
    agent = make_agent(gr.SimulatedModel(), max_iterations=300)
    run = agent.run_sync("# Job\n\n## A\n- Write a\n- Write b\n- Write c\n- Write d\n- Write e\n")
    dash = Dashboard(run)
    state = dash.state()
    assert state.status == "completed" and state.job_summary
    assert state.timeline[0].kind == "run_finished"
    assert any(e.kind == "phase_transition" for e in state.timeline)
    assert "ACTIVE TODO LIST" in dash.todos.value
    assert all(c.disabled for c in (dash.stop_button, dash.issue))
    dash.stop()
    assert "has already finished" in dash.log_panel.value


async def test_errors_reach_the_dashboard_log(make_agent: Factory) -> None:
    script = [gr.tool_call("read_file", path="../outside.txt"), gr.text("done")]
    run = make_agent(gr.ScriptedModel(script)).start("job")
    dash = Dashboard(run)
    await run.wait()
    assert "Error" not in dash.log_panel.value  # a refused path is a tool result, not an error

    def boom(context: object, params: object) -> str:
        raise RuntimeError("disk on fire")

    tool = gr.Tool("boom", "Always fails.", {"type": "object", "properties": {}}, boom)
    run = make_agent(gr.ScriptedModel([gr.tool_call("boom"), gr.text("done")]), tools=[tool])
    live = run.start("job")
    dash = Dashboard(live)
    await live.wait()
    assert "Error in boom: RuntimeError: disk on fire" in dash.log_panel.value


async def test_one_todo_panel_per_run(make_agent: Factory) -> None:
    run = make_agent(slow_reader(3)).start("job")
    panel = TodoPanel.for_run(run)
    assert TodoPanel.for_run(run) is panel
    assert Dashboard.for_run(run) is Dashboard.for_run(run)
    assert Dashboard.for_run(run).todos is panel
    await run.wait()
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == run.todos.render() and WIDGET_VIEW in bundle


def test_dashboard_takes_a_run() -> None:
    with pytest.raises(TypeError, match=r"takes a gr\.Run or a run id"):
        Dashboard(42)  # type: ignore[arg-type]


def test_gr_dashboard_is_the_widget_class() -> None:
    assert gr.Dashboard is Dashboard


async def test_close_unsubscribes_and_closes_every_child(make_agent: Factory) -> None:
    run = make_agent(slow_reader(20)).start("job")
    dash = Dashboard.for_run(run)
    panel = dash.todos
    dash.close()
    assert dash.comm is None and panel.comm is None and dash.stop_button.comm is None
    assert Dashboard.for_run(run) is not dash  # a closed dashboard is not handed out again
    renders = dash.renders
    await run.wait()
    assert dash.renders == renders  # it stopped following the run


def test_the_fork_picker_opens_on_the_latest_turn_worth_forking(make_agent: Factory) -> None:
    read = gr.tool_call("read_file", path="instructions.md")
    run = make_agent(gr.ScriptedModel([read] * 60)).run_sync("job")
    dash = Dashboard(run)
    timeline = dash.state().timeline
    said = {e.turn for e in timeline if e.tone != "muted"}
    only_held_off = {e.turn for e in timeline if e.tone == "muted"} - said
    assert only_held_off  # turns where nothing happened but a check that held off
    dash.fork_open.click()
    options = list(dash.fork_turn.options)
    turns = [turn for _, turn in options]
    assert turns and set(turns) == {t for t in said if t >= 1}
    assert not any("No intervention" in label for label, _ in options)
    assert dash.fork_turn.value == turns[0] == max(turns)  # not blank: the latest is picked
    # the labels are the dropdowns' own, as wide as their words, not clipped Labels
    assert dash.fork_turn.description == "Fork at"
    assert dash.fork_agent.description == "under"
    for dropdown in (dash.fork_turn, dash.fork_agent):
        assert dropdown.style.description_width == "initial"
    assert not any(type(c).__name__ == "Label" for c in dash.children[-2].children)


def test_a_picked_fork_turn_stays_picked_as_the_timeline_grows(make_agent: Factory) -> None:
    read = gr.tool_call("read_file", path="instructions.md")
    run = make_agent(gr.ScriptedModel([read] * 60)).run_sync("job")
    dash = Dashboard(run)
    oldest = list(dash.fork_turn.options)[-1][1]
    dash.fork_turn.value = oldest
    dash.refresh()
    assert dash.fork_turn.value == oldest


async def test_a_persons_todo_add_shows_on_the_dashboards_timeline(make_agent: Factory) -> None:
    model, gate = gated_after_phase_1(*[gr.tool_call("todo_complete")] * 6, gr.text("done"))
    run = make_agent(model).start("job")
    dash = Dashboard(run)
    await asyncio.wait_for(gate.entered.wait(), 10)
    run.add_todo("Check the index")
    gate.opened.set()
    await run.wait()
    dash.refresh()
    assert "A person added task 6 &#x27;Check the index&#x27;" in dash.timeline.value
    assert "gr-event-todos_written" in dash.timeline.value


def test_the_todo_column_may_shrink_below_its_rules(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("job")
    dash = Dashboard(run)
    assert dash.todos is not None and dash.todos.layout.min_width == "0"
