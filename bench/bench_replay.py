"""Replay: the time to replay one policy on the 36 runs of notebook 08's experiment.

Records notebook 08's experiment once (3 profiles of the simulated agent × 3 variants × 2
jobs × 2 repeats, one merged store with a checkpoint at every turn), then replays
``gr.ReadBeforeWritePolicy()`` on its 36 runs with ``gr.replay_guardrails(results,
policies=[...])``, 7 times. The replay reads each run's events and checkpoints from the
store and rebuilds its files turn by turn in a temporary directory. Reported: the median
and the fastest wall time of a replay of all 36 runs, per run, and per decision; beside it
the rows, the denials, the rows that cannot tell and the runs that diverge.

Then a backtest's sweep (issue 41): a threshold policy (``ReadBigFilesFirst``, the
read-before-write rule for files of at least ``min_bytes``) over 20 settings, on the 36 runs,
scored against labels from a rule (``gr.sweep_guardrails(..., labels=...)``).

Replays are timed on the wall and on the CPU (``time.process_time``: one core's seconds,
which other processes on a shared machine do not inflate); the goals are on the CPU time.

Goals:
  * replaying the policy on where it was live gives its live decisions (no run whose agent
    had it diverges);
  * the median replay of the 36 runs takes at most 10 s (a model call takes about a second;
    a replay of a whole experiment should cost less than a few of them per run);
  * at least 50 runs a second on one core, the median replay (issue 41; before it, about 10
    to 14: each replay read every run's checkpoints from the store and wrote every version
    of every file to a temporary folder on disk);
  * the labelled sweep of 20 settings takes under 15 s on one core.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _util

import gr_notebook as gr
from gr_notebook.experiments.results import Results

REPEATS = 7
MAX_MEDIAN_S = 10.0
MIN_RUNS_PER_S = 50.0
BEFORE_RUNS_PER_S = "10-14"
"""The replay's speed before issue 41, measured the same way (CPU) on this bench."""
MAX_SWEEP_S = 15.0
SWEEP = {"min_bytes": list(range(0, 2000, 100))}

NOTES_JOB = """\
# Release notes

## Draft
- Collect the merged changes
- Group the changes by area
- Write the highlights

## Publish
- Proofread the notes
- Publish the notes
"""

VARIANTS = {
    "bare": {},
    "read-first": {"policies": [gr.ReadBeforeWritePolicy()]},
    "checked": {"task_completion_checker": gr.PlanBasedChecker()},
}
PROFILES = ["reckless", "quitter", "impatient"]


@dataclass(frozen=True)
class ReadBigFilesFirst(gr.ReadBeforeWritePolicy):
    """Read before overwriting a file of at least ``min_bytes``; smaller ones may go."""

    min_bytes: int = 0
    name: str = "read_big_files_first"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        decision = super().check(tool, params, context=context)
        if decision.allowed:
            return decision
        where = context.workspace.root / str(params.get("path") or params.get("file_path"))
        size = where.stat().st_size if where.is_file() else 0
        return decision if size >= self.min_bytes else gr.PolicyDecision.allow()


def lost_notes(point: Any) -> bool | None:
    """The rule the labels come from: overwriting the notes unread loses work."""
    if point.kind != "policy" or point.tool != "write_file":
        return None
    return bool(point.input) and point.input.get("path") == "notes.md"


def record(home: Path) -> Results:
    agents = {
        f"{profile}/{variant}": gr.Agent(f"simulated:{profile}", max_iterations=120, **options)
        for profile in PROFILES
        for variant, options in VARIANTS.items()
    }
    experiment = gr.Experiment(
        agents,
        {"guide": gr.examples.QUICKSTART, "notes": NOTES_JOB},
        repeats=2,
        root=home / "experiment",
        store=home / "store.sqlite",
    )
    # on this process: the measure is the replay, and a shared machine's pool can stall
    return experiment.run(executor="loop", progress=False)


