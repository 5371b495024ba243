"""The workflow of seeds 000/001: the workspace, the todo list, the plan, and the phases.

The todo list is protected; the phases move between plan and todos; ``prompts`` holds the
words the system says at each step.

Nothing here calls a model: the engine drives these objects turn by turn.
"""

from gr_notebook.workflow.phases import JobResult
from gr_notebook.workflow.plan import Phase, Plan, Step
from gr_notebook.workflow.stuck import SameStateDetector, StuckDetector
from gr_notebook.workflow.todos import TodoItem, TodoList
from gr_notebook.workflow.workspace import Workspace

__all__ = [
    "JobResult",
    "Phase",
    "Plan",
    "SameStateDetector",
    "Step",
    "StuckDetector",
    "TodoItem",
    "TodoList",
    "Workspace",
]
