"""Loop overhead: what the loop itself costs per turn, model time excluded.

A :class:`gr.ScriptedModel` replays ``N_TURNS`` cheap ``read_file`` calls (they neither
complete a todo nor end the job) and then a final text reply. The model is wrapped so every
``complete()`` call is timed with ``perf_counter``; that model time is subtracted from the
wall time, and what is left is the loop: context assembly, tool dispatch, events, the store.
A garbage collection that starts inside ``complete()`` is the loop's (its allocations set it
off, wherever the threshold is crossed): it is timed with ``gc.callbacks`` and left out of
the model time (decision 279).

Two views of the same runs:
  * per run: (wall time - model time) / turns, including one-off setup; median and p90
    over ``REPEATS`` runs;
  * per turn: a subscriber stamps ``perf_counter`` at every ``model_call`` event; the gap
    between two stamps minus the model time of the second call is one turn's overhead.
    Comparing turns 1-200 with turns 1801-2000 shows whether overhead grows with history.

Three configurations: ``store=False``; a SQLite store in a temporary directory with
``checkpoints=False``; and the same store with a checkpoint at every turn (the default).
The two store configurations alternate run by run, so the machine's drift hits both alike.

Goals: in each configuration, the median (over runs) of mean overhead per turn in turns
1801-2000 divided by that in turns 1-200 is at most 1.5; and checkpoints add at most 1 ms
to the store's overhead per turn (medians of the per-run means): a model call takes about a
second, so below that a person feels nothing.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import _util

import gr_notebook as gr
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.scripted import ScriptEntry

N_TURNS = 2000
REPEATS = 15
"""Runs per configuration: these machines are noisy, so the goals compare medians."""
WINDOW = 200
MAX_LATE_OVER_EARLY = 1.5
MAX_CHECKPOINT_US = 1000.0
INSTRUCTIONS = "# Loop overhead benchmark\n\nRead instructions.md again and again.\n"


class GcClock:
    """The time spent in garbage collections, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


GC = GcClock()
gc.callbacks.append(GC)


class TimedModel:
    """A transparent wrapper that times each ``complete()`` call of the model it wraps, less
    the garbage collections that ran inside it (the loop's, see :class:`GcClock`)."""

    def __init__(self, inner: gr.ScriptedModel) -> None:
        self.inner = inner
        self.durations: list[float] = []
        self.gc_s = 0.0
        """Garbage collection inside ``complete()``: counted as the loop's."""

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        collected = GC.seconds
        started = time.perf_counter()
        response = await self.inner.complete(request)
        took = time.perf_counter() - started
        in_gc = GC.seconds - collected
        self.gc_s += in_gc
        self.durations.append(took - in_gc)
        return response


@dataclass
class EntryClock:
    """Time spent inside the script's own entries (a subset of the model time)."""

    seconds: float = 0.0


def build_script(clock: EntryClock) -> list[ScriptEntry]:
    read = gr.tool_call("read_file", path="instructions.md")
    done = gr.text("done")

    def entry(request: ModelRequest) -> ModelResponse:
        started = time.perf_counter()
        response = read
        clock.seconds += time.perf_counter() - started
        return response

    return [*([entry] * N_TURNS), done]


@dataclass
class RunMeasure:
    turns: int
    wall_s: float
    model_s: float
    entry_s: float
    gc_in_model_s: float
    per_turn_us: list[float] = field(default_factory=list)
    """Overhead of turns 1..N_TURNS (index 0 = turn 1), microseconds."""

    @property
    def mean_us(self) -> float:
        return (self.wall_s - self.model_s) / self.turns * 1e6

    @property
    def bookkeeping_us(self) -> float:
        """Model time outside the script entries: ScriptedModel's own per-call work."""
        return (self.model_s - self.entry_s) / self.turns * 1e6

    def window_mean(self, first: int, last: int) -> float:
        return statistics.fmean(self.per_turn_us[first - 1 : last])

    def window_median(self, first: int, last: int) -> float:
        return statistics.median(self.per_turn_us[first - 1 : last])

    @property
    def growth(self) -> float:
        early = self.window_mean(1, WINDOW)
        return self.window_mean(N_TURNS - WINDOW + 1, N_TURNS) / early


