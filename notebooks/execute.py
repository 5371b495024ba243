"""Execute notebooks the way a reader's kernel would, saving outputs and widget state.

    python notebooks/execute.py notebooks/01_quickstart.ipynb            # refresh in place
    python notebooks/execute.py notebooks/01_quickstart.ipynb --out build/demo --html

The committed notebooks carry the outputs nbval compares against, so refresh them with
this script (``make notebooks``) whenever the package changes what they print.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient


def execute(path: Path, *, out_dir: Path | None, html: bool, timeout: int) -> Path:
    notebook = nbformat.read(path, as_version=4)
    target = (out_dir / path.name) if out_dir else path
    workdir = target.parent
    workdir.mkdir(parents=True, exist_ok=True)
    if out_dir:  # a notebook's data files are named after it (11_backtest_labels.csv)
        for data in path.parent.glob(f"{path.stem}_*"):
            if data.suffix != ".ipynb" and data.is_file():
                shutil.copy(data, workdir / data.name)
    started = time.perf_counter()
    # IPC sockets: a kernel on TCP without keys warns that its traffic is unencrypted.
    with tempfile.TemporaryDirectory(prefix="gr-kernel-") as sockets:
        kernel = KernelManager(kernel_name="python3", transport="ipc", ip=f"{sockets}/kernel")
        client = NotebookClient(
            notebook,
            km=kernel,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(workdir)}},
            store_widget_state=True,  # the saved dashboard shows the final state
        )
        try:
            client.execute()
        finally:
            if kernel.has_kernel:  # a kernel handed in is not shut down by nbclient
                kernel.shutdown_kernel(now=True)
    prune_widget_state(notebook)
    nbformat.write(notebook, target)
    print(f"executed {path} in {time.perf_counter() - started:.1f} s -> {target.resolve()}")
    if html:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(static_widgets(notebook))
        page = target.with_suffix(".html")
        page.write_text(body, encoding="utf-8")
        print(f"HTML copy -> {page.resolve()}")
    return target


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LIVE_PLACEHOLDER = "(a live widget)"  # a dashboard's fallback text while its run is going


def prune_widget_state(notebook: nbformat.NotebookNode) -> None:
    """Keep only the saved widget models an output still shows (and their children): a run's
    live view is replaced by a static output when the run ends, so its models are shown by
    nothing and would only weigh on the file."""
    saved = notebook.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not saved:
        return
    state = saved.get("state", {})
    wanted = [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]
    kept: set[str] = set()
    while wanted:
        model_id = wanted.pop()
        if model_id in kept or model_id not in state:
            continue
        kept.add(model_id)
        refs = re.findall(r"IPY_MODEL_(\w+)", json.dumps(state[model_id]))
        wanted.extend(refs)
    saved["state"] = {k: v for k, v in state.items() if k in kept}
    if not kept:
        del notebook.metadata["widgets"]


def static_widgets(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy without widget views: live dashboards are drawn as HTML from the saved
    (final) widget state, other widget outputs keep the snapshot they were shown with.

    An exported page would otherwise need the widget manager's JavaScript from a CDN, and
    offline it shows nothing where the dashboards were.
    """
    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    state = copy.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in copy.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.pop(WIDGET_VIEW, None)
            if view is None or LIVE_PLACEHOLDER not in data.get("text/plain", LIVE_PLACEHOLDER):
                continue  # a snapshot taken when it was shown (%todo) tells the truth of then
            drawn = _widget_html(view["model_id"], state)
            if drawn:
                data["text/html"] = drawn
    return copy


def _widget_html(model_id: str, state: dict[str, Any]) -> str:
    model = state.get(model_id, {})
    values = model.get("state", {})
    name = model.get("model_name", "")
    classes = " ".join(values.get("_dom_classes", ()))
    layout = state.get(str(values.get("layout", "")).removeprefix("IPY_MODEL_"), {})
    flex = layout.get("state", {}).get("flex")
    style = f"flex:{flex};" if flex else ""
    kids = [child.removeprefix("IPY_MODEL_") for child in values.get("children", ())]
    children = "".join(_widget_html(kid, state) for kid in kids)
    if name == "HTMLModel":
        return f"<div class='{classes}' style='{style}'>{values.get('value', '')}</div>"
    if name in ("VBoxModel", "HBoxModel"):
        direction = "column" if name == "VBoxModel" else "row"
        return (
            f"<div class='{classes}' style='display:flex;flex-flow:{direction} wrap;gap:6px;"
            f"{style}'>{children}</div>"
        )
    if name == "ButtonModel":
        return f"<button disabled>{html.escape(values.get('description', ''))}</button>"
    if name == "TextModel":
        placeholder = html.escape(values.get("placeholder", ""))
        return f"<input disabled placeholder='{placeholder}' style='{style}'>"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write executed copies here, not in place")
    parser.add_argument("--html", action="store_true", help="also write an HTML copy")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        execute(path, out_dir=args.out, html=args.html, timeout=args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
