"""Runs as one HTML file: what the file holds, the ways in (a run, ids and a store, an
experiment, the command line, a cell), and the mistakes they refuse."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter

import gr_notebook as gr
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.share import export_html, page_of, view
from gr_notebook.share.page import CSP, embedded_json
from tests.share.runs import HOSTILE, LINK, forked_pair, guarded_run, hostile_run, long_run

MB = 2**20


def payload(page: str) -> dict[str, Any]:
    found = re.search(r"<script type='application/json' id='gr-data'>(.*?)</script>", page, re.S)
    assert found is not None
    loaded: dict[str, Any] = json.loads(found.group(1))
    return loaded


def test_no_text_of_a_run_can_close_the_data_block(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    page = page_of(run)
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert HOSTILE not in page and LINK not in page
    assert f'content="{CSP}"' in page and "default-src 'none'" in CSP
    texts = payload(page)["texts"]
    assert any(HOSTILE in t for t in texts) and any(LINK in t for t in texts)  # kept, as text
    assert "<" not in embedded_json({"a": "</script><!--", "b": "\u2028"})


def test_a_run_exports_to_a_file_that_names_its_decisions(tmp_path: Path) -> None:
    run = guarded_run(tmp_path)
    path = run.to_html(tmp_path / "run.html")
    data = payload(path.read_text(encoding="utf-8"))
    [shown] = data["runs"]
    assert shown["id"] == run.run_id and data["pairs"] == [] and data["index"] is None
    assert "<title>Run " + run.run_id in path.read_text(encoding="utf-8")


def test_a_fork_and_its_parent_are_set_side_by_side(tmp_path: Path) -> None:
    parent, fork = forked_pair(tmp_path)
    assert parent.store is not None
    page = page_of([fork.run_id, parent.run_id], store=parent.store.path)
    data = payload(page)
    assert data["pairs"] == [{"a": 1, "b": 0, "divergence": 4}]
    assert [row["cells"][0] for row in data["index"]["rows"]] == [fork.run_id, parent.run_id]


def test_an_experiment_exports_with_its_index(tmp_path: Path) -> None:
    results = gr.Experiment(
        {
            "plain": gr.Agent(model="simulated:diligent", max_iterations=40),
            "guarded": gr.Agent(
                model="simulated:diligent", max_iterations=40, policies=[gr.ReadBeforeWritePolicy()]
            ),
        },
        {"changelog": "Write a changelog for the project"},
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    ).run(progress=False)
    data = payload(page_of(results))
    index = data["index"]
    assert index["columns"] == ["variant", "job", "repeat", "status", "turns", "cost"]
    assert [row["cells"][:3] for row in index["rows"]] == [
        ["plain", "changelog", 0],
        ["guarded", "changelog", 0],
    ]
    assert [data["runs"][row["run"]]["id"] for row in index["rows"]] == [
        r.run_id for r in results.records
    ]


def test_a_long_run_is_small_and_quick(tmp_path: Path) -> None:
    run = long_run(tmp_path, turns=200)
    started = time.perf_counter()
    path = export_html(run, tmp_path / "long.html")
    took = time.perf_counter() - started
    size = path.stat().st_size
    print(f"200 turns: {size / MB:.2f} MB in {took:.2f} s")
    assert size <= 2 * MB and took < 2.0
    data = payload(path.read_text(encoding="utf-8"))
    assert len(data["runs"][0]["by_turn"]) == 201  # turn 0, the start, and 200 turns


def test_the_command_line_exports_a_store(tmp_path: Path) -> None:
    run = guarded_run(tmp_path)
    assert run.store is not None
    out = tmp_path / "shared.html"
    done = subprocess.run(
        [sys.executable, "-m", "gr_notebook", "export", str(run.store.path), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (1 run,")
    assert payload(out.read_text(encoding="utf-8"))["runs"][0]["id"] == run.run_id
    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "gr_notebook",
            "export",
            str(run.store.path),
            "nope",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2 and "no run 'nope' in run store" in wrong.stderr


def test_a_cell_shows_the_page_in_a_frame_of_its_own(tmp_path: Path) -> None:
    run = guarded_run(tmp_path)
    shown = run.view()
    html = shown._repr_html_()  # type: ignore[attr-defined]
    assert (
        html.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;')
        and 'sandbox="allow-scripts"' in html
    )
    assert "<script" not in html  # all of the page is inside the attribute
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("run.view()")])
    notebook.cells[0].outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": repr(shown)})
    ]
    body, _ = HTMLExporter().from_notebook_node(notebook)
    assert run.run_id in body and "srcdoc=" in body  # an nbconvert HTML carries the page


@pytest.mark.parametrize(
    ("runs", "path", "problem"),
    [
        ([], "x.html", "there is no run to export"),
        ([42], "x.html", "takes gr.Run objects or run ids, not int"),
        ("some-run", "x.txt", "name the file with .html"),
        ("some-run", "missing/x.html", "there is no folder"),
    ],
)
def test_a_mistake_is_named(tmp_path: Path, runs: object, path: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        export_html(runs, tmp_path / path, store=tmp_path / "none.sqlite")


def test_an_unknown_run_id_names_the_runs_there_are(tmp_path: Path) -> None:
    run = guarded_run(tmp_path)
    assert run.store is not None
    with pytest.raises(RunError, match=f"its runs include: {run.run_id}"):
        view("20990101-000000-abcdef", store=run.store.path)
