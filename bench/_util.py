"""Shared helpers for the benchmark scripts: tables, goals, statistics.

Each ``bench_*.py`` runs as a plain script (``python bench/bench_x.py``), so this module is
imported as ``_util`` from the script's own directory.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SCRATCH",
    "Goals",
    "fmt_int",
    "job",
    "median",
    "percentile",
    "pooled_summary",
    "print_table",
    "section",
]

# Scratch directories on tmpfs when there is one. The benchmarks measure the package, and
# the disk of these machines is noisy (seen: the same run taking 7 s, then 10 s).
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def job(title: str, *, phases: int, steps: int, unit: str, preamble: str = "") -> str:
    """Instructions the simulated agent plans as ``phases`` phases of ``steps`` steps."""
    lines = [f"# {title}", ""] + ([preamble, ""] if preamble else [])
    for k in range(1, phases + 1):
        lines.append(f"## {unit} {k}")
        lines += [f"- Write part {j} of {unit.lower()} {k}" for j in range(1, steps + 1)]
        lines.append("")
    return "\n".join(lines)


def section(title: str) -> None:
    print()
    print(title)
    print("─" * len(title))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])]
        parts += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


def fmt_int(value: float) -> str:
    return f"{round(value):,}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest-rank: an observed value, never interpolated."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Goals:
    """Collects goal checks, prints PASS/FAIL for each and gives the exit code."""

    started: float = field(default_factory=time.perf_counter)
    results: list[tuple[str, bool, str]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.results.append((name, ok, detail))
        return ok

    def report(self) -> int:
        section("Goals")
        for name, ok, detail in self.results:
            print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
        failed = sum(not ok for _, ok, _ in self.results)
        elapsed = time.perf_counter() - self.started
        print()
        verdict = "all goals met" if not failed else f"{failed} goal(s) missed"
        print(f"{verdict}; total wall time {elapsed:.1f} s")
        sys.stdout.flush()
        return 1 if failed else 0


def pooled_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Timed batches of one history size (each with ``samples_us``, ``feedback_blocks`` and
    ``denials``), pooled. Stdlib only: ``wink_probe.py`` imports it under WINK's Python too."""
    pooled = [us for r in runs for us in r["samples_us"]]
    return {
        "median_us": statistics.median(pooled),
        "min_us": min(pooled),
        "mean_us": statistics.fmean(pooled),
        "run_medians_us": [statistics.median(r["samples_us"]) for r in runs],
        "feedback_blocks": [r["feedback_blocks"] for r in runs],
        "denials": sum(r["denials"] for r in runs),
    }
