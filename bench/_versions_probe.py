"""One workload of ``bench_versions.py``, timed in this process against whichever
gr_notebook ``PYTHONPATH`` puts first; prints its median as JSON on the last line.

Only the public API (``gr.*``) is used, so the same probe runs on the tree before issue 15's
layout and on this one.
"""

from __future__ import annotations

import gc
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gr_notebook as gr

SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
TURNS = 400
REPEATS = 5
MIN_SECONDS = 2.0
"""Fast workloads repeat until this much time has passed: their median is steadier."""


class TimedModel:
    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, 0.0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    async def complete(self, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            self.seconds += time.perf_counter() - started


def _reads(**agent_options: Any) -> Callable[[], float]:
    """µs of loop per turn: TURNS read_file turns, model time subtracted."""

    def once() -> float:
        model = TimedModel(
            gr.ScriptedModel(
                [*[gr.tool_call("read_file", path="instructions.md")] * TURNS, gr.text("done")]
            )
        )
        with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
            options = dict(agent_options)
            if options.pop("store", False):
                options["store"] = gr.Store(Path(tmp) / "store.sqlite")
                if "checkpoints" in inspect.signature(gr.Agent).parameters:
                    options["checkpoints"] = False  # their cost has its own budget
            else:
                options["store"] = False
            agent = gr.Agent(
                model=model,
                workspace=Path(tmp) / "ws",
                budget=gr.Budget(
                    max_iterations=4 * TURNS, deadline_s=options.pop("deadline_s", None)
                ),
                stuck_turns=None,
                interventions=gr.InterventionConfig(consecutive_stuck_tolerance=TURNS),
                **options,
            )
            gc.collect()
            started = time.perf_counter()
            run = agent.run_sync("# Bench\n\nRead instructions.md again and again.\n")
            wall = time.perf_counter() - started
            if isinstance(options["store"], gr.Store):
                options["store"].close()
        assert run.turns == TURNS + 1, (run.status, run.reason)
        return (wall - model.seconds) / run.turns * 1e6

    return once


def _guarded() -> float:
    return _reads(
        deadline_s=3600,
        policies=[
            gr.ReadBeforeWritePolicy(),
            gr.SequentialDependencyPolicy({"write_file": {"read_file"}}),
        ],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Keep going.", name="nudge"),
                gr.FeedbackTrigger(every_n_calls=50),
            ),
            gr.FeedbackProviderConfig(
                gr.DeadlineFeedback(), gr.FeedbackTrigger(every_n_seconds=30)
            ),
        ],
    )()


JOB = "\n".join(
    ["# Handbook", ""]
    + [
        line
        for k in range(1, 4)
        for line in (
            f"## Chapter {k}",
            *[f"- Write part {j} of chapter {k}" for j in range(1, 5)],
            "",
        )
    ]
)


def _simulated() -> float:
    """ms per turn of a whole simulated job (model work included: the agent's own cost)."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        gc.collect()
        started = time.perf_counter()
        run = gr.Agent(
            gr.SimulatedModel(), workspace=tmp, store=False, max_iterations=400
        ).run_sync(JOB)
        wall = time.perf_counter() - started
    assert run.status == "completed", (run.status, run.reason)
    return wall / run.turns * 1e3


_RUN: list[Any] = []


def _finished_run() -> Any:
    if not _RUN:
        tmp = tempfile.mkdtemp(dir=SCRATCH)
        _RUN.append(
            gr.Agent(gr.SimulatedModel(), workspace=tmp, store=False, max_iterations=400).run_sync(
                JOB
            )
        )
    return _RUN[0]


def _dataframes() -> float:
    """ms to build a finished run's DataFrames."""
    run = _finished_run()
    started = time.perf_counter()
    for name in ("events_df", "turns_df", "phases_df", "tool_calls_df", "guidance_df"):
        getattr(run, name)()
    return (time.perf_counter() - started) * 1e3


def _repr_html() -> float:
    """ms to render a finished run's card, plan and todos as HTML."""
    run = _finished_run()
    started = time.perf_counter()
    run._repr_html_()
    run.todos._repr_html_()
    return (time.perf_counter() - started) * 1e3


def _dashboard() -> float:
    """ms to open a dashboard on a finished run (its state built from every event) and
    redraw it."""
    run = _finished_run()
    started = time.perf_counter()
    dash = gr.Dashboard(run)
    dash.refresh()
    elapsed = time.perf_counter() - started
    dash.close()
    return elapsed * 1e3


def _import() -> float:
    """ms to import gr_notebook in a fresh interpreter."""
    import subprocess

    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gr_notebook"], check=True)
    return (time.perf_counter() - started) * 1e3


WORKLOADS: dict[str, tuple[str, Callable[[], float]]] = {
    "loop overhead per turn, store=False": ("µs", _reads()),
    "loop overhead per turn, SQLite store (no checkpoints)": ("µs", _reads(store=True)),
    "loop overhead per turn, policies + feedback": ("µs", _guarded),
    "simulated job, per turn": ("ms", _simulated),
    "DataFrames of a finished run": ("ms", _dataframes),
    "HTML reprs of a finished run": ("ms", _repr_html),
    "dashboard opened on a finished run": ("ms", _dashboard),
    "import gr_notebook": ("ms", _import),
}


def main() -> None:
    name = sys.argv[1]
    _, work = WORKLOADS[name]
    work()  # warm-up
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < REPEATS or time.perf_counter() - started < MIN_SECONDS:
        samples.append(work())
    print(json.dumps({"median": statistics.median(samples), "samples": samples}))


if __name__ == "__main__":
    main()
