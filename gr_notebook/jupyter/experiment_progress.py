"""The notebook's view of a running experiment: a bar over a live table of runs by agent
and status (:mod:`gr_notebook.display.experiment` draws it).

Shown when the experiment starts, as a widget; when the experiment ends (finished, stopped or
failed), its output is replaced by the table as it ended, static HTML and text with no
widget view (:mod:`gr_notebook.jupyter.outputs`, as a run's dashboard is): what a saved
notebook, GitHub and nbviewer show. An experiment with nothing left to run is static from
the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from gr_notebook.display.experiment import render_status_counts, text_status_counts
from gr_notebook.experiments.progress import StatusCounts
from gr_notebook.experiments.record import RunRecord
from gr_notebook.jupyter.outputs import LiveOutput, show_static

__all__ = ["ExperimentView", "NotebookProgress", "notebook_progress"]

LIVE = "Experiment progress (a live widget)"


class ExperimentView(w.VBox):  # type: ignore[misc]
    """The bar and the table; :class:`NotebookProgress` feeds it."""

    def __init__(self) -> None:
        self.bar = w.IntProgress(value=0, min=0, max=1, description="runs")
        self.table = w.HTML()
        self.counts = StatusCounts()
        self.total = 0
        self.finished = False
        super().__init__([self.bar, self.table])

    def draw(self) -> None:
        self.bar.value = self.counts.done
        self.table.value = self._table()

    def _table(self) -> str:
        return render_status_counts(self.counts.by_agent, done=self.counts.done, total=self.total)

    def __repr__(self) -> str:
        return text_status_counts(self.counts.by_agent, done=self.counts.done, total=self.total)

    def static_bundle(self) -> dict[str, str]:
        """The table as it stands, with no widget: what the view is once the experiment ends."""
        return {"text/html": self._table(), "text/plain": repr(self)}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        if self.finished:
            data.update(self.static_bundle())
        else:  # a snapshot now would be stale forever in the saved notebook
            data["text/plain"] = LIVE
            data["text/html"] = f"<div class='gr-experiment'>{LIVE}</div>"
        return data


class NotebookProgress:
    """An experiment's :class:`~gr_notebook.experiments.progress.Progress` in a notebook."""

    def __init__(self) -> None:
        self.view = ExperimentView()
        self.output: LiveOutput | None = None
        """The cell's output while the view is live: replaced when the experiment ends."""

    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        view = self.view
        view.counts = StatusCounts(agents)
        for record in done:
            view.counts.add(record)
        view.total = total
        view.bar.max = max(total, 1)
        view.finished = False
        view.draw()
        if view.counts.done >= total:  # nothing left to run: the table as it is, at once
            self._settle()
            show_static(view.static_bundle())
        else:
            self.output = LiveOutput(view._repr_mimebundle_())

    def update(self, record: RunRecord) -> None:
        self.view.counts.add(record)
        self.view.draw()

    def close(self) -> None:
        """The experiment ended: its output becomes the table as it ended."""
        self._settle()
        if self.output is not None:
            self.output.replace(self.view.static_bundle())
            self.output = None

    def _settle(self) -> None:
        view = self.view
        view.finished = True
        view.bar.bar_style = "success" if view.counts.done >= view.total else "warning"


def notebook_progress() -> NotebookProgress | None:
    """The widget inside a Jupyter kernel; None elsewhere (a terminal gets tqdm's bar)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return NotebookProgress()
