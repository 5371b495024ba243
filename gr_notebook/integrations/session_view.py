"""The run as a bridge session's guardrails read it: a
:class:`~gr_notebook.guardrails.view.RunView` over the session's run state. Each bridge
adds what its harness changes (Claude's tool names in the record, a LangChain session's
wrap-up order)."""

from __future__ import annotations

from collections.abc import Callable

from gr_notebook.engine.state import RunState
from gr_notebook.events import Event
from gr_notebook.guardrails.budget import BudgetUsage
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList
from gr_notebook.workflow.workspace import Workspace

__all__ = ["StateView"]


class StateView:
    """The run state, as the guardrails read it."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def workspace(self) -> Workspace:
        return self.state.workspace

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @property
    def todos(self) -> TodoList:
        return self.state.todos

    @property
    def plan_file(self) -> str:
        return self.state.plan_file

    @property
    def wrap_up(self) -> str | None:
        return self.state.wrap_up

    def usage(self) -> BudgetUsage:
        return self.state.usage()

    def plan(self) -> Plan | None:
        return self.state.plan()

    def phase_ahead(self) -> tuple[int, str]:
        return self.state.phase_ahead()

    def emit(self, event: Event) -> None:
        self.state.emit(event)
