"""The committed notebooks read as they ended, with no kernel: on GitHub, on nbviewer, and in
JupyterLab, which draws an output's widget view over its HTML (and, with no kernel, shows
"(a live widget)" or "Error displaying widget: model not found" in its place). So no output
of a committed notebook is a widget: a run's dashboard, todo panel and card, an experiment's
progress table and a finished labeller are static HTML and text, as they ended."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RUN_VIEWS = ("class='gr-dashboard'", "class='gr-todos'", "class='gr-run'")
ENDED_VIEWS = ("class='gr-experiment'", "class='gr-labeller'")
ENDED = ("completed", "ended", "budget_exhausted", "cancelled", "failed", "stuck", "incomplete")


def outputs(path: Path) -> list[tuple[int, dict[str, object]]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, o) for i, c in enumerate(cells) for o in c.get("outputs", [])]


def text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_view_of_a_run_is_static_and_shows_its_end(path: Path) -> None:
    views = 0
    ended: dict[str, str] = {}
    for cell, output in outputs(path):
        data = output.get("data", {})
        assert isinstance(data, dict)
        html, plain = text(data.get("text/html")), text(data.get("text/plain"))
        assert WIDGET_VIEW not in data, f"cell {cell} shows a live widget: {plain[:80]}"
        for mark in ENDED_VIEWS:
            if mark in html:
                assert "(a live widget)" not in html + plain, (cell, plain[:80])
                ended[mark] = html
        if not any(mark in html for mark in RUN_VIEWS):
            continue
        views += 1
        assert "(a live widget)" not in html + plain, (cell, plain[:80])
        assert ">running</span>" not in html, (cell, plain[:80])  # a card that stood still
        if "class='gr-dashboard'" in html:
            assert any(f">{status}</span>" in html for status in ENDED), (cell, plain[:80])
    if path.stem in (
        "01_quickstart",
        "07_time_travel",
        "09_claude_agent_sdk",
        "10_try_before_trust",
    ):
        assert views, f"{path.name} shows no run's dashboard"
    if path.stem == "08_experiments":  # the progress table, as the experiment ended
        table = ended.get("class='gr-experiment'", "")
        assert re.search(r">(\d+) of \1 runs finished<", table), table[:200]
    if path.stem == "11_backtest":  # the labeller, finished
        assert "Labelling finished" in ended.get("class='gr-labeller'", "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_widget_state_is_kept(path: Path) -> None:
    """No output shows a widget, so a saved widget model would only weigh on the file."""
    assert "widgets" not in json.loads(path.read_text(encoding="utf-8"))["metadata"]
