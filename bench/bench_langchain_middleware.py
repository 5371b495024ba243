"""The LangChain middleware: its cost per tool call, next to gr's native guardrails.

1. Hook overhead. One agent's guardrails (a read-before-write policy, a sequential
   dependency ``edit_file`` needs ``read_file``, a static feedback provider every 50 calls,
   a file trigger on ``DONE.md`` that never fires, and the default intervention engine) judge
   the call pattern read f, write f, read g, edit g, ... over 20 files on ``/dev/shm``:
   - through the middleware: ``awrap_tool_call`` awaited as LangChain's tool node awaits it,
     around a handler that returns the tool's message at once (no tool runs, no model);
   - natively: the same guardrails at the same points of gr's tool step (``guards.check``,
     ``guards.after_success``, the ``tool_call`` event, the intervention engine,
     ``guards.after_call``), on a run state of the same agent.
   Each side is timed per call with ``perf_counter_ns`` at 100 and at 5,000 prior calls.
2. Whole sessions: ``create_agent`` with a fake chat model that makes 40 tool calls (gr's
   file tools, run by gr's handlers): alone, with middleware whose same hooks do nothing,
   and with the guardrail middleware; and gr's own loop on the same script and guardrails;
   the wall time per tool call of each.

Goals: the hooks are flat (median at 5,000 prior calls <= 1.5 x at 100); they cost at most
3 x the native guardrails at 100 prior calls; the middleware adds under 2 ms per tool call to
a LangChain session (a model call takes about a second) beyond what LangChain's graph costs
for the same hooks doing nothing (the side "LangChain + empty hooks").
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
from bench_sdk_hooks import guardrail_step
from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware, hook_config
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

import gr_notebook as gr
from gr_notebook.engine.state import RunState
from gr_notebook.integrations.langchain import guardrail_middleware
from gr_notebook.workflow.workspace import Workspace

FILES = 20
SIZES = (100, 5_000)
BATCH = 400
REPEATS = 3
SESSION_CALLS = 40
SESSIONS = 9


class EmptyMiddleware(AgentMiddleware[Any, Any, Any]):
    """The same hooks doing nothing: what LangChain's graph costs for them."""

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        return None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> None:
        return None

    @hook_config(can_jump_to=["model", "end"])
    async def aafter_model(self, state: Any, runtime: Any) -> None:
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        return None

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class ToolModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolModel:  # type: ignore[override]
        return self


