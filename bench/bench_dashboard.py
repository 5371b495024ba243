"""Dashboard overhead: the same 2,000-turn simulated run, headless and with a live dashboard.

The simulated agent works a long job (far more phases than 2,000 turns can finish), so every
run stops at the iteration cap after exactly ``N_TURNS`` model calls and does identical work.
Runs alternate headless / dashboard in ABBA order so machine noise and ordering effects hit
both alike; each figure is the median of ``REPEATS`` runs. The dashboard is the real
``gr.Dashboard``: it subscribes to every event and redraws through its 10 Hz throttle.
Without a kernel its comm is a no-op, so what is measured is everything the package does:
tracking, snapshots, HTML rendering and the widgets' trait updates.

Goal: median wall time with the dashboard is at most 1.10x the median headless.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from dataclasses import dataclass

import _util

import gr_notebook as gr
from gr_notebook.jupyter.widgets import Dashboard

N_TURNS = 2000
N_PHASES = 200
STEPS_PER_PHASE = 5
REPEATS = 5
MAX_RATIO = 1.10


def build_instructions() -> str:
    return _util.job("A very long handbook", phases=N_PHASES, steps=STEPS_PER_PHASE, unit="Chapter")


@dataclass(frozen=True)
class Result:
    wall_s: float
    cpu_s: float
    turns: int
    events: int
    status: str
    renders: int = 0
    refresh_s: float = 0.0


async def run_once(instructions: str, *, dashboard: bool) -> Result:
    with tempfile.TemporaryDirectory(prefix="gr-bench-dash-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(gr.SimulatedModel(), workspace=tmp, store=False, max_iterations=N_TURNS)
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        run = agent.start(instructions)
        dash = Dashboard(run) if dashboard else None
        await run.wait()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        refresh = 0.0
        if dash is not None:
            timings = []
            for _ in range(20):
                t0 = time.perf_counter()
                dash.refresh()
                timings.append(time.perf_counter() - t0)
            refresh = _util.median(timings)
            dash.close()  # as a notebook would when the output is cleared: nothing piles up
        renders = dash.renders if dash else 0
        return Result(wall, cpu, run.turns, len(run.events), run.status, renders, refresh)


def main() -> int:
    import asyncio

    goals = _util.Goals()
    instructions = build_instructions()
    asyncio.run(run_once(instructions, dashboard=True))  # warm-up: imports, caches
    headless: list[Result] = []
    watched: list[Result] = []
    for i in range(REPEATS):  # ABBA order: whatever the first of a pair pays, both pay
        for dashboard in (False, True) if i % 2 == 0 else (True, False):
            result = asyncio.run(run_once(instructions, dashboard=dashboard))
            (watched if dashboard else headless).append(result)

    h_wall = _util.median([r.wall_s for r in headless])
    d_wall = _util.median([r.wall_s for r in watched])
    h_cpu = _util.median([r.cpu_s for r in headless])
    d_cpu = _util.median([r.cpu_s for r in watched])
    ratio = d_wall / h_wall
    paired = _util.median([d.wall_s / h.wall_s for h, d in zip(headless, watched, strict=True)])
    sample = watched[0]

    _util.section(f"Dashboard overhead: {N_TURNS:,}-turn simulated run, median of {REPEATS}")
    _util.print_table(
        ["", "headless", "with dashboard"],
        [
            ["status", headless[0].status, sample.status],
            ["turns", headless[0].turns, sample.turns],
            ["events", f"{headless[0].events:,}", f"{sample.events:,}"],
            ["wall time (median)", f"{h_wall:.3f} s", f"{d_wall:.3f} s"],
            ["CPU time (median)", f"{h_cpu:.3f} s", f"{d_cpu:.3f} s"],
            [
                "per turn (median)",
                f"{h_wall / N_TURNS * 1e6:.0f} µs",
                f"{d_wall / N_TURNS * 1e6:.0f} µs",
            ],
            ["renders per run (median)", "-", f"{_util.median([r.renders for r in watched]):.0f}"],
            ["one full redraw (median)", "-", f"{sample.refresh_s * 1e3:.2f} ms"],
        ],
    )
    print(
        f"wall: ratio of medians {ratio:.3f}, median of paired ratios {paired:.3f}; "
        f"CPU: ratio of medians {d_cpu / h_cpu:.3f}; "
        f"workspaces in {_util.SCRATCH or 'the temp dir'}"
    )

    same_work = all(
        (r.turns, r.events) == (headless[0].turns, headless[0].events) for r in headless + watched
    )
    goals.check("every run does the same work", same_work, f"{N_TURNS} turns each")
    goals.check(
        f"dashboard run <= {MAX_RATIO:.2f}x headless",
        ratio <= MAX_RATIO,
        f"{d_wall:.3f} s vs {h_wall:.3f} s: ratio {ratio:.3f}",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
