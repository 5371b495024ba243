"""Checkpoints on real jobs: what they add per turn, and how fast the store grows.

The quickstart job (three phases of writing) and the audit job (a 60-file codebase) run on
the simulated agent with a SQLite store, with ``checkpoints=False`` and with a checkpoint at
every turn (the default), alternating run by run. For each job the script reports:

- the wall time per turn of each configuration (median of ``REPEATS`` runs; the simulated
  model's time is in both) and what checkpoints add;
- what the checkpoints wrote to the store per turn (rows and new blobs, as the checkpointer
  counts them), and the growth of the store's file per turn with and without them.

Goals, for each job: checkpoints add at most 1 ms a turn (a model call takes about a second);
the store grows by no more per turn than it did with the checkpoint format before this one
(:data:`EARLIER_STORE_BYTES`, measured on the same jobs); and a fork at the middle turn under
the same agent ends with the same files as its parent (the workspace summary, which holds
the time, aside).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _util

import gr_notebook as gr
from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.examples import ExampleJob, audit_job, quickstart_job
from gr_notebook.workflow.workspace_files import hash_files

REPEATS = 7
MAX_ADDED_US = 1000.0
EARLIER_STORE_BYTES = {"quickstart": 6_561, "audit": 12_792}
"""The store's growth per turn with checkpoints, in bytes, as the earlier checkpoint format
(one row of what changed since the turn before) wrote it on these jobs: medians of this
script's runs on that code."""


def store_bytes(path: Path) -> int:
    return sum(
        os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


def run_once(job: ExampleJob, *, checkpoints: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="gr-bench-ckpt-", dir=_util.SCRATCH) as tmp:
        root = Path(tmp)
        store = gr.Store(root / "store.sqlite")
        empty = store_bytes(store.path)
        agent = gr.Agent(
            gr.SimulatedModel(),
            workspace=job.prepare(root / "ws"),
            store=store,
            max_iterations=300,
            checkpoints=checkpoints,
        )
        gc.collect()
        started = time.perf_counter()
        run = agent.run_sync(job.instructions)
        wall = time.perf_counter() - started
        if run.status != "completed":
            raise RuntimeError(f"unexpected run end: {run.status} ({run.reason})")
        engine = run._loop
        assert engine is not None
        written = (
            engine.checkpoint.bytes_written if isinstance(engine.checkpoint, Checkpointer) else 0
        )
        store.close()
        return {
            "turns": run.turns,
            "us_per_turn": wall / run.turns * 1e6,
            "written_per_turn": written / run.turns,
            "file_per_turn": (store_bytes(store.path) - empty) / run.turns,
        }


def fork_matches(job: ExampleJob) -> tuple[bool, int]:
    with tempfile.TemporaryDirectory(prefix="gr-bench-fork-", dir=_util.SCRATCH) as tmp:
        root = Path(tmp)
        agent = gr.Agent(
            gr.SimulatedModel(),
            workspace=job.prepare(root / "ws"),
            store=root / "store.sqlite",
            max_iterations=300,
        )
        parent = agent.run_sync(job.instructions)
        middle = parent.turns // 2
        fork = asyncio.run(_fork(parent, middle, root / "fork"))

        def files(run: gr.Run) -> dict[str, str]:
            found = hash_files(run.workspace.root)
            return {p: d for p, d in found.items() if p != "workspace_summary.md"}

        return fork.status == "completed" and files(fork) == files(parent), middle


async def _fork(parent: gr.Run, turn: int, where: Path) -> gr.Run:
    return await parent.fork(turn, workspace=where).wait()


def main() -> int:
    goals = _util.Goals()
    jobs = {"quickstart": quickstart_job(), "audit": audit_job()}
    rows = []
    for name, job in jobs.items():
        run_once(job, checkpoints=True)  # warm-up
        results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for _ in range(REPEATS):
            for checkpoints in (False, True):
                results[checkpoints].append(run_once(job, checkpoints=checkpoints))

        def med(
            checkpoints: bool, key: str, results: dict[bool, list[dict[str, float]]] = results
        ) -> float:
            return statistics.median(r[key] for r in results[checkpoints])

        plain, checked = med(False, "us_per_turn"), med(True, "us_per_turn")
        rows.append(
            [
                name,
                f"{med(True, 'turns'):.0f}",
                f"{plain:,.0f}",
                f"{checked:,.0f}",
                f"{checked - plain:+,.0f} ({checked / plain - 1:+.1%})",
                f"{med(True, 'written_per_turn'):,.0f}",
                f"{med(False, 'file_per_turn'):,.0f}",
                f"{med(True, 'file_per_turn'):,.0f}",
            ]
        )
        added = checked - plain
        goals.check(
            f"{name}: checkpoints add <= {MAX_ADDED_US:,.0f} µs a turn",
            added <= MAX_ADDED_US,
            f"{added:+,.0f} µs a turn ({checked:,.0f} vs {plain:,.0f}, medians)",
        )
        grown, before = med(True, "file_per_turn"), EARLIER_STORE_BYTES[name]
        goals.check(
            f"{name}: the store grows no more per turn than with the earlier format",
            grown <= before,
            f"{grown:,.0f} B a turn, against {before:,.0f}",
        )
        same, middle = fork_matches(job)
        goals.check(
            f"{name}: a fork at turn {middle} under the same agent ends as its parent",
            same,
            "same files" if same else "the files differ",
        )
    _util.section(f"Checkpoints on the example jobs, simulated agent, {REPEATS} runs each")
    _util.print_table(
        [
            "job",
            "turns",
            "µs/turn, no ckpt",
            "µs/turn, ckpt",
            "added",
            "ckpt bytes/turn",
            "store B/turn, no ckpt",
            "store B/turn, ckpt",
        ],
        rows,
    )
    print(
        "µs/turn: wall time per turn, the simulated model's included (medians over runs);\n"
        "ckpt bytes/turn: rows and new blobs the checkpoints wrote; store B/turn: the growth\n"
        "of the SQLite file (with its WAL) per turn."
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
