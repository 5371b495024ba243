"""``ReplayView``: a recorded run as the guardrails read it, moment by moment, for a replay.

It implements :class:`~gr_notebook.guardrails.view.RunView`, so the real
:class:`~gr_notebook.guardrails.runtime.Guardrails` decide in a replay exactly as they do
live. The replay moves it along the record: the clock reads the recorded event's time,
usage is the running totals of the model calls, the todo list and the plan come from the
checkpoints and the todo events, and what the guardrails emit is collected, not recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gr_notebook.errors import GrNotebookError
from gr_notebook.guardrails.budget import Budget, BudgetUsage
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList

if TYPE_CHECKING:
    from gr_notebook.events import Event
    from gr_notebook.workflow.workspace import Workspace

__all__ = ["ReplayView"]


class ReplayView:
    """The :class:`RunView` of a replay; the replay sets ``now``, ``tokens``,
    ``iterations``, ``todos`` and ``wrap_up`` as it walks the record."""

    def __init__(
        self,
        *,
        run_id: str,
        name: str,
        workspace: Workspace,
        budget: Budget,
        plan_file: str,
        started_at: float,
    ) -> None:
        self.run_id = run_id
        self.name = name
        self.workspace = workspace
        self.budget = budget
        self.plan_file = plan_file
        self.started_at = started_at
        self.now = started_at
        self.tokens = 0
        self.iterations = 0
        self.todos = TodoList()
        self.wrap_up: str | None = None
        self.emitted: list[Event] = []

    @property
    def clock(self) -> Callable[[], float]:
        return self._now

    def _now(self) -> float:
        return self.now

    def emit(self, event: Event) -> None:
        self.emitted.append(event)

    def take(self) -> list[Event]:
        """What the guardrails emitted since the last call."""
        taken, self.emitted = self.emitted, []
        return taken

    def usage(self) -> BudgetUsage:
        return self.budget.usage(
            tokens=self.tokens, iterations=self.iterations, elapsed_s=self.now - self.started_at
        )

    def plan(self) -> Plan | None:
        try:
            if not self.workspace.exists(self.plan_file):
                return None
            return Plan.parse(self.workspace.read_text(self.plan_file))
        except (GrNotebookError, OSError, ValueError):
            return None

    def phase_ahead(self) -> tuple[int, str]:
        return self.todos.phase_number, self.todos.phase_label()
