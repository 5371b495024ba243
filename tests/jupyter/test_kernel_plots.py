"""In a real kernel: a plot the toolkit returns, as a cell's last expression, arrives as one
``image/png``, before pyplot is imported, after, and under ``%matplotlib inline``."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from tests.jupyter.conftest import replies

ROOT = Path(__file__).resolve().parents[2]
PLOTS = {
    "comparison": "comparison.plot()",
    "results": "results.plot('job_done', by_job=True)",
}


def outputs(client: BlockingKernelClient, code: str) -> list[list[str]]:
    """The mime types of each output the cell sent (results and displays), in order."""
    found: list[list[str]] = []
    for msg in replies(client, client.execute(code)):
        kind, content = msg["msg_type"], msg["content"]
        if kind == "error":
            pytest.fail("\n".join(content["traceback"]))
        if kind in ("execute_result", "display_data"):
            found.append(sorted(content["data"]))
    return found


def test_a_plot_shows_once_with_or_without_pyplot(
    real_kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, client = real_kernel
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
