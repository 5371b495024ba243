"""No regression across a refactor: the same workloads on a base commit and on this tree,
side by side in one run.

Each workload (``_versions_probe.py``) runs in its own interpreter, with ``PYTHONPATH``
putting one tree's ``gr_notebook`` first; base and head alternate, in a different order each
round, so a slow spell of the machine hits both. Each probe reports the median of its
repeats; the table shows the median over rounds for each side and their ratio.

The base is the commit before issue 15's architecture step (``--base REV`` to choose
another), exported with ``git archive``; the probe uses only the public API, so it runs on
both trees.

Goal: no workload is more than 10% slower on this tree (head / base <= 1.10). The store's
workload runs without checkpoints, which the base did not take: what a checkpoint adds has a
budget of its own, 1 ms a turn (``bench_checkpoints.py``, ``bench_loop_overhead.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import _util

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "_versions_probe.py"
BASE = "fa93fe1"  # the last commit before issue 15
ROUNDS = 3
MAX_RATIO = 1.10


def export(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "gr_notebook"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def probe(workload: str, tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(PROBE), workload],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{workload} on {tree}: {done.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["median"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=BASE, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    sys.path.insert(0, str(PROBE.parent))
    from _versions_probe import WORKLOADS

    goals = _util.Goals()
    with tempfile.TemporaryDirectory(prefix="gr-bench-versions-", dir=_util.SCRATCH) as tmp:
        base = Path(tmp)
        try:
            export(args.base, base)
        except subprocess.CalledProcessError as exc:
            goals.check(
                "the base tree is available",
                False,
                f"git archive {args.base} failed ({exc.stderr.decode().strip()}); "
                "run in a clone with the full history",
            )
            return goals.report()
        trees = {"base": base, "head": ROOT}
        results: dict[str, dict[str, list[float]]] = {
            w: {"base": [], "head": []} for w in WORKLOADS
        }
        for round_ in range(args.rounds):
            order = ("base", "head") if round_ % 2 == 0 else ("head", "base")
            for workload in WORKLOADS:
                for side in order:
                    results[workload][side].append(probe(workload, trees[side]))
    _util.section(f"Workloads: base {args.base} beside this tree ({args.rounds} rounds)")
    rows, worst = [], ("", 0.0)
    for workload, (unit, _) in WORKLOADS.items():
        b = _util.median(results[workload]["base"])
        h = _util.median(results[workload]["head"])
        ratio = h / b
        worst = max(worst, (workload, ratio), key=lambda item: item[1])
        rows.append([workload, f"{b:,.2f} {unit}", f"{h:,.2f} {unit}", f"{ratio:.2f}"])
    _util.print_table(["workload (median)", "base", "this tree", "ratio"], rows)
    goals.check(
        f"no workload more than {MAX_RATIO - 1:.0%} slower",
        worst[1] <= MAX_RATIO,
        f"worst ratio {worst[1]:.2f} ({worst[0]})",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
