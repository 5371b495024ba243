"""The Claude Agent SDK bridge: hook overhead per tool call, and one session's wall time.

1. Hook overhead. One agent's guardrails (a read-before-write policy, a sequential
   dependency ``edit_file`` needs ``read_file``, a static feedback provider every 50 calls,
   a file trigger on ``DONE.md`` that never fires, and the default intervention engine) judge
   the call pattern Read f, Write f, Read g, Edit g, ... over 20 files on ``/dev/shm``:
   - through the bridge: ``PreToolUse`` then ``PostToolUse``, awaited directly as the SDK
     awaits them (the hook inputs are what the CLI sends; no CLI, no model);
   - natively: the same guardrails through the guarded step gr's loop calls
     (:mod:`gr_notebook.engine.guarded_step`: its check, then what follows the call), on a
     run state of the same agent.
   Each side is timed per call with ``perf_counter_ns`` at 100 and at 5,000 prior calls.
2. Session wall time: a four-turn session (a denied write, a read, a write, a stop) through
   the real SDK and the Claude Code CLI against ``gr_notebook.testing.MessagesServer``, the
   cost of one test of ``tests/integrations``.

Goals: the hooks are flat (median at 5,000 prior calls <= 1.5 x at 100); they cost at most
3 x the native guardrails at 100 prior calls (the bridge translates names and paths and
builds the replies the SDK wants); a session takes under 5 s.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import _util

import gr_notebook as gr
from gr_notebook.engine.guarded_step import GuardedCall, GuardedStep, Refused
from gr_notebook.engine.state import RunState
from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks, local_env
from gr_notebook.testing import MessagesServer
from gr_notebook.tools.base import ToolOutput
from gr_notebook.workflow.workspace import Workspace

FILES = 20
SIZES = (100, 5_000)
BATCH = 400
REPEATS = 3
SESSIONS = 3


def make_agent(ws: Path) -> gr.Agent:
    return gr.Agent(
        workspace=ws,
        store=False,
        self_regulation=False,
        policies=[
            gr.ReadBeforeWritePolicy(),
            gr.SequentialDependencyPolicy({"edit_file": {"read_file"}}),
        ],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Keep the style guide."),
                gr.FeedbackTrigger(every_n_calls=50),
            ),
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Done file seen."),
                gr.FeedbackTrigger(on_file_created=gr.FileCreatedTrigger("DONE.md")),
            ),
        ],
    )


def pattern(ws: Path, n: int) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for i in range(n):
        f = str(ws / f"f{(i // 2) % FILES}.txt")
        if i % 2 == 0:
            calls.append(("Read", {"file_path": f}))
        elif i % 4 == 1:
            calls.append(("Write", {"file_path": f, "content": "x\n"}))
        else:
            calls.append(("Edit", {"file_path": f, "old_string": "x", "new_string": "x"}))
    return calls


Step = Callable[[str, dict[str, Any], int], Awaitable[None]]


async def bridge_step(ws: Path) -> Step:
    hooks = guardrail_hooks(make_agent(ws), cwd=ws, tools=["Read", "Write", "Edit"])
    callbacks = hooks._callbacks
    base = {"session_id": "bench", "transcript_path": "", "cwd": str(ws)}

    async def step(name: str, params: dict[str, Any], i: int) -> None:
        use_id = f"toolu_{i}"
        hook_input = {**base, "tool_name": name, "tool_input": params, "tool_use_id": use_id}
        reply = await callbacks.pre_tool_use(hook_input, use_id, {"signal": None})
        if reply.get("hookSpecificOutput", {}).get("permissionDecision") != "deny":
            response = {**hook_input, "tool_response": {"type": "text"}, "duration_ms": 1}
            await callbacks.post_tool_use(response, use_id, {"signal": None})

    return step


async def native_step(ws: Path) -> Step:
    agent = make_agent(ws)
    state = RunState(agent.definition(), workspace=Workspace(ws), clock=agent.clock)
    aliases = {"Read": "read_file", "Write": "write_file", "Edit": "edit_file"}
    tools = {t.name: t for t in agent.registry}

    async def step(name: str, params: dict[str, Any], i: int) -> None:
        tool = tools[aliases[name]]
        args = {"path": Path(params["file_path"]).name}
        guardrail_step(state, tool, args, f"toolu_{i}")

    return step


def guardrail_step(state: RunState, tool: Any, args: dict[str, Any], call_id: str) -> None:
    """gr's own guardrails at one tool call, without the tool: the guarded step every runtime
    calls (its check, then what follows the call), the baseline of each bridge's cost."""
    step = GuardedStep(state)
    call = GuardedCall(tool, args, call_id)
    verdict = step.check(call)
    refused = isinstance(verdict, Refused)
    output = verdict.output if isinstance(verdict, Refused) else ToolOutput("ok")
    if not refused:
        step.ran(call, output)
    step.after(call, output, duration_s=0.0)


