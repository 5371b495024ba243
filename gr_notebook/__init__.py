"""gr_notebook: guardrails that keep LLM agents on track during long tasks.

The core is plain Python: ``import gr_notebook`` pulls in neither IPython, ipywidgets,
pandas nor anthropic. The notebook face loads with ``%load_ext gr_notebook``.
"""

from __future__ import annotations

from gr_notebook.agent import Agent
from gr_notebook.analysis import runs_df
from gr_notebook.errors import (
    GrNotebookError,
    ModelError,
    ModelSpecError,
    PlanError,
    RunError,
    ScriptExhausted,
    StoreError,
    TodoError,
    ToolError,
    WorkspaceError,
)
from gr_notebook.events import Event, EventLog
from gr_notebook.loop import SameStateDetector, StuckDetector
from gr_notebook.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from gr_notebook.models import (
    FunctionModel,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    text,
    tool_call,
    tool_calls,
)
from gr_notebook.models.simulated import SimulatedModel
from gr_notebook.phases import JobResult
from gr_notebook.plan import Phase, Plan, Step
from gr_notebook.run import Run
from gr_notebook.store import Store
from gr_notebook.todos import TodoItem, TodoList
from gr_notebook.tools import Tool, ToolContext, ToolOutput, Toolset
from gr_notebook.workspace import Workspace

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Event",
    "EventLog",
    "FunctionModel",
    "GrNotebookError",
    "JobResult",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSpecError",
    "Phase",
    "Plan",
    "PlanError",
    "Run",
    "RunError",
    "SameStateDetector",
    "ScriptExhausted",
    "ScriptedModel",
    "SimulatedModel",
    "Step",
    "Store",
    "StoreError",
    "StuckDetector",
    "TextBlock",
    "TodoError",
    "TodoItem",
    "TodoList",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolResultBlock",
    "ToolUseBlock",
    "Toolset",
    "Usage",
    "Workspace",
    "WorkspaceError",
    "runs_df",
    "text",
    "tool_call",
    "tool_calls",
]
