"""Guardrail cost per tool call: gr_notebook beside WINK (weakincentives 0.27.0).

Both libraries run the same guardrails: a read-before-write policy and a sequential
dependency (``edit_file`` needs ``read_file``), and three feedback providers on a count
trigger (every 50 calls), a time trigger (``DeadlineFeedback`` every 30 s of a one-hour
deadline) and a file trigger (``DONE.md``, never created, so it is looked for on every
call). No model and no loop: each side drives its per-run guardrail runtime directly, with
the call pattern read f, write f, read g, edit g, ... over 20 files that exist in a
workspace on ``/dev/shm`` (the write policy stats them), and a fake clock advanced 0.1 s per
call (so the 30 s trigger fires every 300 calls).

gr_notebook, per call, the sequence of the tool-execution step (``engine/tool_calls.py``):
``guards.check`` → (the tool's work: excluded) → ``guards.after_success`` →
``log.append(ToolCallEvent(...))`` → ``guards.after_call`` → ``render_feedback`` of any
blocks. Every guardrail event goes to a real :class:`EventLog`, as in a run.

WINK, per call (``bench/wink_probe.py``, in its own Python >= 3.12 venv built by
``make bench-env``; WINK is never a dependency of the package): policy ``check`` →
``on_result`` → ``dispatch(ToolInvoked)`` → ``collect_feedback``, as its adapters do.

The question is whether the cost grows with the run. Each history size gets fresh runs
built up to that many prior calls by doing them, then ``BATCH`` calls timed one by one
with ``perf_counter_ns``; ``REPEATS`` rounds over all sizes, each size's samples pooled
(median and min).

The cost of a shadow: the same runs with one shadow policy (``gr.Agent(shadow=[...])``, a
second read-before-write policy asked at every call and remembering every success, its
decisions recorded as events), measured side by side with runs without it and with the same
policy live: for each round, one run of each at ``SHADOW_AT`` prior calls, in rotating order.

Goals:
  1. gr_notebook is flat: median at 10,000 prior calls <= 1.5 x median at 100;
  2. gr_notebook is >= 10 x faster than WINK at 5,000 prior calls (ratio of medians).
     Without a Python >= 3.12 for the WINK venv this goal is reported NOT MEASURED;
  3. a policy in shadow adds <= 2.5 x what the same policy adds live (medians). The shadow
     records a decision event at every call, where a third live policy shares the call's
     one event: that event is most of the difference.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _util

from gr_notebook.clock import FakeClock
from gr_notebook.events import Event, EventLog, ToolCallEvent
from gr_notebook.guardrails import (
    Budget,
    BudgetUsage,
    DeadlineFeedback,
    FeedbackProviderConfig,
    FeedbackTrigger,
    FileCreatedTrigger,
    Guardrails,
    GuardrailSpec,
    ReadBeforeWritePolicy,
    SequentialDependencyPolicy,
    StaticFeedbackProvider,
    render_feedback,
)
from gr_notebook.guardrails.shadow import Shadow, ShadowSpec
from gr_notebook.tools import CORE_TOOLS, ToolOutput
from gr_notebook.workflow.todos import TodoList
from gr_notebook.workflow.workspace import Workspace

SIZES = (10, 100, 1_000, 5_000, 10_000)
BATCH = 300
REPEATS = 3
N_FILES = 20
TICK_S = 0.1
DEADLINE_S = 3600
FLAT_EARLY, FLAT_LATE, MAX_GROWTH = 100, 10_000, 1.5
VS_AT, MIN_SPEEDUP = 5_000, 10.0
SHADOW_AT, SHADOW_ROUNDS, MAX_SHADOW_RATIO = 1_000, 6, 2.5
VARIANTS = ("live only", "live + the policy live", "live + the policy in shadow")

ROOT = Path(__file__).resolve().parent.parent
WINK_VENV = ROOT / ".bench" / "wink-venv"
WINK_PYTHON = WINK_VENV / "bin" / "python"
WINK_UNAVAILABLE = ROOT / ".bench" / "wink-unavailable.txt"
"""Written by ``make bench-env`` when it cannot build the venv: the reason."""
PROBE = Path(__file__).resolve().parent / "wink_probe.py"
PROBE_TIMEOUT_S = 600

TOOLS = {t.name: t for t in CORE_TOOLS if t.name in ("read_file", "write_file", "edit_file")}
OUTPUT = ToolOutput("ok")
TODOS = TodoList.of(["Write the notes"], phase_number=1, phase_total=1, phase_name="Notes")


def call_pattern(index: int) -> tuple[str, dict[str, Any]]:
    """Call ``index``: read f, write f, read g, edit g, ... (as in wink_probe.py)."""
    path = f"notes/f{(index // 2) % N_FILES:02d}.md"
    if index % 2 == 0:
        return "read_file", {"path": path}
    if index % 4 == 1:
        return "write_file", {"path": path, "content": "new text\n"}
    return "edit_file", {"path": path, "old_text": "text", "new_text": "words"}


def make_workspace(root: Path) -> None:
    (root / "notes").mkdir(parents=True)
    for k in range(N_FILES):
        (root / "notes" / f"f{k:02d}.md").write_text(f"# File {k}\n\nSome text.\n")


class Run:
    """One gr_notebook run's guardrails, an event log and a fake clock; no model, no loop;
    ``variant`` (one of :data:`VARIANTS`) adds one more read-before-write policy, live or in
    shadow (asked where the live ones are)."""

    def __init__(self, root: Path, *, variant: str = VARIANTS[0]) -> None:
        self.clock = FakeClock()
        self.started = self.clock()
        self.budget = Budget(deadline_s=DEADLINE_S, max_iterations=1_000_000)
        self.log = EventLog(self.clock)
        self.turn = 0
        spec = GuardrailSpec.build(
            tools=list(CORE_TOOLS),
            policies=[
                ReadBeforeWritePolicy(),
                SequentialDependencyPolicy(dependencies={"edit_file": {"read_file"}}),
                *([ReadBeforeWritePolicy()] if variant == VARIANTS[1] else []),
            ],
            feedback_providers=[
                FeedbackProviderConfig(
                    StaticFeedbackProvider("count", name="Count"),
                    FeedbackTrigger(every_n_calls=50),
                ),
                FeedbackProviderConfig(DeadlineFeedback(), FeedbackTrigger(every_n_seconds=30)),
                FeedbackProviderConfig(
                    StaticFeedbackProvider("file", name="FileWatch"),
                    FeedbackTrigger(on_file_created=FileCreatedTrigger("DONE.md")),
                ),
            ],
        )
        self.run_id, self.name, self.wrap_up = "", "bench", None
        self.workspace, self.todos = Workspace(root), TODOS
        self.guards = Guardrails(spec, self)  # this object is the run the guardrails read
        self.plan_file = "main_plan.md"
        self.shadow = (
            Shadow(ShadowSpec.build([ReadBeforeWritePolicy()], tools=list(CORE_TOOLS)), self)
            if variant == VARIANTS[2]
            else None
        )
        self.calls = 0
        self.denials = 0
        self.feedback_blocks = 0

    def emit(self, event: Event) -> None:
        self.log.append(event, turn=self.turn, phase=1)

    def usage(self) -> BudgetUsage:
        return self.budget.usage(
            tokens=0, iterations=self.turn, elapsed_s=self.clock() - self.started
        )

    def plan(self) -> None:
        return None

    def phase_ahead(self) -> tuple[int, str]:
        return 1, "the task"

    def call(self) -> int:
        """One tool call's guardrail work, as the loop does it; returns its duration in ns."""
        name, params = call_pattern(self.calls)
        tool, use_id = TOOLS[name], f"toolu_{self.calls:06d}"
        guards, output = self.guards, OUTPUT
        self.turn += 1
        turn = self.turn
        started = time.perf_counter_ns()
        shadow = self.shadow
        denial = guards.check(tool, params, turn=turn, tool_use_id=use_id)
        if shadow is not None:
            shadow.check(tool, params, turn=turn, tool_use_id=use_id)
        if denial is None:
            # (the tool's own work would run here)
            guards.after_success(tool, params, output, turn=turn)
            if shadow is not None:
                shadow.after_success(tool, params, output, turn=turn)
        else:
            output = ToolOutput(denial.message(), True)
        self.log.append(
            ToolCallEvent(
                tool=name,
                tool_use_id=use_id,
                input=params,
                is_error=output.is_error,
                result=output.content,
                duration_s=0.0,
            ),
            turn=turn,
            phase=1,
        )
        blocks = guards.after_call(name, params, is_error=output.is_error, turn=turn)
        if shadow is not None:
            shadow.after_call(name, params, output.content, is_error=output.is_error, turn=turn)
        content = output.content
        if blocks:
            content = f"{content}\n\n{render_feedback(blocks)}"
        elapsed = time.perf_counter_ns() - started
        self.calls += 1
        self.denials += denial is not None
        self.feedback_blocks += len(blocks)
        self.clock.advance(TICK_S)
        return elapsed


