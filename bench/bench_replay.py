"""Replay: the time to replay one policy on the 36 runs of notebook 08's experiment.

Records notebook 08's experiment once (3 profiles of the simulated agent × 3 variants × 2
jobs × 2 repeats, one merged store with a checkpoint at every turn), then replays
``gr.ReadBeforeWritePolicy()`` on its 36 runs with ``gr.replay_guardrails(results,
policies=[...])``, 7 times. The replay reads each run's events and checkpoints from the
store and rebuilds its files turn by turn in a temporary directory. Reported: the median
and the fastest wall time of a replay of all 36 runs, per run, and per decision; beside it
the rows, the denials, the rows that cannot tell and the runs that diverge.

Goals:
  * replaying the policy on where it was live gives its live decisions (no run whose agent
    had it diverges);
  * the median replay of the 36 runs takes at most 10 s (a model call takes about a second;
    a replay of a whole experiment should cost less than a few of them per run).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import _util

import gr_notebook as gr
from gr_notebook.experiments.results import Results

REPEATS = 7
MAX_MEDIAN_S = 10.0

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
    return experiment.run(progress=False)


def main() -> int:
    goals = _util.Goals()
    home = Path(tempfile.mkdtemp(prefix="gr-bench-replay-", dir=_util.SCRATCH))
    try:
        started = time.perf_counter()
        results = record(home)
        recorded_s = time.perf_counter() - started
        policy = gr.ReadBeforeWritePolicy()
        times, replay = [], None
        for _ in range(REPEATS):
            started = time.perf_counter()
            replay = gr.replay_guardrails(results, policies=[policy])
            times.append(time.perf_counter() - started)
        assert replay is not None
        frame = replay.df
        runs = len(replay.runs)
        median = _util.median(times)
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
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
