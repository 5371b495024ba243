"""``notebooks/execute.py``: the HTML copy draws widgets without their JavaScript."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import nbformat

ROOT = Path(__file__).resolve().parents[1]
VIEW = "application/vnd.jupyter.widget-view+json"


def load_execute() -> ModuleType:
    spec = importlib.util.spec_from_file_location("execute", ROOT / "notebooks" / "execute.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def widget_notebook() -> nbformat.NotebookNode:
    state = {
        "box": {"model_name": "VBoxModel", "state": {
            "children": ["IPY_MODEL_head", "IPY_MODEL_stop"], "_dom_classes": ["gr-dashboard"]}},
        "head": {"model_name": "HTMLModel", "state": {"value": "<b>completed</b>"}},
        "stop": {"model_name": "ButtonModel", "state": {"description": "Stop <now>"}},
        "todo": {"model_name": "HTMLModel", "state": {"value": "FINAL LIST"}},
    }  # fmt: skip
    live = nbformat.v4.new_output(
        "display_data",
        data={VIEW: {"model_id": "box"}, "text/plain": "Dashboard of run r (a live widget)"},
    )
    snapshot = nbformat.v4.new_output(
        "display_data",
        data={VIEW: {"model_id": "todo"}, "text/plain": "LIST THEN", "text/html": "LIST THEN"},
    )
    cell = nbformat.v4.new_code_cell("x", outputs=[live, snapshot])
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    return notebook


def test_live_dashboards_are_drawn_from_their_final_state() -> None:
    notebook = widget_notebook()
    static = load_execute().static_widgets(notebook)
    live, snapshot = static.cells[0].outputs
    assert VIEW not in live.data and "widgets" not in static.metadata
    html = live.data["text/html"]
    assert "class='gr-dashboard'" in html and "<b>completed</b>" in html
    assert "<button disabled>Stop &lt;now&gt;</button>" in html
    assert snapshot.data == {"text/plain": "LIST THEN", "text/html": "LIST THEN"}
    assert VIEW in notebook.cells[0].outputs[0].data  # the original is left as it was


def test_executing_a_notebook_prints_no_kernel_warning(tmp_path: Path) -> None:
    """``make demo``'s kernel talks over IPC sockets: on TCP without keys ipykernel warns
    that its traffic is unencrypted, a line a newcomer's first command should not print."""
    import subprocess
    import sys

    source = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), source)
    done = subprocess.run(
        [sys.executable, str(ROOT / "notebooks" / "execute.py"), str(source)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "WARNING" not in done.stderr and "encryption" not in done.stderr, done.stderr
    executed = nbformat.read(source, as_version=4)
    assert executed.cells[0].outputs[0]["data"]["text/plain"] == "2"


def test_saved_widget_state_keeps_only_the_models_an_output_shows() -> None:
    notebook = widget_notebook()
    states = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]
    states["state"]["gone"] = {"model_name": "HTMLModel", "state": {"value": "replaced"}}
    load_execute().prune_widget_state(notebook)
    assert set(states["state"]) == {"box", "head", "stop", "todo"}  # "box" shows its children
    for cell in notebook.cells:
        cell.outputs = []
    load_execute().prune_widget_state(notebook)
    assert "widgets" not in notebook.metadata
