"""Tools the model can call, what a tool returns, and the built-in toolsets (the coding one too)."""

from __future__ import annotations

from gr_notebook.tools.base import EFFECTS, Effect, Probe, Tool, ToolContext, ToolOutput
from gr_notebook.tools.coding_tools import CodeTest, CodingTask, coding_tools
from gr_notebook.tools.effects import (
    CompactContext,
    CompleteJob,
    PruneConversation,
    ResetPolicies,
    Rewound,
    ToolEffect,
)
from gr_notebook.tools.job_tools import JOB_TOOLS
from gr_notebook.tools.registry import ToolRegistry
from gr_notebook.tools.todo_tools import TODO_TOOLS
from gr_notebook.tools.toolset import Toolset, flatten_tools
from gr_notebook.tools.workspace_tools import WORKSPACE_TOOLS

__all__ = [
    "CORE_TOOLS",
    "EFFECTS",
    "CodeTest",
    "CodingTask",
    "CompactContext",
    "CompleteJob",
    "Effect",
    "Probe",
    "PruneConversation",
    "ResetPolicies",
    "Rewound",
    "Tool",
    "ToolContext",
    "ToolEffect",
    "ToolOutput",
    "ToolRegistry",
    "Toolset",
    "coding_tools",
    "flatten_tools",
]

CORE_TOOLS: tuple[Tool, ...] = (*TODO_TOOLS, *WORKSPACE_TOOLS, *JOB_TOOLS)
