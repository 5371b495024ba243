"""``AgentDefinition``: what an agent fixes for every run, as one frozen value.

:class:`gr_notebook.Agent` is the builder people use; it validates its arguments and makes
one of these per run. The loop and the run state take it, so the engine never depends on the
``Agent`` class above it, and two runs of one agent share nothing but this value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gr_notebook.guardrails.budget import Budget
from gr_notebook.guardrails.interventions import InterventionConfig
from gr_notebook.guardrails.regulation import ConfirmerLike, RegulationSettings
from gr_notebook.guardrails.shadow import ShadowSpec
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.models.base import Model
from gr_notebook.models.pricing import Price
from gr_notebook.tools.mcp import MCPServer
from gr_notebook.tools.registry import ToolRegistry
from gr_notebook.workflow.stuck import SameStateDetector, StuckDetector

__all__ = ["AgentDefinition"]


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """The model, the tools, the prompt and the rules a run works under."""

    model: Model
    registry: ToolRegistry
    system_prompt: str
    """The whole layer 1, as the model reads it."""
    plan_file: str = "main_plan.md"
    budget: Budget = field(default_factory=Budget)
    compaction: bool = True
    guardrails: GuardrailSpec = field(default_factory=GuardrailSpec)
    interventions: InterventionConfig | None = None
    regulation: RegulationSettings | None = None
    stuck_detector: StuckDetector | None = None
    """A person's detector, used as it is; without one, ``stuck_turns`` makes one per run."""
    stuck_turns: int | None = 10
    name: str = "agent"
    confirm: ConfirmerLike | None = None
    """Answers a tool call a policy asks about when no dashboard attends the run."""
    shadow: ShadowSpec | None = None
    """Guardrails that decide and are recorded, and that nothing obeys."""
    price: Price | None = None
    """The agent's ``price=``: every call is priced at it, whatever the model says."""
    mcp_servers: tuple[MCPServer, ...] = ()
    """The MCP servers the run connects to when it starts; their tools join ``registry``."""

    def new_stuck_detector(self) -> StuckDetector | None:
        if self.stuck_detector is not None:
            return self.stuck_detector
        return SameStateDetector(self.stuck_turns) if self.stuck_turns else None