def make_agent(ws: Path, model: Any = None) -> gr.Agent:
    return gr.Agent(
        model,
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


def pattern(n: int) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for i in range(n):
        f = f"f{(i // 2) % FILES}.txt"
        if i % 2 == 0:
            calls.append(("read_file", {"path": f}))
        elif i % 4 == 1:
            calls.append(("write_file", {"path": f, "content": "x\n"}))
        else:
            calls.append(("edit_file", {"path": f, "old_text": "x", "new_text": "x"}))
    return calls


Step = Callable[[str, dict[str, Any], int], Awaitable[None]]


async def middleware_step(ws: Path) -> Step:
    mw = guardrail_middleware(make_agent(ws), cwd=ws)
    mw.before_agent({"messages": [HumanMessage("bench")]}, None)  # type: ignore[arg-type]

    async def step(name: str, params: dict[str, Any], i: int) -> None:
        call_id = f"call_{i}"
        request = ToolCallRequest(
            tool_call={"name": name, "args": params, "id": call_id, "type": "tool_call"},
            tool=None,
            state={},
            runtime=None,  # type: ignore[arg-type]
        )

        async def handler(req: ToolCallRequest) -> ToolMessage:
            return ToolMessage("ok", tool_call_id=call_id, name=name)

        await mw.awrap_tool_call(request, handler)

    return step


async def native_step(ws: Path) -> Step:
    agent = make_agent(ws)
    state = RunState(agent.definition(), workspace=Workspace(ws), clock=agent.clock)
    tools = {t.name: t for t in agent.registry}

    async def step(name: str, params: dict[str, Any], i: int) -> None:
        tool = tools[name]
        guardrail_step(state, tool, params, f"call_{i}")

    return step


def seed(ws: Path) -> None:
    for k in range(FILES):
        (ws / f"f{k}.txt").write_text("x\n")


async def timed(make: Callable[[Path], Awaitable[Step]], prior: int) -> list[float]:
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
        ws = Path(tmp)
        seed(ws)
        step = await make(ws)
        calls = pattern(prior + BATCH)
        for i, (name, params) in enumerate(calls[:prior]):
            await step(name, params, i)
        samples = []
        gc.collect()
        for i, (name, params) in enumerate(calls[prior:], start=prior):
            started = time.perf_counter_ns()
            await step(name, params, i)
            samples.append((time.perf_counter_ns() - started) / 1000)
        return samples


def script() -> list[gr.ModelResponse]:
    return [gr.tool_call(name, **params) for name, params in pattern(SESSION_CALLS)] + [
        gr.text("Done.")
    ]


def replies() -> list[AIMessage]:
    out = [
        AIMessage("", tool_calls=[{"name": name, "args": params, "id": f"call_{i}"}])
        for i, (name, params) in enumerate(pattern(SESSION_CALLS))
    ]
    return [*out, AIMessage("Done.")]


async def session_wall(side: str) -> float:
    """Seconds per tool call of one whole session on ``side``."""
    with tempfile.TemporaryDirectory(dir=_util.SCRATCH) as tmp:
        ws = Path(tmp)
        seed(ws)
        prompt = {"messages": [HumanMessage("Edit the files.")]}
        if side == "gr's loop":
            agent = make_agent(ws, gr.ScriptedModel(script()))
            started = time.perf_counter()
            run = await agent.run("Edit the files.")
            wall = time.perf_counter() - started
            assert run.status == "ended", run.reason
            return wall / SESSION_CALLS
        mw = guardrail_middleware(make_agent(ws), cwd=ws)
        model = ToolModel(messages=iter(replies()))
        if side == "LangChain + middleware":
            app = create_agent(model, middleware=[mw])
        elif side == "LangChain + empty hooks":
            app = create_agent(model, tools=list(mw.tools), middleware=[EmptyMiddleware()])
        else:  # the same tools (gr's, run by gr's handlers), no guardrails
            app = create_agent(model, tools=list(mw.tools))
        started = time.perf_counter()
        out = await app.ainvoke(prompt, {"recursion_limit": 10_000})
        wall = time.perf_counter() - started
        assert len(out["messages"]) == 2 + 2 * SESSION_CALLS
        return wall / SESSION_CALLS


async def main() -> int:
    goals = _util.Goals()
    pooled: dict[tuple[str, int], list[float]] = {}
    for _ in range(REPEATS):
        for side, make in (("middleware", middleware_step), ("native", native_step)):
            for prior in SIZES:
                pooled.setdefault((side, prior), []).extend(await timed(make, prior))
    medians = {key: statistics.median(samples) for key, samples in pooled.items()}
    _util.section("Guardrail cost per tool call (µs), median over the pooled samples")
    _util.print_table(
        ["side", *(f"{n:,} prior calls" for n in SIZES)],
        [
            [side, *(f"{medians[(side, n)]:.1f}" for n in SIZES)]
            for side in ("middleware", "native")
        ],
    )
    sides = ("LangChain alone", "LangChain + empty hooks", "LangChain + middleware", "gr's loop")
    walls: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(SESSIONS):
        for side in sides:
            walls[side].append(await session_wall(side))
    per_call = {side: statistics.median(w) * 1e6 for side, w in walls.items()}
    _util.section(f"A whole session of {SESSION_CALLS} tool calls: wall time per tool call (µs)")
    base = per_call["LangChain alone"]
    _util.print_table(
        ["side", "median", "vs LangChain alone"],
        [[side, f"{per_call[side]:,.0f}", f"{per_call[side] / base:.2f} x"] for side in sides],
    )
    flat = medians[("middleware", SIZES[1])] / medians[("middleware", SIZES[0])]
    ratio = medians[("middleware", SIZES[0])] / medians[("native", SIZES[0])]
    added = per_call["LangChain + middleware"] - per_call["LangChain + empty hooks"]
    goals.check("the hooks are flat (5,000 vs 100 prior calls)", flat <= 1.5, f"{flat:.2f} x")
    goals.check("the hooks cost <= 3 x the native guardrails", ratio <= 3.0, f"{ratio:.2f} x")
    goals.check(
        "the guardrails add < 2 ms per tool call to LangChain's own cost of the same hooks",
        added < 2000,
        f"{added:,.0f} µs",
    )
    return goals.report()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