def main() -> int:
    goals = _util.Goals()
    home = Path(tempfile.mkdtemp(prefix="gr-bench-replay-", dir=_util.SCRATCH))
    try:
        started = time.perf_counter()
        results = record(home)
        recorded_s = time.perf_counter() - started
        policy = gr.ReadBeforeWritePolicy()
        times, cpu, replay = [], [], None
        for _ in range(REPEATS):
            started, on_cpu = time.perf_counter(), time.process_time()
            replay = gr.replay_guardrails(results, policies=[policy])
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - on_cpu)
        assert replay is not None
        frame = replay.df
        runs = len(replay.runs)
        median = _util.median(times)
        median_cpu = _util.median(cpu)
        _util.section(f"Replaying ReadBeforeWritePolicy on {runs} recorded runs")
        print(f"(recording the experiment took {recorded_s:.1f} s)")
        _util.print_table(
            ["measure", "value"],
            [
                ["runs", runs],
                ["decisions (rows)", _util.fmt_int(len(frame))],
                ["denials", int((frame["decision"] == "deny").sum())],
                ["cannot tell", int((frame["decision"] == "cannot tell").sum())],
                ["runs that diverge", sum(d is not None for d in replay.divergences.values())],
                ["median wall time, all runs (s)", f"{median:.2f}"],
                ["fastest wall time, all runs (s)", f"{min(times):.2f}"],
                ["median per run (ms)", f"{median / runs * 1000:.1f}"],
                ["median per decision (µs)", _util.fmt_int(median / len(frame) * 1e6)],
                ["median CPU time, all runs (s)", f"{median_cpu:.2f}"],
                ["runs a second, median wall", f"{runs / median:.1f}"],
                ["runs a second, median CPU (one core)", f"{runs / median_cpu:.1f}"],
                ["runs a second before issue 41 (CPU)", BEFORE_RUNS_PER_S],
            ],
        )
        started, on_cpu = time.perf_counter(), time.process_time()
        sweep = gr.sweep_guardrails(
            results,
            make=lambda min_bytes: ReadBigFilesFirst(min_bytes=min_bytes),
            grid=SWEEP,
            labels=lost_notes,
        )
        sweep_s, sweep_cpu = time.perf_counter() - started, time.process_time() - on_cpu
        best = sweep.best(min_precision=0.9)
        _util.section(f"A labelled sweep of {len(sweep.metrics)} settings on {runs} runs")
        _util.print_table(
            ["measure", "value"],
            [
                ["settings", len(sweep.metrics)],
                ["replays", len(sweep.metrics) * runs],
                ["labelled decisions per setting", int(sweep.metrics["labelled"].iloc[0])],
                ["best at precision >= 0.9", repr(best)],
                ["wall time (s)", f"{sweep_s:.1f}"],
                ["CPU time (s)", f"{sweep_cpu:.1f}"],
            ],
        )
        agents = results.df.set_index("run_id")["agent"]
        live = [r for r in replay.runs if agents[r].endswith("/read-first")]
        diverged = [r for r in live if replay.first_divergence(r) is not None]
        goals.check(
            "where it was live, the replay decides as it did",
            bool(live) and not diverged,
            f"{len(live)} runs had the policy live, {len(diverged)} of them diverge",
        )
        goals.check(
            f"a replay of the {runs} runs takes at most {MAX_MEDIAN_S:.0f} s",
            median <= MAX_MEDIAN_S,
            f"median {median:.2f} s over {REPEATS} replays",
        )
        goals.check(
            f"at least {MIN_RUNS_PER_S:.0f} runs a second on one core",
            runs / median_cpu >= MIN_RUNS_PER_S,
            f"{runs / median_cpu:.1f} (median CPU {median_cpu:.2f} s; wall {runs / median:.1f}"
            f" runs a second; before issue 41 {BEFORE_RUNS_PER_S})",
        )
        goals.check(
            f"a labelled sweep of {len(sweep.metrics)} settings in under {MAX_SWEEP_S:.0f} s",
            sweep_cpu < MAX_SWEEP_S,
            f"{sweep_cpu:.1f} s on one core ({sweep_s:.1f} s on the wall)",
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
