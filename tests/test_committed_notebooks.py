"""The committed notebooks read as they ended, with no kernel: on GitHub, on nbviewer, and in
JupyterLab, which draws an output's widget view over its HTML (and, with no kernel, shows
"(a live widget)" or "Error displaying widget: model not found" in its place)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RUN_VIEWS = ("class='gr-dashboard'", "class='gr-todos'", "class='gr-run'")
ENDED = ("completed", "ended", "budget_exhausted", "cancelled", "failed", "stuck", "incomplete")


def outputs(path: Path) -> list[tuple[int, dict[str, object]]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, o) for i, c in enumerate(cells) for o in c.get("outputs", [])]


def text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_view_of_a_run_is_static_and_shows_its_end(path: Path) -> None:
    views = 0
    for cell, output in outputs(path):
        data = output.get("data", {})
        assert isinstance(data, dict)
        html, plain = text(data.get("text/html")), text(data.get("text/plain"))
        if WIDGET_VIEW in data:  # only the experiment's progress table and the labeller
            assert plain.startswith(("Experiment progress", "<Labeller")), (cell, plain[:80])
            continue
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
