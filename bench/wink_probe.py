"""The WINK side of ``bench_guardrails.py``: the same guardrail work, done by weakincentives.

Runs under the separate bench venv (``make bench-env`` builds ``.bench/wink-venv`` with
Python >= 3.12 and ``weakincentives==0.27.0``); WINK is never a dependency of the package.
It imports nothing from gr_notebook and prints one JSON object to stdout.

The per-call work mirrors what WINK's adapters do around a tool handler (the tool bridge's
``_check_policies`` / ``_notify_policies`` / ``_dispatch_tool_invoked`` in
``adapters/_shared/_bridge.py``, then ``collect_feedback`` in the Claude Agent SDK's
PostToolUse hook):
  1. a ``ToolContext`` for the call;
  2. ``check`` of every policy ``prompt.policies_for_tool(name)`` returns;
  3. (the tool's own work: excluded, the files already exist and are left unchanged)
  4. ``on_result`` of the same policies;
  5. ``session.dispatcher.dispatch(ToolInvoked(...))``, which appends to the session;
  6. ``collect_feedback(prompt=, session=, deadline=)``, the rendered text if any fired.
Parsing the params into a dataclass and the bridge's per-call session snapshot
(``tool_transaction``) are left out, as gr_notebook's argument checks are on its side.

Configuration, as on the gr_notebook side: ``ReadBeforeWritePolicy`` and a
``SequentialDependencyPolicy({"edit_file": {"read_file"}})`` on the whole prompt; three
providers: a static message every 50 calls, ``DeadlineFeedback`` every 30 s (a one-hour
deadline) and a static message on ``FileCreatedTrigger("DONE.md")`` (never created, so it
checks the file on every call). WINK's ``StaticFeedbackProvider`` is always named
"Static", and trigger state is kept per provider name, so the two static providers get
their own names through a subclass. WINK reads time from ``SYSTEM_CLOCK``; the probe swaps
in WINK's own ``FakeClock`` (in ``weakincentives.prompt.feedback``, for the trigger and the
feedback timestamps, and in the ``Deadline``) advanced 0.1 s per call, as gr_notebook's
``FakeClock`` is, so the 30 s trigger fires every 300 calls on both sides.

Each history size gets ``--repeats`` fresh runs (in rounds over all sizes): built up to that
many calls by doing them, then ``--batch`` calls timed one by one with ``perf_counter_ns``;
each size's samples are pooled.

Usage: ``wink_probe.py --sizes 10,100,1000 --batch 300 --repeats 3 [--scratch /dev/shm]``
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import weakincentives.prompt.feedback as wink_feedback
from _util import pooled_summary  # bench/_util.py: stdlib only, so it imports here too
from weakincentives import Deadline, FakeClock
from weakincentives.filesystem import Filesystem, HostFilesystem
from weakincentives.prompt import (
    DeadlineFeedback,
    FeedbackProviderConfig,
    FeedbackTrigger,
    FileCreatedTrigger,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    ReadBeforeWritePolicy,
    SequentialDependencyPolicy,
    StaticFeedbackProvider,
    Tool,
    ToolContext,
    ToolResult,
    collect_feedback,
)
from weakincentives.runtime import Session, ToolInvoked

N_FILES = 20
TICK_S = 0.1
DEADLINE_S = 3600.0
NS, KEY = "bench", "guardrails"


@dataclass(frozen=True, slots=True)
class PathParams:
    path: str


@dataclass(frozen=True, slots=True)
class WriteParams:
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class EditParams:
    path: str
    old_text: str
    new_text: str


@dataclass(frozen=True, slots=True)
class Ack:
    text: str


def _handler(params: Any, *, context: ToolContext) -> ToolResult[Ack]:
    return ToolResult.ok(Ack("ok"))


@dataclass(frozen=True)
class NamedStatic(StaticFeedbackProvider):
    """WINK's StaticFeedbackProvider under a name of its own."""

    label: str = "Static"

    @property
    def name(self) -> str:
        return self.label


TOOLS: dict[str, Tool[Any, Any]] = {
    "read_file": Tool[PathParams, Ack](name="read_file", description="Read.", handler=_handler),
    "write_file": Tool[WriteParams, Ack](name="write_file", description="Write.", handler=_handler),
    "edit_file": Tool[EditParams, Ack](name="edit_file", description="Edit.", handler=_handler),
}


def call_pattern(index: int) -> tuple[str, Any, dict[str, Any]]:
    """Call ``index``: read f, write f, read g, edit g, ... over ``N_FILES`` files."""
    path = f"notes/f{(index // 2) % N_FILES:02d}.md"
    if index % 2 == 0:
        return "read_file", PathParams(path), {"path": path}
    if index % 4 == 1:
        args = {"path": path, "content": "new text\n"}
        return "write_file", WriteParams(**args), args
    args = {"path": path, "old_text": "text", "new_text": "words"}
    return "edit_file", EditParams(**args), args