async def _run(agent: gr.Agent, stamps: list[float]) -> gr.Run:
    def on_event(event: gr.Event) -> None:
        if event.kind == "model_call":
            stamps.append(time.perf_counter())

    run = agent.start(INSTRUCTIONS)  # the loop task has not started yet: no event is missed
    run.subscribe(on_event)
    return await run.wait()


def run_once(*, with_store: bool, checkpoints: bool = False) -> RunMeasure:
    clock = EntryClock()
    model = TimedModel(gr.ScriptedModel(build_script(clock)))
    stamps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gr-bench-loop-", dir=_util.SCRATCH) as tmp:
        store: gr.Store | bool = gr.Store(Path(tmp) / "store.sqlite") if with_store else False
        agent = gr.Agent(
            model=model,
            workspace=Path(tmp) / "ws",
            # far from the cap: past 80% the run would be told to wrap up, and this run
            # ends with its bootstrap undone, which a pressing limit reports as unfinished
            max_iterations=2 * N_TURNS,
            compaction=True,
            store=store,
            checkpoints=checkpoints,
            stuck_turns=None,
            # 2,000 reads of one file is a loop the engine would stop; it still checks every
            # 5 calls, so its cost is measured, but it never steps in.
            interventions=gr.InterventionConfig(consecutive_stuck_tolerance=N_TURNS),
        )
        gc.collect()
        started = time.perf_counter()
        run = asyncio.run(_run(agent, stamps))
        wall = time.perf_counter() - started
        if isinstance(store, gr.Store):
            store.close()
    if run.status != "ended" or run.turns != N_TURNS + 1:  # the script stops without a job
        raise RuntimeError(f"unexpected run end: {run.status} ({run.reason}), {run.turns} turns")
    durations = model.durations
    # Turn i's overhead: from its model_call event to the next one, minus the next model call.
    per_turn = [
        (stamps[i + 1] - stamps[i] - durations[i + 1]) * 1e6 for i in range(len(stamps) - 1)
    ]
    return RunMeasure(
        turns=run.turns,
        wall_s=wall,
        model_s=sum(durations),
        entry_s=clock.seconds,
        gc_in_model_s=model.gc_s,
        per_turn_us=per_turn,
    )


def _us(value: float) -> str:
    return f"{value:,.1f}"