def measure_once(size: int, batch: int, *, variant: str = VARIANTS[0]) -> dict[str, Any]:
    """A fresh run built up to ``size`` calls, then ``batch`` calls timed one by one."""
    with tempfile.TemporaryDirectory(prefix="gr-bench-guard-", dir=_util.SCRATCH) as tmp:
        root = Path(tmp) / "ws"
        make_workspace(root)
        run = Run(root, variant=variant)
        for _ in range(size):
            run.call()
        blocks_before, denials_before = run.feedback_blocks, run.denials
        gc.collect()
        samples = [run.call() / 1000 for _ in range(batch)]
    return {
        "samples_us": samples,
        "feedback_blocks": run.feedback_blocks - blocks_before,
        "denials": run.denials - denials_before,
        "events": len(run.log),
    }


def measure_all() -> dict[int, dict[str, Any]]:
    """``REPEATS`` rounds over every size (so slow spells of the machine hit all sizes
    alike), then each size's samples pooled."""
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in SIZES}
    for _ in range(REPEATS):
        for size in SIZES:
            runs[size].append(measure_once(size, BATCH))
    return {size: summarize(rs) for size, rs in runs.items()}


def measure_shadow() -> dict[str, dict[str, Any]]:
    """Runs of every variant side by side: each round one of each, in rotating order, so a
    slow spell of the machine hits them alike."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for round_ in range(SHADOW_ROUNDS):
        order = VARIANTS[round_ % 3 :] + VARIANTS[: round_ % 3]
        for variant in order:
            runs[variant].append(measure_once(SHADOW_AT, BATCH, variant=variant))
    return {variant: summarize(rs) for variant, rs in runs.items()}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_util.pooled_summary(runs), "events": runs[-1]["events"]}


@dataclass
class WinkResult:
    sizes: dict[int, dict[str, Any]] = field(default_factory=dict)
    version: str = ""
    python: str = ""
    unavailable: str | None = None
    """Why there is no WINK column: no suitable interpreter or venv (not measured)."""
    failed: str | None = None
    """The probe ran and broke: a broken benchmark, reported as a failure."""


def run_wink() -> WinkResult:
    if not WINK_PYTHON.exists():
        reason = (
            WINK_UNAVAILABLE.read_text().strip()
            if WINK_UNAVAILABLE.exists()
            else f"no WINK venv at {WINK_VENV.relative_to(ROOT)}"
        )
        return WinkResult(
            unavailable=f"{reason}. `make bench-env` builds it (needs Python >= 3.12, "
            "from pyenv or python3.12/python3.13 on PATH); `make bench` runs it first."
        )
    command = [
        str(WINK_PYTHON),
        str(PROBE),
        "--sizes",
        ",".join(map(str, SIZES)),
        "--batch",
        str(BATCH),
        "--repeats",
        str(REPEATS),
    ]
    if _util.SCRATCH:
        command += ["--scratch", _util.SCRATCH]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return WinkResult(failed=f"{type(exc).__name__}: {exc}")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        if "No module named 'weakincentives'" in done.stderr:
            return WinkResult(unavailable=f"weakincentives is not installed in {WINK_VENV}")
        return WinkResult(failed=f"wink_probe.py exited {done.returncode}:\n{tail}")
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
        return WinkResult(
            sizes={int(k): v for k, v in data["sizes"].items()},
            version=data["weakincentives"],
            python=data["python"],
        )
    except (ValueError, KeyError, IndexError) as exc:
        return WinkResult(failed=f"unreadable output from wink_probe.py ({exc}): {done.stdout!r}")


class BenchGoals(_util.Goals):
    """``Goals`` that can also record a goal as not measured: shown, neither PASS nor FAIL."""

    def __init__(self) -> None:
        super().__init__()
        self.unmeasured: list[tuple[str, str]] = []

    def not_measured(self, name: str, detail: str) -> None:
        self.unmeasured.append((name, detail))

    def report(self) -> int:
        if not self.unmeasured:
            return super().report()
        _util.section("Goals")
        for name, ok, detail in self.results:
            print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
        for name, detail in self.unmeasured:
            print(f"[NOT MEASURED] {name}: {detail}")
        failed = sum(not ok for _, ok, _ in self.results)
        print()
        met = "all measured goals met" if not failed else f"{failed} goal(s) missed"
        print(
            f"{met}; {len(self.unmeasured)} goal(s) not measured; total wall time "
            f"{time.perf_counter() - self.started:.1f} s"
        )
        sys.stdout.flush()
        return 1 if failed else 0


def _us(value: float) -> str:
    return f"{value:,.1f}"


def main() -> int:
    goals = BenchGoals()
    measure_once(10, 50)  # warm-up: imports, first-call caches
    ours = measure_all()
    wink = run_wink()

    _util.section(
        f"Guardrail cost per tool call (µs): {BATCH} calls timed after N prior calls, "
        f"{REPEATS} rounds of fresh runs over all N, samples pooled per N"
    )
    have_wink = bool(wink.sizes)
    headers = ["prior calls", "gr median", "gr min"]
    if have_wink:
        headers += ["WINK median", "WINK min", "WINK/gr median", "WINK/gr min"]
    rows: list[list[object]] = []
    for size in SIZES:
        mine = ours[size]
        row: list[object] = [f"{size:,}", _us(mine["median_us"]), _us(mine["min_us"])]
        if have_wink:
            theirs = wink.sizes[size]
            row += [
                _us(theirs["median_us"]),
                _us(theirs["min_us"]),
                f"{theirs['median_us'] / mine['median_us']:.1f}x",
                f"{theirs['min_us'] / mine['min_us']:.1f}x",
            ]
        rows.append(row)
    _util.print_table(headers, rows)

    print()
    detail_headers = ["prior calls", "gr mean", "gr run medians", "gr feedback/run"]
    if have_wink:
        detail_headers += ["WINK mean", "WINK run medians", "WINK feedback/run"]
    detail_rows: list[list[object]] = []
    for size in SIZES:
        mine = ours[size]
        row = [
            f"{size:,}",
            _us(mine["mean_us"]),
            " / ".join(f"{m:.1f}" for m in mine["run_medians_us"]),
            " ".join(map(str, mine["feedback_blocks"])),
        ]
        if have_wink:
            theirs = wink.sizes[size]
            row += [
                _us(theirs["mean_us"]),
                " / ".join(f"{m:.1f}" for m in theirs["run_medians_us"]),
                " ".join(map(str, theirs["feedback_blocks"])),
            ]
        detail_rows.append(row)
    _util.print_table(detail_headers, detail_rows)
    print(
        "feedback/run = feedback blocks delivered in each timed batch of "
        f"{BATCH} calls (count every 50 calls, deadline every 30 s = 300 calls)."
    )
    if have_wink:
        print(f"WINK: weakincentives {wink.version} on Python {wink.python}, via {PROBE.name}.")
    elif wink.unavailable:
        print(f"WINK column unavailable: {wink.unavailable}")
    else:
        print(f"WINK column missing: the probe failed: {wink.failed}")
    denials = sum(r["denials"] for r in ours.values()) + sum(
        int(r["denials"]) for r in wink.sizes.values()
    )
    if denials:
        print(f"warning: {denials} timed calls were denied; the call pattern is not all allowed")

    shadowed = measure_shadow()
    _util.section(
        f"One shadow policy per tool call (µs): {BATCH} calls timed after {SHADOW_AT:,} "
        f"prior calls, {SHADOW_ROUNDS} rounds of fresh runs of each, side by side"
    )
    base = shadowed[VARIANTS[0]]["median_us"]
    _util.print_table(
        ["guardrails", "median", "min", "mean", "added (median)", "x live only", "events/run"],
        [
            [
                variant,
                _us(r["median_us"]),
                _us(r["min_us"]),
                _us(r["mean_us"]),
                _us(r["median_us"] - base),
                f"{r['median_us'] / base:.2f}",
                r["events"],
            ]
            for variant, r in shadowed.items()
        ],
    )
    live_added = shadowed[VARIANTS[1]]["median_us"] - base
    shadow_added = shadowed[VARIANTS[2]]["median_us"] - base
    shadow_ratio = shadow_added / live_added if live_added > 0 else float("inf")
    print(
        f"The policy adds {shadow_added:.1f} µs per call in shadow and {live_added:.1f} µs "
        f"live (medians): {shadow_ratio:.2f} x."
    )

    early, late = ours[FLAT_EARLY]["median_us"], ours[FLAT_LATE]["median_us"]
    goals.check(
        f"gr_notebook flat: median at {FLAT_LATE:,} <= {MAX_GROWTH} x median at {FLAT_EARLY:,}",
        late <= MAX_GROWTH * early,
        f"{_us(late)} µs vs {_us(early)} µs: ratio {late / early:.2f}",
    )
    name = f"gr_notebook >= {MIN_SPEEDUP:g} x faster than WINK at {VS_AT:,} prior calls"
    if have_wink:
        theirs_at, mine_at = wink.sizes[VS_AT]["median_us"], ours[VS_AT]["median_us"]
        speedup = theirs_at / mine_at
        goals.check(
            name,
            speedup >= MIN_SPEEDUP,
            f"WINK {_us(theirs_at)} µs vs gr_notebook {_us(mine_at)} µs (medians): {speedup:.1f}x",
        )
    elif wink.unavailable:
        goals.not_measured(name, wink.unavailable)
    else:
        goals.check(name, False, f"the WINK probe failed: {wink.failed}")
    goals.check(
        f"a policy in shadow adds <= {MAX_SHADOW_RATIO} x what it adds live",
        shadow_ratio <= MAX_SHADOW_RATIO,
        f"{_us(shadow_added)} µs vs {_us(live_added)} µs (medians): {shadow_ratio:.2f}x",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
