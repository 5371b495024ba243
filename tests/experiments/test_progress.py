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


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """An IPython shell that looks like a kernel's, capturing what is displayed."""
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    yield shown


def test_in_a_notebook_a_live_table_counts_each_agents_runs(
    tmp_path: Path, kernel: list[Any]
) -> None:
    exp = gr.Experiment(
        {"a": gr.Agent(max_iterations=60), "b": gr.Agent(max_iterations=60)},
        {"x": JOB},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )
    exp.run("loop")  # progress=True: the facade's hook finds the kernel
    (view,) = kernel
    assert type(view).__name__ == "ExperimentView"
    assert view.bar.value == 4 and view.bar.max == 4 and view.bar.bar_style == "success"
    assert "4 of 4 runs finished" in view.table.value
    assert view._repr_mimebundle_()["text/plain"] == (
        "4 of 4 runs finished\nagent  completed\na              2\nb              2"
    )


def test_a_live_view_names_itself_until_the_experiment_ends(kernel: list[Any]) -> None:
    from gr_notebook.jupyter.experiment_progress import NotebookProgress

    progress = NotebookProgress()
    progress.start(3, ["a"], [row("a", "completed")])
    assert kernel[0].bar.value == 1
    assert progress.view._repr_mimebundle_()["text/plain"] == "Experiment progress (a live widget)"
    progress.update(row("a", "failed"))
    progress.close()
    assert progress.view.bar.bar_style == "warning"  # stopped short of the grid
    assert "2 of 3 runs finished" in progress.view._repr_mimebundle_()["text/plain"]
