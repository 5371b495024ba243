"""The toolkit's plots in an IPython shell of their own: ``python plot_shell.py MODE`` prints,
as JSON, what the shell would show for each plot (the mime types of every output).

A process of its own, because importing pyplot cannot be undone: ``plain`` never imports it
(and says so), ``inline`` turns the inline backend on as ``%matplotlib inline`` does. The
builders make a comparison and experiment results by hand, so no run is needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.experiments import Results, RunRecord, RunSpec
from gr_notebook.review.compare import Comparison

AGENTS = [
    f"{p}/{v}"
    for p in ("reckless", "quitter", "impatient")
    for v in ("bare", "read-first", "checked")
]
JOBS = ["guide", "notes"]


def sample_results(agents: list[str] = AGENTS, jobs: list[str] = JOBS) -> Results:
    """Two repeats of every agent on every job, as notebook 08 runs them; the quitters fail."""
    specs = [RunSpec(a, j, r, r) for a in agents for j in jobs for r in range(2)]
    records = [
        RunRecord(
            s.agent, s.job, s.repeat, s.seed, "completed", None, None,
            job_done=not s.agent.startswith("quitter"), turns=40 + 3 * s.repeat, tokens=1000,
        )
        for s in specs
    ]  # fmt: skip
    return Results(records, grid=specs, store=Path("unused.sqlite"))


def sample_comparison() -> Comparison:
    """A parent and a fork that differs from turn 3."""
    import pandas as pd

    turns = pd.DataFrame(
        {
            "turn": [1, 2, 3, 4],
            "a_tokens": [100, 200, 300, 400],
            "b_tokens": [100, 200, 350, 480],
            "a_tasks_done": [0, 1, 1, 2],
            "b_tasks_done": [0, 1, 1, 1],
        }
    )
    outcomes = pd.DataFrame({"parent": ["completed"], "fork": ["completed"]}, index=["status"])
    return Comparison(("parent", "fork"), turns, outcomes, 3)


def _plain() -> dict[str, Any]:
    from IPython.core.formatters import DisplayFormatter

    formatter: Any = DisplayFormatter()
    shown = {
        "comparison": formatter.format(sample_comparison().plot())[0],
        "results": formatter.format(sample_results().plot("job_done", by_job=True))[0],
    }
    return {
        "types": {name: sorted(data) for name, data in shown.items()},
        "png": {name: data["image/png"][:8].hex() for name, data in shown.items()},
        "pyplot": "matplotlib.pyplot" in sys.modules,
    }


def _inline() -> dict[str, Any]:
    """Each cell's outputs as the front end would get them: the result (the display hook)
    and every ``display`` on the way, the inline backend's end-of-cell flush included."""
    from IPython.testing import globalipapp

    shell: Any = globalipapp.get_ipython()  # type: ignore[no-untyped-call]
    shell.display_formatter.active_types = shell.display_formatter.format_types  # as a kernel's
    shell.enable_matplotlib("inline")
    cell: list[list[str]] = []

    def record(data: dict[str, Any], *args: object, **kwargs: object) -> None:
        cell.append(sorted(data))

    shell.display_pub.publish = record
    shell.displayhook.write_format_data = record
    shell.displayhook.write_output_prompt = lambda: None
    shell.user_ns.update(gr=gr, comparison=sample_comparison(), results=sample_results())
    cells = {
        "comparison": "comparison.plot()",
        "results": "results.plot('job_done', by_job=True)",
        "pyplot's own": "import matplotlib.pyplot as plt\nplt.subplots()[0]",
    }
    shown: dict[str, list[list[str]]] = {}
    for name, code in cells.items():
        cell.clear()
        shell.run_cell(code, store_history=True).raise_error()
        shown[name] = list(cell)
    import matplotlib.pyplot as plt

    return {"outputs": shown, "open figures": len(plt.get_fignums())}


if __name__ == "__main__":
    print("\n" + json.dumps({"plain": _plain, "inline": _inline}[sys.argv[1]]()))
