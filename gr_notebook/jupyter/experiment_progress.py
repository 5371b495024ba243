"""The notebook's view of a running experiment: a bar over a live table of runs by agent
and status (:mod:`gr_notebook.display.experiment` draws it).

Shown when the experiment starts; its ``text/plain`` names it until the experiment has
finished, and then carries the final table, so a saved notebook is the same on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import ipywidgets as w

from gr_notebook.display.experiment import render_status_counts, text_status_counts
from gr_notebook.experiments.progress import StatusCounts
from gr_notebook.experiments.record import RunRecord

__all__ = ["ExperimentView", "NotebookProgress", "notebook_progress"]


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
        self.table.value = render_status_counts(
            self.counts.by_agent, done=self.counts.done, total=self.total
        )

    def __repr__(self) -> str:
        return text_status_counts(self.counts.by_agent, done=self.counts.done, total=self.total)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = repr(self) if self.finished else "Experiment progress (a live widget)"
        return data


class NotebookProgress:
    """An experiment's :class:`~gr_notebook.experiments.progress.Progress` in a notebook."""

    def __init__(self) -> None:
        self.view = ExperimentView()

    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        from IPython import display as ipython_display

        display = cast(Callable[..., None], ipython_display.display)
        view = self.view
        view.counts = StatusCounts(agents)
        for record in done:
            view.counts.add(record)
        view.total = total
        view.bar.max = max(total, 1)
        view.finished = False
        view.draw()
        display(view)

    def update(self, record: RunRecord) -> None:
        self.view.counts.add(record)
        self.view.draw()

    def close(self) -> None:
        """The experiment ended: the view stays, settled."""
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
