"""Side-effect records: what the intent before each tool call, and the model's reply kept
for a resume, cost per call.

A :class:`gr.ScriptedModel` replays ``N_TURNS`` turns of ``CALLS`` cheap ``once`` calls
each (a custom tool that returns at once), with a SQLite store on tmpfs and a checkpoint at
every turn, as a run has by default. The same runs are made without the records: the bench
(never the package) replaces the guarded step's ``intent`` with a stub that records nothing
and drops the run's blob keeper, so the reply is not kept either. The two configurations
alternate run by run, so the machine's drift hits both alike.

Figures: wall time per tool call with and without the records (medians over ``REPEATS``
runs), their difference (the records' cost per call) and their ratio.

Goal (the 1 ms rule): the records add at most 1 ms per tool call.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import _util

import gr_notebook as gr
from gr_notebook import runner
from gr_notebook.engine.guarded_step import GuardedStep
from gr_notebook.tools.base import Tool, ToolContext, object_schema

N_TURNS = 150
CALLS = 4
REPEATS = 9
MAX_ADDED_US = 1000.0


def _send(ctx: ToolContext, params: Mapping[str, Any]) -> str:
    return f"sent {params['n']}"


SEND = Tool("send", "Send.", object_schema(["n"], n={"type": "integer"}), _send)


def script() -> list[Any]:
    turns = [
        gr.tool_calls([("send", {"n": turn * CALLS + i}) for i in range(CALLS)])
        for turn in range(N_TURNS)
    ]
    return [*turns, gr.text("done")]


class _NoRecords:
    """The loop as it was before the records: no intent, no kept reply (bench only)."""

    def __enter__(self) -> None:
        self.intent, self.record = GuardedStep.intent, runner._open_record

        def no_intent(step: GuardedStep, call: Any, **_: Any) -> str:
            return ""

        def open_record(*args: Any) -> None:
            self.record(*args)
            args[2].state.keep = None

        GuardedStep.intent = no_intent  # type: ignore[method-assign,assignment]
        runner._open_record = open_record  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        GuardedStep.intent = self.intent  # type: ignore[method-assign]
        runner._open_record = self.record


def one_run(records: bool) -> float:
    """Seconds of wall time per tool call, over one run."""
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            gr.ScriptedModel(script()),
            tools=[SEND],
            workspace=Path(tmp) / "ws",
            store=Path(tmp) / "store.sqlite",
            max_iterations=N_TURNS * 2,
            interventions=None,  # the same call again and again is no progress
        )
        started = time.perf_counter()
        if records:
            run = agent.run_sync("Send them.")
        else:
            with _NoRecords():
                run = agent.run_sync("Send them.")
        elapsed = time.perf_counter() - started
        kinds = [e.kind for e in run.events]
        assert run.status in ("ended", "incomplete"), run.reason
        assert kinds.count("tool_intent") == (N_TURNS * CALLS if records else 0)
        return elapsed / (N_TURNS * CALLS)


def main() -> int:
    goals = _util.Goals()
    one_run(True), one_run(False)  # warm up
    with_, without = [], []
    for _ in range(REPEATS):
        with_.append(one_run(True))
        without.append(one_run(False))
    on, off = statistics.median(with_) * 1e6, statistics.median(without) * 1e6
    added = on - off
    _util.section(
        f"Side-effect records: {N_TURNS} turns of {CALLS} once calls, store and checkpoints "
        f"on, {REPEATS} runs each"
    )
    _util.print_table(
        ["configuration", "µs/call (median)", "p90"],
        [
            ["with the records", f"{on:,.0f}", f"{_util.percentile(with_, 90) * 1e6:,.0f}"],
            ["without them", f"{off:,.0f}", f"{_util.percentile(without, 90) * 1e6:,.0f}"],
            ["the records' cost", f"{added:+,.0f}", ""],
            ["ratio", f"{on / off:.2f}×", ""],
        ],
    )
    print(
        "µs/call: the run's wall time over its tool calls (the loop, the store, checkpoints\n"
        "and the scripted model included); the records: a tool_intent event per call and\n"
        "the model's reply kept once a turn."
    )
    goals.check(
        f"the records add <= {MAX_ADDED_US:,.0f} µs a tool call",
        added <= MAX_ADDED_US,
        f"{added:+,.0f} µs a call ({on:,.0f} vs {off:,.0f}, medians; ratio {on / off:.2f})",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
