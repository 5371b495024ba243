"""The errors gr_notebook raises, under one base so callers can catch them all.

    GrNotebookError
    ├── WorkspaceError      a path escapes the workspace, or a file cannot be read or written
    ├── PlanError           a plan file cannot be used as a plan
    ├── TodoError           a todo list is corrupt or cannot do what was asked
    ├── ToolError           a tool call failed; the loop turns it into an is_error tool_result
    ├── ModelError          a model call failed; the run ends as "failed"
    │   ├── ScriptExhausted a ScriptedModel has no responses left
    │   ├── ModelSpecError  a model spec string names no known model or profile
    │   ├── NetworkDisabled a request would leave this machine while the guard is on
    │   └── RequestOverBudget a model that checks the budget itself refused a request;
    │                       the run ends "budget_exhausted" (the loop checks counted ones)
    ├── StoreError          the run store cannot be opened or written
    ├── ConfigError         an Agent, Tool or Toolset was defined in a way that cannot work
    ├── MCPServerError      an MCP server could not start when the run did; the run fails
    └── RunError            a Run was used the wrong way (e.g. waited on before it started)

Each message says what to do instead. Errors inside a run never escape as crashes: tool
failures become tool results the model can act on, and model failures end the run as
``failed`` with the reason recorded.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "GrNotebookError",
    "MCPServerError",
    "ModelError",
    "ModelSpecError",
    "NetworkDisabled",
    "PlanError",
    "RequestOverBudget",
    "RunError",
    "ScriptExhausted",
    "StoreError",
    "TodoError",
    "ToolError",
    "WorkspaceError",
]


class GrNotebookError(Exception):
    """Base of every error gr_notebook raises."""


class WorkspaceError(GrNotebookError):
    """A path escapes the workspace, or a workspace file cannot be read or written."""


class PlanError(GrNotebookError):
    """A plan file cannot be used as a plan."""


class TodoError(GrNotebookError):
    """A todo list is corrupt, or cannot do what was asked of it."""


class ToolError(GrNotebookError):
    """A tool call failed in a way the model can correct; becomes an is_error result."""


class ModelError(GrNotebookError):
    """A model call failed; the run ends as ``failed``."""


class ScriptExhausted(ModelError):
    """A ScriptedModel was asked for more responses than it was given."""


class ModelSpecError(ModelError, ValueError):
    """A model spec string names no known model or profile."""


class NetworkDisabled(ModelError):
    """A request would leave this machine while the network guard is on."""


class RequestOverBudget(ModelError):
    """A request, counted before sending, would go over the run's token limit.

    The loop makes this check itself for a model that can count its tokens; a model that
    checks on its own raises this, and the run ends ``budget_exhausted`` the same way."""

    def __init__(self, message: str, *, needed: int, remaining: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.remaining = remaining


class StoreError(GrNotebookError):
    """The run store cannot be opened or written."""


class ConfigError(GrNotebookError, ValueError):
    """An Agent, Tool or Toolset was defined in a way that cannot work."""


class MCPServerError(GrNotebookError):
    """An MCP server could not start, or did not answer, when the run started."""


class RunError(GrNotebookError):
    """A Run or Agent was used the wrong way."""