def main() -> int:
    goals = _util.Goals()
    configs = {
        "store=False": {"with_store": False},
        "SQLite store": {"with_store": True},
        "store + checkpoints": {"with_store": True, "checkpoints": True},
    }
    results: dict[str, list[RunMeasure]] = {label: [] for label in configs}
    run_once(with_store=False)  # warm-up: imports, first-call caches
    run_once(with_store=True, checkpoints=True)
    results["store=False"] = [run_once(with_store=False) for _ in range(REPEATS)]
    for _ in range(REPEATS):  # side by side: the two store configurations alternate
        for label in ("SQLite store", "store + checkpoints"):
            results[label].append(run_once(**configs[label]))

    late_first = N_TURNS - WINDOW + 1
    _util.section(
        f"Loop overhead per turn, model time excluded: {N_TURNS} scripted read_file turns, "
        f"{REPEATS} runs each"
    )
    labels = list(configs)

    def row(name: str, values: dict[str, str]) -> list[object]:
        return [name, *(values[label] for label in labels)]

    def per(fn: Callable[[list[RunMeasure]], str]) -> dict[str, str]:
        return {label: fn(results[label]) for label in labels}

    rows = [
        row("turns per run", per(lambda rs: str(rs[0].turns))),
        row(
            "wall time per run, median (ms)",
            per(lambda rs: f"{_util.median([r.wall_s for r in rs]) * 1e3:,.0f}"),
        ),
        row(
            "model complete() per turn, median (µs)",
            per(lambda rs: _us(_util.median([r.model_s / r.turns * 1e6 for r in rs]))),
        ),
        row(
            "  garbage collection inside it, the loop's (µs)",
            per(lambda rs: _us(_util.median([r.gc_in_model_s / r.turns * 1e6 for r in rs]))),
        ),
        row(
            "  of which script entries (µs)",
            per(lambda rs: _us(_util.median([r.entry_s / r.turns * 1e6 for r in rs]))),
        ),
        row(
            "overhead per turn, per-run mean: median (µs)",
            per(lambda rs: _us(_util.median([r.mean_us for r in rs]))),
        ),
        row(
            "overhead per turn, per-run mean: p90 (µs)",
            per(lambda rs: _us(_util.percentile([r.mean_us for r in rs], 90))),
        ),
        row(
            "  same, counting ScriptedModel bookkeeping (µs)",
            per(lambda rs: _us(_util.median([r.mean_us + r.bookkeeping_us for r in rs]))),
        ),
        row(
            "overhead per turn, per-turn median (µs)",
            per(lambda rs: _us(_util.median([_util.median(r.per_turn_us) for r in rs]))),
        ),
        row(
            f"turns 1-{WINDOW}: mean (µs)",
            per(lambda rs: _us(_util.median([r.window_mean(1, WINDOW) for r in rs]))),
        ),
        row(
            f"turns {late_first}-{N_TURNS}: mean (µs)",
            per(lambda rs: _us(_util.median([r.window_mean(late_first, N_TURNS) for r in rs]))),
        ),
        row(
            f"turns 1-{WINDOW}: median (µs)",
            per(lambda rs: _us(_util.median([r.window_median(1, WINDOW) for r in rs]))),
        ),
        row(
            f"turns {late_first}-{N_TURNS}: median (µs)",
            per(lambda rs: _us(_util.median([r.window_median(late_first, N_TURNS) for r in rs]))),
        ),
        row(
            "late/early ratio of means, median of runs",
            per(lambda rs: f"{_util.median([r.growth for r in rs]):.2f}"),
        ),
        row(
            "late/early ratio of means, worst run",
            per(lambda rs: f"{max(r.growth for r in rs):.2f}"),
        ),
    ]
    _util.print_table(["", *labels], rows)
    print(
        "per-run mean = (wall - model time) / turns, setup included; per-turn = gap between\n"
        "consecutive model_call events minus the second call's model time; the model time\n"
        "leaves out the garbage collections that ran inside complete(). Medians over runs."
    )

    for label in labels:
        growth = _util.median([r.growth for r in results[label]])
        goals.check(
            f"{label}: overhead late/early <= {MAX_LATE_OVER_EARLY}",
            growth <= MAX_LATE_OVER_EARLY,
            f"turns {late_first}-{N_TURNS} vs 1-{WINDOW}: ratio {growth:.2f} (median of "
            f"{REPEATS} runs)",
        )
    plain = _util.median([r.mean_us for r in results["SQLite store"]])
    checked = _util.median([r.mean_us for r in results["store + checkpoints"]])
    added = checked / plain - 1
    print(
        f"checkpoints add {checked - plain:,.1f} µs per turn to the store's {plain:,.1f} µs "
        f"({added:+.1%}); the loop without a store: "
        f"{_util.median([r.mean_us for r in results['store=False']]):,.1f} µs"
    )
    goals.check(
        f"checkpoints add <= {MAX_CHECKPOINT_US:,.0f} µs to the store's overhead per turn",
        checked - plain <= MAX_CHECKPOINT_US,
        f"{checked:,.1f} µs vs {plain:,.1f} µs per turn ({added:+.1%}, medians of {REPEATS} runs)",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
