"""Runtime 5: LangChain v1's ``create_agent`` with the agent's guardrails as middleware
(``guardrail_middleware``), a fake chat model that calls tools, and LangChain tools that
count their runs (run by LangChain's own tool node, not by gr)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.integrations.langchain import guardrail_middleware
from tests.enforcement.counting import LOCAL_TOOLS, Counter
from tests.enforcement.driver import KnownGap, NotApplicable, Played, decisions_of
from tests.enforcement.gr_loop import responses, text_of
from tests.enforcement.scenarios import Scenario, policy_for
from tests.integrations.langchain_kit import ToolModel, tool_model

THREAD = {"configurable": {"thread_id": "enforcement"}}


class LangChainDriver:
    key = "langchain"
    name = "LangChain create_agent"

    def limit(self, scenario: Scenario) -> NotApplicable | KnownGap | None:
        if scenario.delegated:
            return NotApplicable("create_agent has no subagents of its own")
        if scenario.mcp:
            return NotApplicable(
                "the middleware does not connect an agent's MCP servers (LangChain's MCP tools "
                "come from langchain-mcp-adapters, not a dependency here)"
            )
        return None

    async def play(self, scenario: Scenario, root: Path) -> Played:
        from langgraph.checkpoint.memory import InMemorySaver

        counter = Counter(root / "counts")
        (root / "ws").mkdir(parents=True, exist_ok=True)
        saver = InMemorySaver() if scenario.resumed else None
        first = await self._session(scenario, root, counter, responses(scenario.turns), saver)
        sessions = [first]
        if scenario.resumed:
            # the thread, continued from its checkpoint by a new invoke, under fresh middleware
            again = await self._session(scenario, root, counter, responses(scenario.resumed), saver)
            earlier = {c.id for turn in scenario.turns for c in turn}
            assert earlier <= set(_results_seen(again[1], first=True)), "the thread restarted"
            sessions.append(again)
        told: dict[str, str] = {}
        for _, model in sessions:
            told.update(_results_seen(model))
        runs = [mw.run for mw, _ in sessions]
        return Played(counter.all_runs(dict.fromkeys(scenario.tools)), told, decisions_of(*runs))

    async def _session(
        self,
        scenario: Scenario,
        root: Path,
        counter: Counter,
        script: Sequence[gr.models.ModelResponse],
        saver: Any,
    ) -> tuple[Any, ToolModel]:
        from langchain.agents import create_agent

        agent = gr.Agent(
            gr.ScriptedModel([]),
            workspace=root / "ws",
            policies=[policy_for(scenario)],
            store=False,
            self_regulation=False,
            interventions=None,
        )
        middleware = guardrail_middleware(agent, cwd=root / "ws", gr_tools=False)
        model = tool_model(script)
        app = create_agent(
            model, tools=langchain_tools(counter), middleware=[middleware], checkpointer=saver
        )
        prompt: Any = {"messages": [{"role": "user", "content": "Do the job."}]}
        config: Any = THREAD if saver is not None else None
        await app.ainvoke(prompt, config=config)
        assert middleware.run.status == "ended", (middleware.run.status, middleware.run.reason)
        return middleware, model


def langchain_tools(counter: Counter) -> list[Any]:
    """The local tools as LangChain tools; each execution counts."""
    from langchain_core.tools import StructuredTool

    def make(name: str, description: str) -> Any:
        def run(key: str) -> str:
            return counter.record(name, {"key": key})

        return StructuredTool.from_function(run, name=name, description=description)

    return [make(name, description) for name, description in LOCAL_TOOLS.items()]


def _results_seen(model: ToolModel, *, first: bool = False) -> Mapping[str, str]:
    """The tool results the model read, by call id (in its ``first`` request only)."""
    from langchain_core.messages import ToolMessage

    found: dict[str, str] = {}
    for messages in model.seen[:1] if first else model.seen:
        for message in messages:
            if isinstance(message, ToolMessage):
                found[message.tool_call_id] = text_of(message.content)
    return found


DRIVER = LangChainDriver()
