"""Context stays bounded: a 30-phase job on the simulated model, with and without compaction.

The simulated agent derives one phase per ``## heading`` of the instructions, so the job
below has 30 phases of 6 steps each. Both runs do the same work; the compacted one should
send requests no bigger at phase 30 than at phase 3, while the uncompacted one drags the
whole history along and pays for it in input tokens.

Goals:
  * with compaction, the largest request in phases 26-30 is at most 1.25x the largest
    request in phases 2-5;
  * without compaction the job uses at least 5x the total input tokens.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass

import _util
import pandas as pd

import gr_notebook as gr

N_PHASES = 30
STEPS_PER_PHASE = 6
MAX_ITERATIONS = 5000
REPEATS = 3  # tokens are deterministic; repeats only steady the wall-time figure
EARLY = range(2, 6)  # phases 2-5
LATE = range(26, N_PHASES + 1)  # phases 26-30
LAYERS = [f"layer{i}_tokens" for i in range(1, 6)]
MAX_LATE_OVER_EARLY = 1.25
MIN_INPUT_RATIO = 5.0


def build_instructions() -> str:
    return _util.job(
        "Field guide to coastal ecosystems",
        phases=N_PHASES,
        steps=STEPS_PER_PHASE,
        unit="Section",
        preamble="Write one short document per step below, section by section.",
    )


@dataclass(frozen=True)
class ContextResult:
    compaction: bool
    status: str
    turns: int
    phases_completed: int
    input_tokens: int
    output_tokens: int
    early_max: int
    late_max: int
    layers_early: tuple[int, ...]
    layers_late: tuple[int, ...]
    compactions: int
    wall_s: float

    @property
    def ratio(self) -> float:
        return self.late_max / self.early_max


def run_once(instructions: str, *, compaction: bool) -> ContextResult:
    with tempfile.TemporaryDirectory(prefix="gr-bench-ctx-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            model=gr.SimulatedModel(),
            workspace=tmp,
            max_iterations=MAX_ITERATIONS,
            compaction=compaction,
            store=False,
            stuck_turns=None,
            # Compaction alone: with seed 003's tools the agent would also prune its own
            # context, on both sides (bench_regulation.py measures that).
            self_regulation=False,
        )
        started = time.perf_counter()
        run = agent.run_sync(instructions)
        wall = time.perf_counter() - started
        turns = run.turns_df()
        phases = run.phases_df()
    done = phases[(phases["kind"] == "phase") & (phases["outcome"] == "complete")]
    early = turns[turns["phase"].isin(EARLY)]
    late = turns[turns["phase"].isin(LATE)]
    return ContextResult(
        compaction=compaction,
        status=run.status,
        turns=len(turns),
        phases_completed=done["phase"].nunique(),
        input_tokens=int(turns["input_tokens"].sum()),
        output_tokens=int(turns["output_tokens"].sum()),
        early_max=int(early["context_tokens"].max()),
        late_max=int(late["context_tokens"].max()),
        layers_early=_layer_max(early),
        layers_late=_layer_max(late),
        compactions=len(run.events.of_kind("compaction")),
        wall_s=wall,
    )


def _layer_max(turns: pd.DataFrame) -> tuple[int, ...]:
    return tuple(int(turns[c].max()) for c in LAYERS)


def measure(instructions: str, *, compaction: bool) -> tuple[ContextResult, float]:
    """One result (checked identical across repeats) and the median wall time."""
    results = [run_once(instructions, compaction=compaction) for _ in range(REPEATS)]
    first = results[0]
    for other in results[1:]:
        if (other.turns, other.input_tokens) != (first.turns, first.input_tokens):
            print(f"warning: repeats differ (compaction={compaction}): not deterministic")
    return first, _util.median([r.wall_s for r in results])


def main() -> int:
    goals = _util.Goals()
    instructions = build_instructions()
    on, on_wall = measure(instructions, compaction=True)
    off, off_wall = measure(instructions, compaction=False)

    _util.section(
        f"Context stays bounded: {N_PHASES} phases x {STEPS_PER_PHASE} steps, simulated model"
    )
    rows: list[list[object]] = [
        ["status", on.status, off.status],
        ["phases completed", on.phases_completed, off.phases_completed],
        ["turns (model calls)", on.turns, off.turns],
        ["compactions", on.compactions, off.compactions],
        ["total input tokens", _util.fmt_int(on.input_tokens), _util.fmt_int(off.input_tokens)],
        ["total output tokens", _util.fmt_int(on.output_tokens), _util.fmt_int(off.output_tokens)],
        ["max context, phases 2-5", _util.fmt_int(on.early_max), _util.fmt_int(off.early_max)],
        ["max context, phases 26-30", _util.fmt_int(on.late_max), _util.fmt_int(off.late_max)],
        ["ratio late/early", f"{on.ratio:.2f}", f"{off.ratio:.2f}"],
        [f"wall time (median of {REPEATS})", f"{on_wall:.2f} s", f"{off_wall:.2f} s"],
    ]
    _util.print_table(["", "compaction=True", "compaction=False"], rows)

    _util.section("Per-layer max tokens per request, compaction=True")
    layer_rows = [
        [
            f"L{i + 1}",
            _util.fmt_int(on.layers_early[i]),
            _util.fmt_int(on.layers_late[i]),
            f"{on.layers_late[i] / on.layers_early[i]:.2f}" if on.layers_early[i] else "-",
        ]
        for i in range(5)
    ]
    _util.print_table(["layer", "phases 2-5", "phases 26-30", "late/early"], layer_rows)
    print("(L1 system, L2 todo display, L3 tool specs, L4 recap summary, L5 conversation)")

    for result in (on, off):
        label = f"compaction={result.compaction}"
        goals.check(
            f"{label} run completes all {N_PHASES} phases",
            result.status == "completed" and result.phases_completed == N_PHASES,
            f"status {result.status!r}, {result.phases_completed} phases completed",
        )
    goals.check(
        f"compacted context late <= {MAX_LATE_OVER_EARLY}x early",
        on.late_max <= MAX_LATE_OVER_EARLY * on.early_max,
        f"{on.late_max:,} vs {on.early_max:,} tokens: ratio {on.ratio:.2f}",
    )
    input_ratio = off.input_tokens / on.input_tokens
    goals.check(
        f"no compaction uses >= {MIN_INPUT_RATIO:g}x the input tokens",
        input_ratio >= MIN_INPUT_RATIO,
        f"{off.input_tokens:,} vs {on.input_tokens:,} tokens: ratio {input_ratio:.1f}x",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
