"""What watching a streamed turn costs: the live view's redraws stay bounded however long the
turn, and a dashboard barely slows a streamed run.

Part 1, pure: :class:`LiveTurn` takes 1,000 / 10,000 / 100,000 deltas of 4 characters; the
table shows the cost per delta and the cost of one redraw of the live panel (``render_live``
of the view) at the end. Both must stay flat as the turn grows: the view keeps only the
turn's tail, and a delta is appended, never joined into a growing string.

Part 2, end to end: one 120,000-character text turn streamed by ``gr.AnthropicModel``
through the real SDK from the local server in 4-character deltas (30,000 events), headless
and with a live ``gr.Dashboard`` (10 Hz throttle), in ABBA order, medians of ``REPEATS``.

Goals: a redraw and a delta at 100,000 deltas cost at most 2x what they cost at 10,000 (by
then the view trims its tail; an O(n²) view would cost 10x); the watched run makes at most
one live redraw per throttle interval (+2); its CPU time (the client's and the server
thread's) is at most 1.15x headless. CPU rather than wall time: the SDK's parsing of each
event dominates both sides, and on a shared machine the wall time of one run swings
twofold with the load.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from dataclasses import dataclass

import _util

import gr_notebook as gr
from gr_notebook.display.live import LiveTurn, render_live
from gr_notebook.display.throttle import DEFAULT_INTERVAL
from gr_notebook.jupyter.widgets import Dashboard
from gr_notebook.models.call_context import ModelDelta
from gr_notebook.testing import MessagesServer

SIZES = (1_000, 10_000, 100_000)
TURN_CHARS = 120_000
CHUNK = 4
REPEATS = 5
MAX_RATIO = 1.15


def pure(n: int) -> tuple[float, float, int]:
    """(µs per delta, µs per redraw at the end, HTML length) for ``n`` deltas."""
    pool = [ModelDelta(1, "text", f"{i:03d} ") for i in range(1000)]  # the algorithm, not RAM
    per_delta = []
    for _ in range(5):
        live = LiveTurn()
        started = time.perf_counter()
        for i in range(n):
            live.add(pool[i % 1000])
        per_delta.append((time.perf_counter() - started) / n)
    renders = []
    for _ in range(20):
        started = time.perf_counter()
        html = render_live(live.view())
        renders.append(time.perf_counter() - started)
    return min(per_delta) * 1e6, _util.median(renders) * 1e6, len(html)


@dataclass(frozen=True)
class Result:
    wall_s: float
    cpu_s: float
    status: str
    live_renders: int = 0
    deltas: int = 0


async def streamed_run(*, dashboard: bool) -> Result:
    with (
        MessagesServer([gr.text("x" * TURN_CHARS)], chunk_chars=CHUNK) as server,
        tempfile.TemporaryDirectory(prefix="gr-bench-stream-", dir=_util.SCRATCH) as tmp,
    ):
        model = gr.AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-bench", base_url=server.url)
        agent = gr.Agent(model, workspace=tmp, store=False, max_iterations=1)
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        run = agent.start("job")
        dash = Dashboard(run) if dashboard else None
        seen: list[int] = [0]
        if dashboard:
            run.subscribe_stream(lambda d: seen.__setitem__(0, seen[0] + 1))
        await run.wait()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        renders = dash.live_renders if dash else 0
        if dash is not None:
            dash.close()
        return Result(wall, cpu, run.status, renders, seen[0])


def main() -> int:
    goals = _util.Goals()
    _util.section("Part 1: the live view, per delta and per redraw, as the turn grows")
    rows, figures = [], {}
    for n in SIZES:
        delta_us, render_us, size = pure(n)
        figures[n] = (delta_us, render_us)
        rows.append([f"{n:,} deltas", f"{delta_us:.2f} µs", f"{render_us:.1f} µs", f"{size:,}"])
    _util.print_table(["turn", "add one delta", "one redraw", "HTML chars"], rows)
    small, large = figures[SIZES[1]], figures[SIZES[-1]]
    goals.check(
        "a redraw at 100,000 deltas <= 2x one at 10,000",
        large[1] <= 2 * small[1],
        f"{large[1]:.1f} µs vs {small[1]:.1f} µs",
    )
    goals.check(
        "a delta at 100,000 deltas <= 2x one at 10,000",
        large[0] <= 2 * small[0],
        f"{large[0]:.2f} µs vs {small[0]:.2f} µs",
    )

    asyncio.run(streamed_run(dashboard=True))  # warm-up: imports, the SDK's first client
    headless: list[Result] = []
    watched: list[Result] = []
    for i in range(REPEATS):
        for dashboard in (False, True) if i % 2 == 0 else (True, False):
            result = asyncio.run(streamed_run(dashboard=dashboard))
            (watched if dashboard else headless).append(result)
    h_wall = _util.median([r.wall_s for r in headless])
    d_wall = _util.median([r.wall_s for r in watched])
    h_cpu = _util.median([r.cpu_s for r in headless])
    d_cpu = _util.median([r.cpu_s for r in watched])
    sample = watched[0]
    redraws = [r.live_renders for r in watched]
    _util.section(
        f"Part 2: a {TURN_CHARS:,}-character turn in {CHUNK}-character deltas, median of {REPEATS}"
    )
    _util.print_table(
        ["", "headless", "with dashboard"],
        [
            ["status", headless[0].status, sample.status],
            ["deltas delivered", "0", f"{sample.deltas:,}"],
            ["wall time (median)", f"{h_wall:.3f} s", f"{d_wall:.3f} s"],
            ["CPU time (median)", f"{h_cpu:.3f} s", f"{d_cpu:.3f} s"],
            ["live redraws (median)", "-", f"{_util.median(redraws):.0f}"],
        ],
    )
    ratio = d_cpu / h_cpu
    bounded = all(r.live_renders <= r.wall_s / DEFAULT_INTERVAL + 2 for r in watched)
    goals.check(
        "live redraws <= one per throttle interval (+2)",
        bounded,
        ", ".join(f"{r.live_renders} in {r.wall_s:.2f} s" for r in watched),
    )
    goals.check(
        f"watched run's CPU time <= {MAX_RATIO:.2f}x headless",
        ratio <= MAX_RATIO,
        f"{d_cpu:.3f} s vs {h_cpu:.3f} s: ratio {ratio:.3f} (wall {d_wall / h_wall:.2f})",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