class Run:
    """One WINK "run": a bound prompt, a session, a deadline and a fake clock."""

    def __init__(self, root: Path) -> None:
        self.clock = FakeClock()
        wink_feedback.SYSTEM_CLOCK = self.clock  # type: ignore[misc]
        template = PromptTemplate[None](
            ns=NS,
            key=KEY,
            name="wink_probe",
            sections=(
                MarkdownSection(
                    title="Files",
                    template="Work on the files.",
                    key="files",
                    tools=tuple(TOOLS.values()),
                ),
            ),
            policies=(
                ReadBeforeWritePolicy(),
                SequentialDependencyPolicy(dependencies={"edit_file": frozenset({"read_file"})}),
            ),
            feedback_providers=(
                FeedbackProviderConfig(
                    provider=NamedStatic("count", label="Count"),
                    trigger=FeedbackTrigger(every_n_calls=50),
                ),
                FeedbackProviderConfig(
                    provider=DeadlineFeedback(), trigger=FeedbackTrigger(every_n_seconds=30)
                ),
                FeedbackProviderConfig(
                    provider=NamedStatic("file", label="FileWatch"),
                    trigger=FeedbackTrigger(on_file_created=FileCreatedTrigger("DONE.md")),
                ),
            ),
        )
        self.prompt = Prompt(template).bind(resources={Filesystem: HostFilesystem(_root=str(root))})
        self.prompt_name = self.prompt.name or f"{NS}:{KEY}"
        self.session = Session()
        now = self.clock.utcnow()
        self.deadline = Deadline(
            expires_at=now + timedelta(seconds=DEADLINE_S), started_at=now, clock=self.clock
        )
        self.calls = 0
        self.denials = 0
        self.feedback_blocks = 0
        self.result = ToolResult.ok(Ack("ok"))

    def call(self) -> int:
        """One tool call's guardrail work; returns its duration in ns."""
        name, params, args = call_pattern(self.calls)
        tool = TOOLS[name]
        prompt, session = self.prompt, self.session
        started = time.perf_counter_ns()
        context = ToolContext(
            prompt=prompt,
            rendered_prompt=None,
            adapter=None,  # type: ignore[arg-type]
            session=session,
            deadline=self.deadline,
        )
        denied = False
        for policy in prompt.policies_for_tool(name):
            if not policy.check(tool, params, context=context).allowed:
                denied = True
                break
        if not denied:
            for policy in prompt.policies_for_tool(name):
                policy.on_result(tool, params, self.result, context=context)
        session.dispatcher.dispatch(
            ToolInvoked(
                prompt_name=self.prompt_name,
                adapter="bench",
                name=name,
                params=args,
                result=self.result,
                session_id=session.session_id,
                created_at=self.clock.utcnow(),
                rendered_output="ok",
            )
        )
        text = collect_feedback(prompt=prompt, session=session, deadline=self.deadline)
        elapsed = time.perf_counter_ns() - started
        self.calls += 1
        self.denials += denied
        if text:
            self.feedback_blocks += text.count("<feedback ")
        self.clock.advance(TICK_S)
        return elapsed


def make_workspace(root: Path) -> None:
    (root / "notes").mkdir(parents=True)
    for k in range(N_FILES):
        (root / "notes" / f"f{k:02d}.md").write_text(f"# File {k}\n\nSome text.\n")


def measure_once(size: int, batch: int, scratch: str | None) -> dict[str, Any]:
    """A fresh run built up to ``size`` calls, then ``batch`` calls timed one by one."""
    with tempfile.TemporaryDirectory(prefix="gr-bench-wink-", dir=scratch) as tmp:
        root = Path(tmp) / "ws"
        make_workspace(root)
        run = Run(root)
        with run.prompt.resources:
            for _ in range(size):
                run.call()
            blocks_before, denials_before = run.feedback_blocks, run.denials
            gc.collect()
            samples = [run.call() / 1000 for _ in range(batch)]
            stored = len(run.session[ToolInvoked].all())
    return {
        "samples_us": samples,
        "feedback_blocks": run.feedback_blocks - blocks_before,
        "denials": run.denials - denials_before,
        "history_stored": stored,
    }


def measure_all(
    sizes: list[int], batch: int, repeats: int, scratch: str | None
) -> dict[str, dict[str, Any]]:
    """``repeats`` rounds over every size, then each size's samples pooled."""
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            runs[size].append(measure_once(size, batch, scratch))
    return {str(size): summarize(rs) for size, rs in runs.items()}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {**pooled_summary(runs), "history_stored": runs[-1]["history_stored"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", required=True, help="comma-separated prior-call counts")
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--scratch", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    measure_once(10, 50, args.scratch)  # warm-up: imports, first-call caches
    out = {
        "weakincentives": version("weakincentives"),
        "python": platform.python_version(),
        "batch": args.batch,
        "repeats": args.repeats,
        "sizes": measure_all(sizes, args.batch, args.repeats, args.scratch),
    }
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
