"""Progress: a tqdm bar with counts in a terminal, a live table of agents by status in a
notebook."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.experiment import render_status_counts, text_status_counts
from gr_notebook.experiments import RunRecord, StatusCounts
from gr_notebook.experiments.progress import NullProgress, TqdmProgress, choose_progress
from tests.experiments.helpers import JOB


def row(agent: str, status: str) -> RunRecord:
    return RunRecord(agent, "x", 0, 0, status, None, None, status == "completed")


def test_status_counts_by_agent() -> None:
    counts = StatusCounts(["a", "b"])
    for r in (row("a", "completed"), row("a", "failed"), row("b", "completed")):
        counts.add(r)
    assert counts.done == 3 and counts.statuses() == ["completed", "failed"]
    assert counts.line() == "completed 2 · failed 1"
    assert text_status_counts(counts.by_agent, done=3, total=4) == (
        "3 of 4 runs finished\n"
        "agent  completed  failed\n"
        "a              1       1\n"
        "b              1       0"
    )
    html = render_status_counts({"a<b": counts.by_agent["a"]}, done=3, total=4)
    assert "3 of 4 runs finished" in html and "a&lt;b" in html and "gr-experiment" in html


def test_a_terminal_gets_a_tqdm_bar_with_the_counts(tmp_path: Path) -> None:
    out = io.StringIO()
    exp = gr.Experiment(
        {"a": gr.Agent(max_iterations=60)},
        {"x": JOB},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    exp.run("loop", progress=TqdmProgress(file=out, mininterval=0))
    text = out.getvalue()
    assert "2/2" in text and "completed 2" in text


def test_choose_progress() -> None:
    assert isinstance(choose_progress(False), NullProgress)
    assert isinstance(choose_progress(None), NullProgress)
    assert isinstance(choose_progress(True), TqdmProgress)  # no kernel here
    mine = NullProgress()
    assert choose_progress(mine) is mine
    with pytest.raises(gr.ConfigError, match="progress takes True"):
        choose_progress("bar")  # type: ignore[arg-type]


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An IPython shell that looks like a kernel's: what is displayed, and each update of
    it, as a cell's outputs."""
    from IPython.testing.globalipapp import get_ipython
    from IPython.utils.capture import capture_output

    shell = get_ipython()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    with capture_output() as captured:
        yield captured  # .outputs: the outputs so far


def display_id(output: Any) -> str | None:
    return (output.transient or {}).get("display_id")


def test_in_a_notebook_a_live_table_ends_as_a_static_one(tmp_path: Path, kernel: Any) -> None:
    exp = gr.Experiment(
        {"a": gr.Agent(max_iterations=60), "b": gr.Agent(max_iterations=60)},
        {"x": JOB},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    exp.run("loop")  # progress=True: the facade's hook finds the kernel
    live, ended = kernel.outputs
    assert WIDGET_VIEW in live.data and not live.update
    assert live.data["text/plain"] == "Experiment progress (a live widget)"
    assert set(live.data) == {WIDGET_VIEW, "text/plain", "text/html"}  # as nbval compares
    # When the experiment ended, its output became the table as it ended, with no widget.
    assert ended.update and display_id(ended) == display_id(live)
    assert set(ended.data) == {"text/html", "text/plain"}
    assert ended.data["text/plain"] == (
        "4 of 4 runs finished\nagent  completed\na              2\nb              2"
    )
    assert "4 of 4 runs finished" in ended.data["text/html"]
    assert "class='gr-experiment'" in ended.data["text/html"]

    exp.run("loop")  # nothing left to run: the table, static from the start
    *_, again = kernel.outputs
    assert len(kernel.outputs) == 3 and not again.update and again.data == ended.data


def test_a_live_view_names_itself_until_the_experiment_ends(kernel: Any) -> None:
    from gr_notebook.jupyter.experiment_progress import NotebookProgress

    progress = NotebookProgress()
    progress.start(3, ["a"], [row("a", "completed")])
    assert progress.view.bar.value == 1
    assert progress.view._repr_mimebundle_()["text/plain"] == "Experiment progress (a live widget)"
    progress.update(row("a", "failed"))
    assert len(kernel.outputs) == 1  # the live view follows the runs by itself
    progress.close()
    assert progress.view.bar.bar_style == "warning"  # stopped short of the grid
    live, ended = kernel.outputs
    assert ended.update and display_id(ended) == display_id(live)
    assert ended.data["text/plain"].startswith("2 of 3 runs finished\n")
    assert "2 of 3 runs finished" in progress.view._repr_mimebundle_()["text/plain"]
    progress.close()  # a second close changes nothing
    assert len(kernel.outputs) == 2
