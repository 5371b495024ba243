"""OpenTelemetry tracing: its cost per tool call next to gr's native guardrails alone.

The agent of ``bench_sdk_hooks.py`` (a read-before-write policy, a sequential dependency
``edit_file`` needs ``read_file``, a static feedback provider every 50 calls, a file trigger
on ``DONE.md`` that never fires, and the default intervention engine) judges the call pattern
read f, write f, read g, edit g, ... over 20 files on ``/dev/shm``, at the points of gr's
tool step (``guards.check``, ``guards.after_success``, the ``tool_call`` event, the
intervention engine, ``guards.after_call``), on a run state of the agent:

- ``native``: the guardrails alone;
- ``traced``: the same, with the run traced as ``instrument(agent)`` traces it (the span
  builder subscribed to the run's events, an SDK ``TracerProvider`` with a
  ``BatchSpanProcessor`` whose exporter drops what it gets, as a production setup sends);
- ``traced+content``: the same with ``capture_content=True``.

Each side is timed per call with ``perf_counter_ns`` at 100 and at 5,000 prior calls, the
sides interleaved in one run. Goals: tracing is flat (median at 5,000 prior calls <= 1.5 x at
100) and adds at most 0.5 ms a tool call (a model call takes about a second; most of what
tracing costs is the OpenTelemetry SDK's own span creation).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _util
from bench_sdk_hooks import FILES, guardrail_step, make_agent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from gr_notebook.engine.state import RunState
from gr_notebook.events import RunStartedEvent
from gr_notebook.integrations.opentelemetry.spans import TraceBuilder
from gr_notebook.integrations.opentelemetry.writer import SpanWriter
from gr_notebook.workflow.workspace import Workspace

SIZES = (100, 5_000)
BATCH = 400
REPEATS = 3
SIDES = ("native", "traced", "traced+content")


class Dropping(SpanExporter):
    """Takes the spans and sends them nowhere: what is measured is gr's side."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def pattern(n: int) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for i in range(n):
        f = f"f{(i // 2) % FILES}.txt"
        if i % 2 == 0:
            calls.append(("read_file", {"path": f}))
        elif i % 4 == 1:
            calls.append(("write_file", {"path": f, "content": "x\n"}))
        else:
            calls.append(("edit_file", {"path": f, "old_string": "x", "new_string": "x"}))
    return calls


Step = Callable[[str, dict[str, Any], int], None]


def make_step(ws: Path, side: str) -> tuple[Step, Callable[[], None]]:
    """One call through the guardrails as gr's tool step makes it; and what ends the side."""
    agent = make_agent(ws)
    state = RunState(agent.definition(), workspace=Workspace(ws), clock=agent.clock)
    tools = {t.name: t for t in agent.registry}
    done: Callable[[], None] = lambda: None  # noqa: E731
    if side != "native":
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropping()))
        writer = SpanWriter(provider.get_tracer("gr_notebook"))
        builder = TraceBuilder(writer, run_id="bench", capture_content=side == "traced+content")
        state.events.subscribe(builder.feed)
        done = provider.shutdown
    state.emit(
        RunStartedEvent(
            run_id="bench",
            model="simulated:diligent",
            workspace=str(ws),
            instructions="x",
            config=agent.config(),
        )
    )

    def step(name: str, args: dict[str, Any], i: int) -> None:
        tool = tools[name]
        guardrail_step(state, tool, args, f"toolu_{i}")

    return step, done


def timed(side: str, prior: int) -> list[float]:
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
        ws = Path(tmp)
        for k in range(FILES):
            (ws / f"f{k}.txt").write_text("x\n")
        step, done = make_step(ws, side)
        calls = pattern(prior + BATCH)
        for i, (name, args) in enumerate(calls[:prior]):
            step(name, args, i)
        samples = []
        gc.collect()
        for i, (name, args) in enumerate(calls[prior:], start=prior):
            started = time.perf_counter_ns()
            step(name, args, i)
            samples.append((time.perf_counter_ns() - started) / 1000)
        done()
        return samples


async def main() -> int:
    goals = _util.Goals()
    pooled: dict[tuple[str, int], list[float]] = {}
    for _ in range(REPEATS):
        for side in SIDES:
            for prior in SIZES:
                pooled.setdefault((side, prior), []).extend(timed(side, prior))
    medians = {key: statistics.median(samples) for key, samples in pooled.items()}
    _util.section("Cost per tool call (µs), median over the pooled samples")
    native = medians[("native", SIZES[0])]
    _util.print_table(
        ["side", *(f"{n:,} prior calls" for n in SIZES), "x native (100)"],
        [
            [
                side,
                *(f"{medians[(side, n)]:.1f}" for n in SIZES),
                f"{medians[(side, SIZES[0])] / native:.2f}",
            ]
            for side in SIDES
        ],
    )
    for side in SIDES[1:]:
        added = medians[(side, SIZES[0])] - native
        print(f"{side}: tracing adds {added:.1f} µs a call")
    flat = medians[("traced", SIZES[1])] / medians[("traced", SIZES[0])]
    added = medians[("traced", SIZES[0])] - native
    ratio = medians[("traced", SIZES[0])] / native
    goals.check("tracing is flat (5,000 vs 100 prior calls)", flat <= 1.5, f"{flat:.2f} x")
    goals.check(
        "tracing adds <= 500 µs a tool call",
        added <= 500,
        f"{added:.0f} µs ({ratio:.2f} x the native guardrails' {native:.0f} µs)",
    )
    return goals.report()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
