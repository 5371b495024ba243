"""gr's own loop, whatever model drives it: the shared half of the first three drivers.

A backend turns the scenario's script into a model and, afterwards, tells what the model
read: each driver module gives one (the scripted model, the Anthropic adapter against the
local Messages API server, the OpenAI adapter against the local chat-completions server).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import gr_notebook as gr
from gr_notebook.messages import ToolUseBlock
from gr_notebook.models import Model, ModelResponse
from tests.enforcement.counting import MCP_SERVER, Counter, gr_tools
from tests.enforcement.driver import KnownGap, NotApplicable, Played, decisions_of
from tests.enforcement.scenarios import Scenario, Turn, policy_for

MCP_SCRIPT = Path(__file__).with_name("mcp_counter.py")

FINAL = "Done: the records are read, and nothing was destroyed."


class Backend(Protocol):
    """A model over a script, and what the model read once the run is over."""

    def model(self, script: Sequence[ModelResponse]) -> AbstractContextManager[Model]: ...

    def told(self) -> Mapping[str, str]:
        """Each tool result the model read, by its call's id (the latest reading)."""
        ...


def responses(turns: Sequence[Turn], *, final: bool = True) -> list[ModelResponse]:
    """The model's turns as responses with the scenario's own call ids, then its answer."""
    script = [
        ModelResponse(tuple(ToolUseBlock(c.id, c.tool, c.input) for c in turn), "tool_use")
        for turn in turns
    ]
    return [*script, gr.text(FINAL)] if final else script


class GrLoopDriver:
    """Plays a scenario on gr's loop with the model of ``backend_of()``."""

    def __init__(self, key: str, name: str, backend_of: Callable[[], Backend]) -> None:
        self.key, self.name = key, name
        self._backend_of = backend_of

    def limit(self, scenario: Scenario) -> NotApplicable | KnownGap | None:
        if scenario.delegated:
            return NotApplicable("gr's loop has no subagents")
        return None

    async def play(self, scenario: Scenario, root: Path) -> Played:
        counter = Counter(root / "counts")
        told: dict[str, str] = {}
        path = root / "store.sqlite"
        store = path if scenario.resumed else False
        runs: list[gr.Run] = []
        # a resumed scenario: the first session's model fails after its turns (a resumable
        # end, as a dead connection would be), and a new agent resumes the run
        backend = self._backend_of()
        with backend.model(responses(scenario.turns, final=not scenario.resumed)) as model:
            first = await self._agent(scenario, model, root, counter, store).run("Do the job.")
        told.update(backend.told())
        runs.append(first)
        if scenario.resumed:
            assert first.status == "failed", (first.status, first.reason)
            backend = self._backend_of()
            with backend.model(responses(scenario.resumed)) as model:
                agent = self._agent(scenario, model, root, counter, store)
                # live on this loop (the adapters' clients belong to it), then awaited
                resumed = await gr.resume(first.run_id, agent=agent, wait=False, store=path).wait()
            told.update(backend.told())
            assert resumed.status == "ended", (resumed.status, resumed.reason)
            assert any(e.kind == "run_resumed" for e in resumed.events)
            runs.append(resumed)
        else:
            assert first.status == "ended", (first.status, first.reason)
        # a resumed run's record starts with its parent's events: it holds every decision
        return Played(counter.all_runs(dict.fromkeys(scenario.tools)), told, decisions_of(runs[-1]))

    def _agent(
        self, scenario: Scenario, model: Model, root: Path, counter: Counter, store: Any
    ) -> gr.Agent:
        fields: dict[str, Any] = {}
        if scenario.mcp:
            server = gr.MCPServer(
                MCP_SERVER, command=sys.executable, args=[str(MCP_SCRIPT), str(counter.root)]
            )
            fields["mcp_servers"] = [server]
        return gr.Agent(
            model,
            workspace=root / "ws",
            tools=gr_tools(counter),
            policies=[policy_for(scenario)],
            store=store,
            self_regulation=False,
            interventions=None,
            **fields,
        )


def results_in_messages(messages: Iterator[Mapping[str, Any]]) -> dict[str, str]:
    """Tool results in Messages API request bodies' messages, by tool use id."""
    found: dict[str, str] = {}
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                found[str(block["tool_use_id"])] = text_of(block.get("content"))
    return found


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(part) for part in content)
    if isinstance(content, Mapping):
        return str(content.get("text", ""))
    return str(content)