async def timed(make: Callable[[Path], Awaitable[Step]], prior: int) -> list[float]:
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
        ws = Path(tmp)
        for k in range(FILES):
            (ws / f"f{k}.txt").write_text("x\n")
        step = await make(ws)
        calls = pattern(ws, prior + BATCH)
        for i, (name, params) in enumerate(calls[:prior]):
            await step(name, params, i)
        samples = []
        gc.collect()
        for i, (name, params) in enumerate(calls[prior:], start=prior):
            started = time.perf_counter_ns()
            await step(name, params, i)
            samples.append((time.perf_counter_ns() - started) / 1000)
        return samples


async def session_wall(tmp: Path) -> float:
    ws = tmp / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "data.md").write_text("old\n")
    agent = gr.Agent(workspace=ws, store=False, policies=[gr.ReadBeforeWritePolicy()])
    hooks = guardrail_hooks(agent, cwd=ws)
    path = str(ws / "data.md")
    script = [
        gr.tool_call("Write", file_path=path, content="new\n"),
        gr.tool_call("Read", file_path=path),
        gr.tool_call("Write", file_path=path, content="new\n"),
        gr.text("Done."),
    ]
    with MessagesServer(script) as server:
        started = time.perf_counter()
        async for _ in hooks.query(
            "Update data.md",
            permission_mode="acceptEdits",
            tools=["Read", "Write"],
            model="claude-sonnet-4-6",
            env=local_env(server.url, tmp / "config"),
        ):
            pass
        wall = time.perf_counter() - started
    assert hooks.run.status == "ended", hooks.run.reason  # no checker: the model just stopped
    return wall


async def main() -> int:
    goals = _util.Goals()
    pooled: dict[tuple[str, int], list[float]] = {}
    for _ in range(REPEATS):
        for side, make in (("bridge", bridge_step), ("native", native_step)):
            for prior in SIZES:
                pooled.setdefault((side, prior), []).extend(await timed(make, prior))
    medians = {key: statistics.median(samples) for key, samples in pooled.items()}
    _util.section("Guardrail cost per tool call (µs), median over the pooled samples")
    _util.print_table(
        ["side", *(f"{n:,} prior calls" for n in SIZES)],
        [[side, *(f"{medians[(side, n)]:.1f}" for n in SIZES)] for side in ("bridge", "native")],
    )
    walls = []
    for k in range(SESSIONS):
        with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
            walls.append(await session_wall(Path(tmp) / str(k)))
    _util.section("One SDK session on the local server (4 turns, the CLI included)")
    _util.print_table(
        ["session", "wall (s)"], [[str(k + 1), f"{w:.2f}"] for k, w in enumerate(walls)]
    )
    flat = medians[("bridge", SIZES[1])] / medians[("bridge", SIZES[0])]
    ratio = medians[("bridge", SIZES[0])] / medians[("native", SIZES[0])]
    goals.check("the hooks are flat (5,000 vs 100 prior calls)", flat <= 1.5, f"{flat:.2f} x")
    goals.check("the hooks cost <= 3 x the native guardrails", ratio <= 3.0, f"{ratio:.2f} x")
    wall = statistics.median(walls)
    goals.check("one session takes under 5 s", wall < 5.0, f"median {wall:.2f} s")
    return goals.report()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
