"""What every bridge's session shares with a run of gr's loop: the agent's guardrails
rebound to the session's tools, the record of the run's start (the store's row, the events
that follow it there, ``run_started``), and the price of each model call the host made."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError
from gr_notebook.events import RunStartedEvent
from gr_notebook.harness import Harness
from gr_notebook.history.store import Store
from gr_notebook.messages import Usage
from gr_notebook.models.pricing import PriceTable
from gr_notebook.run import Run
from gr_notebook.tools.base import Tool
from gr_notebook.tools.toolset import Toolset

if TYPE_CHECKING:
    from gr_notebook.agent import Agent
    from gr_notebook.guardrails.policy import ToolPolicy

__all__ = ["Pricing", "agent_wide_policies", "record_start", "toolsets_on"]


def agent_wide_policies(agent: Agent) -> list[ToolPolicy]:
    """The agent's own policies (not a toolset's), in declaration order: those that govern a
    tool no toolset holds, such as the built-in todo tools."""
    toolsets = [t for t in agent.user_tools if isinstance(t, Toolset)]
    scoped = {t.name for toolset in toolsets for t in toolset.tools}
    free = next((t.name for t in agent.registry if t.name not in scoped), None)
    return [b.policy for b in agent.guardrails.by_tool.get(free or "", ())]


def toolsets_on(agent: Agent, tool: Callable[[str], Tool]) -> list[Toolset]:
    """The agent's toolsets with the session's tools under their tools' names (``tool``
    gives the one for a name), so each toolset's policies bind to them."""
    return [
        replace(toolset, tools=tuple(tool(t.name) for t in toolset.tools))
        for toolset in agent.user_tools
        if isinstance(toolset, Toolset)
    ]


def record_start(
    agent: Agent, state: RunState, run: Run, *, model: str, harness: Harness, **config: Any
) -> Store | None:
    """The run starts in the record: the store's row (when the agent has a store), the
    run's events to the store from now on, and ``run_started``. Returns the store."""
    root = state.workspace.root
    recorded = {**agent.config(), "model": model, "harness": harness.name, **config}
    recorded.update(state.guards.spec.describe(), self_regulation=False)
    store = agent.open_store()
    if store is not None:
        store.record_run_started(
            run.run_id,
            started_at=agent.clock(),
            model=model,
            workspace=str(root),
            instructions=run.instructions,
            config=recorded,
        )
        state.events.subscribe(lambda event: store.record_event(run.run_id, event))
    state.emit(
        RunStartedEvent(
            run_id=run.run_id,
            model=model,
            workspace=str(root),
            instructions=run.instructions[:400],
            config=recorded,
        )
    )
    return store


@dataclass
class Pricing:
    """What a session's model calls cost: at the agent's ``price=`` when it has one, else
    from the price table. A cost limit cannot count a model with no price, so a capped
    session refuses one, as gr's loop refuses to build such an agent: :meth:`refuse` before
    the session where its model is known, :meth:`cost` at the first reply naming one."""

    agent: Agent
    table: PriceTable = field(default_factory=PriceTable)

    def refuse(self, model: str) -> None:
        """A ConfigError when the agent has a cost limit and nothing prices ``model``."""
        cap = self.agent.budget.max_cost_usd
        if cap is None or self.agent.price is not None or self.table.price_of(model):
            return
        raise ConfigError(
            f"budget=gr.Budget(max_cost_usd={cap!r}) counts what each model call costs, and "
            f"the model {model!r} has no price: pass price=gr.Price(input, output, "
            "cache_write, cache_read) (USD per million tokens, e.g. gr.Price.standard(3.0, "
            "15.0)) to gr.Agent(...)"
        )

    def cost(self, model: str, usage: Usage) -> float | None:
        """The call's cost; None when nothing prices it and nothing caps the cost. Under a
        cost limit, an unpriced model is the ConfigError of :meth:`refuse`."""
        if self.agent.price is not None:
            return self.agent.price.cost(usage)
        cost = self.table.cost(model, usage)
        if not math.isnan(cost):
            return cost
        self.refuse(model)
        return None
