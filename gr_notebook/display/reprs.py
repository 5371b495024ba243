"""The display layer's half of the core's HTML reprs: its renderers, registered with
:func:`gr_notebook.reprs.to_html` so that ``Plan``, ``TodoList`` and ``Run`` draw
themselves without importing this layer."""

from __future__ import annotations

from gr_notebook.display.render import render_plan, render_run_card, render_todos
from gr_notebook.display.state import RunTracker
from gr_notebook.reprs import to_html
from gr_notebook.run import Run
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList

__all__ = ["install", "run_card"]


def run_card(run: Run) -> str:
    """The run as it stands: its state, todos and meters, with the headline totals."""
    state, totals = RunTracker().snapshot(run), run.summary()
    return render_run_card(
        state, turns=totals["turns"], phases_completed=totals["phases_completed"]
    )


def install() -> None:
    """Register the renderers; ``import gr_notebook`` runs it, and running it again is a
    no-op."""
    to_html.register(Plan, render_plan)
    to_html.register(TodoList, render_todos)
    to_html.register(Run, run_card)
