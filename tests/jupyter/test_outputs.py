"""A view of a run in a cell's output is a widget while the run is live, and its output is
replaced by a static bundle (``text/html`` and ``text/plain``, no widget view) when the run
ends: what a saved notebook keeps. Captured through IPython's testing shell."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import RichOutput, capture_output

import gr_notebook as gr
from gr_notebook.display.render import render_todos
from gr_notebook.display.reprs import run_card
from gr_notebook.jupyter.widgets import Dashboard
from tests.test_run_controls import slow_reader, until

JOB = "# Job\n\n## Drafting\n- Write a\n- Write b\n- Write c\n- Write d\n- Write e\n"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def display_id(output: RichOutput) -> str | None:
    return (output.transient or {}).get("display_id")


def is_static(output: RichOutput) -> bool:
    return set(output.data) == {"text/html", "text/plain"}


def replaced(outputs: list[RichOutput], shown: RichOutput) -> RichOutput:
    """The one update of the live output ``shown``: a static bundle under its display id."""
    assert WIDGET_VIEW in shown.data and display_id(shown)
    updates = [o for o in outputs if o.update and display_id(o) == display_id(shown)]
    assert len(updates) == 1, outputs
    [update] = updates
    assert is_static(update), update.data
    return update


def test_a_blocking_agent_cell_ends_with_its_dashboard_as_it_ended(ip: InteractiveShell) -> None:
    with capture_output() as captured:
        result = ip.run_cell(f"%%agent --max-iterations 300\n{JOB}")
    assert result.success, captured.stderr
    run = ip.user_ns["run"]
    outputs = captured.outputs
    live, update, card = outputs
    assert live.data["text/plain"] == f"Dashboard of run {run.run_id} (a live widget)"
    assert replaced(outputs, live) is update
    assert update.data == Dashboard.for_run(run).static_bundle()
    assert update.data["text/plain"].startswith(f"Run {run.run_id}: completed")
    assert "class='gr-dashboard'" in update.data["text/html"]
    assert ">completed</span>" in update.data["text/html"]
    assert "gr-timeline" in update.data["text/html"] and "gr-todos" in update.data["text/html"]
    assert not card.update and is_static(card) and card.data["text/plain"] == repr(run)


def test_views_of_a_finished_run_are_static_from_the_start(
    ip: InteractiveShell, make_agent: Any
) -> None:
    run = make_agent(gr.SimulatedModel(), max_iterations=300).run_sync(JOB)
    ip.user_ns.update(done=run, gr=gr)
    with capture_output() as captured:
        ip.run_line_magic("todo", "--run done")
        ip.run_cell("gr.Dashboard(done)")
        ip.run_cell("done")
    todo, dashboard, card = captured.outputs
    assert all(is_static(o) and not o.update for o in captured.outputs), captured.outputs
    assert todo.data["text/plain"] == run.todos.render()
    assert dashboard.data["text/plain"].startswith(f"Run {run.run_id}: completed")
    assert card.data == {"text/html": run_card(run), "text/plain": repr(run)}


async def test_a_background_run_leaves_static_views_in_its_cells(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    ip.user_ns["slow"] = gr.Agent(
        gr.SimulatedModel(latency=0.002), workspace=tmp_path / "bg", max_iterations=300
    )
    with capture_output() as captured:
        ip.run_cell_magic("agent", "--background --agent slow --out bg", JOB)
        run = ip.user_ns["bg"]
        await until(lambda: bool(run.todos.items))
        ip.run_line_magic("todo", "")
        ip.run_cell("bg")  # a live run as a cell's last expression: its card
        assert not any(o.update for o in captured.outputs)
        await asyncio.wait_for(run.wait(), 30)
    shown = [o for o in captured.outputs if not o.update]
    dashboard, todo, card = shown
    assert dashboard.data["text/plain"] == f"Dashboard of run {run.run_id} (a live widget)"
    assert (
        replaced(captured.outputs, dashboard)
        .data["text/plain"]
        .startswith(f"Run {run.run_id}: completed")
    )
    assert replaced(captured.outputs, todo).data == {
        "text/html": render_todos(run.todos),
        "text/plain": run.todos.render(),
    }
    assert card.data["text/plain"].startswith(f"<Run {run.run_id} running")
    assert replaced(captured.outputs, card).data == {
        "text/html": run_card(run),
        "text/plain": repr(run),
    }


async def test_a_stopped_run_is_replaced_too(ip: InteractiveShell, make_agent: Any) -> None:
    run = make_agent(slow_reader()).start("job")
    dashboard = Dashboard(run)
    with capture_output() as captured:
        display(dashboard)
        await until(lambda: run.turns >= 2)
        dashboard.stop_button.click()
        await run.wait()
    outputs = captured.outputs
    live, update = outputs
    assert replaced(outputs, live) is update
    assert update.data["text/plain"].startswith(f"Run {run.run_id}: cancelled")
