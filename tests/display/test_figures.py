"""The plots the toolkit returns draw themselves in a notebook, once, with or without pyplot;
the experiment plot's legend keeps clear of its bars and inside the image."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gr_notebook.display.figures import NotebookAxes, NotebookFigure, subplots
from tests.display.plot_shell import AGENTS, sample_comparison, sample_results

SHELL = Path(__file__).with_name("plot_shell.py")
PNG = "89504e470d0a1a0a"


def shell(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SHELL), mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_plot_is_a_png_in_a_shell_that_never_imported_pyplot() -> None:
    seen = shell("plain")
    assert seen["pyplot"] is False
    assert seen["types"] == {
        "comparison": ["image/png", "text/plain"],
        "results": ["image/png", "text/plain"],
    }
    assert seen["png"] == {"comparison": PNG, "results": PNG}


def test_with_the_inline_backend_a_plot_shows_once() -> None:
    seen = shell("inline")
    outputs = seen["outputs"]
    assert outputs["comparison"] == [["image/png", "text/plain"]]
    assert outputs["results"] == [["image/png", "text/plain"]]
    # What the plots avoid: a pyplot figure as the last expression is shown twice.
    assert outputs["pyplot's own"] == [["image/png", "text/plain"]] * 2
    assert seen["open figures"] == 0  # pyplot holds none of the toolkit's figures


def test_the_figure_and_its_axes_render_the_same_png() -> None:
    figure, axes = subplots(1, 2, figsize=(4, 2))
    assert isinstance(figure, NotebookFigure)
    assert all(isinstance(a, NotebookAxes) for a in axes)
    png = figure._repr_png_()
    assert png[:8].hex() == PNG
    assert axes[1]._repr_png_() == png  # axes, not the figure, as the cell's last expression
    foreign = Figure().add_subplot(axes_class=NotebookAxes)
    assert (
        isinstance(foreign, NotebookAxes) and foreign._repr_png_() is None
    )  # a figure that is not the toolkit's is its owner's


def test_the_plots_return_what_they_did() -> None:
    figure = sample_comparison().plot()
    tokens, tasks = figure.axes
    assert [line.get_label() for line in tasks.get_lines()][:2] == ["parent", "fork"]
    assert tokens.get_title() == "tokens used"
    ax = sample_results().plot("turns")
    assert isinstance(ax, NotebookAxes) and ax.get_ylabel() == "turns"
    assert len(ax.patches) == len(AGENTS)


def test_the_experiment_legend_keeps_clear_of_the_bars_and_inside_the_image() -> None:
    ax = sample_results().plot("job_done", by_job=True)
    figure = ax.get_figure()
    assert isinstance(figure, NotebookFigure)
    FigureCanvasAgg(figure).draw()  # type: ignore[no-untyped-call]
    legend = ax.get_legend()
    assert legend is not None and len(legend.get_texts()) == len(AGENTS)
    box = legend.get_window_extent()
    assert box.x0 >= ax.bbox.x1  # right of the axes, so over no bar or error bar
    bars = [p.get_window_extent() for p in ax.patches]
    assert len(bars) == 2 * len(AGENTS) and not any(box.overlaps(b) for b in bars)
    whole = figure.bbox
    assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1
    everything = figure.get_tightbbox()
    assert everything is not None
    inches = figure.get_size_inches()
    assert everything.x1 <= inches[0] and everything.y1 <= inches[1]  # nothing cut at the edge
    assert everything.x0 >= 0 and everything.y0 >= 0


def test_on_axes_the_caller_gives_the_legend_goes_outside_too() -> None:
    figure = Figure(figsize=(7, 3.5))
    mine = figure.add_subplot()
    assert sample_results().plot("tokens", ax=mine) is mine
    FigureCanvasAgg(figure).draw()  # type: ignore[no-untyped-call]
    legend = mine.get_legend()
    assert legend is not None and legend.get_window_extent().x0 >= mine.bbox.x1
