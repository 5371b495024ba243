"""In a real kernel: a plot the toolkit returns, as a cell's last expression, arrives as one
``image/png``, before pyplot is imported, after, and under ``%matplotlib inline``."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[2]
PLOTS = {
    "comparison": "comparison.plot()",
    "results": "results.plot('job_done', by_job=True)",
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[BlockingKernelClient]:
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def outputs(client: BlockingKernelClient, code: str, timeout: float = 60) -> list[list[str]]:
    """The mime types of each output the cell sent (results and displays), in order."""
    msg_id = client.execute(code)
    found: list[list[str]] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"no idle after {timeout}s; outputs so far: {found}")
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "error":
            pytest.fail("\n".join(content["traceback"]))
        if kind in ("execute_result", "display_data"):
            found.append(sorted(content["data"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return found


def test_a_plot_shows_once_with_or_without_pyplot(client: BlockingKernelClient) -> None:
    setup = (
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport gr_notebook as gr\n"
        "from tests.display.plot_shell import sample_comparison, sample_results\n"
        "comparison, results = sample_comparison(), sample_results()"
    )
    assert outputs(client, setup) == []
    one_png = [["image/png", "text/plain"]]
    for name, code in PLOTS.items():
        assert outputs(client, code) == one_png, f"{name}, pyplot never imported"
    assert outputs(client, "assert 'matplotlib.pyplot' not in sys.modules") == []
    # What the plots avoid: a figure made without pyplot, before pyplot, shows as text only.
    bare = "from matplotlib.figure import Figure\nf = Figure()\nf.add_subplot()\nf"
    assert outputs(client, bare) == [["text/plain"]]
    assert outputs(client, "import matplotlib.pyplot as plt") == []
    for name, code in PLOTS.items():
        assert outputs(client, code) == one_png, f"{name}, after import matplotlib.pyplot"
    assert outputs(client, "%matplotlib inline") == []
    for name, code in PLOTS.items():
        assert outputs(client, code) == one_png, f"{name}, under %matplotlib inline"
    assert outputs(client, "assert plt.get_fignums() == []") == []  # pyplot holds none of them
