"""``RunView``: the run as the guardrails read it, one object instead of a bundle of callables.

The run state (:class:`gr_notebook.engine.state.RunState`) implements it; the guardrails,
the feedback runner and self-regulation take it, and build from it the narrow, typed views
their extensions see (:class:`~gr_notebook.guardrails.policy.PolicyContext`,
:class:`~gr_notebook.guardrails.feedback.FeedbackContext`,
:class:`~gr_notebook.guardrails.completion.TaskCompletionContext`). A test, or a script that
drives guardrails without a loop, implements it with a few attributes.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gr_notebook.events import ErrorEvent

if TYPE_CHECKING:
    from gr_notebook.events import Event
    from gr_notebook.guardrails.budget import BudgetUsage
    from gr_notebook.workflow.plan import Plan
    from gr_notebook.workflow.todos import TodoList
    from gr_notebook.workflow.workspace import Workspace

__all__ = ["TRACEBACK_LINES", "RelayView", "RunView", "failure", "traceback_lines"]

TRACEBACK_LINES = 40
"""How much of an extension's traceback its event keeps (each line clipped as event text)."""


class RunView(Protocol):
    """What a run's guardrails may read of it; every member is O(1) or cached."""

    @property
    def run_id(self) -> str: ...

    @property
    def name(self) -> str:
        """The agent's name (the ``prompt_name`` feedback is stamped with)."""
        ...

    @property
    def workspace(self) -> Workspace: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def todos(self) -> TodoList: ...

    @property
    def plan_file(self) -> str:
        """The plan's file in the workspace (``main_plan.md`` unless the agent names one)."""
        ...

    @property
    def wrap_up(self) -> str | None:
        """Why the run was told to wrap up, once it was; from then on no stop is refused."""
        ...

    def emit(self, event: Event) -> None: ...

    def usage(self) -> BudgetUsage: ...

    def plan(self) -> Plan | None: ...

    def phase_ahead(self) -> tuple[int, str]:
        """The phase an assessment made now covers, and its label."""
        ...


class RelayView:
    """A :class:`RunView` over another, passing everything through: a subclass changes what
    is recorded on the way (a shadow's ``mode``, a bridge's host names) by overriding
    :meth:`emit`."""

    def __init__(self, run: RunView) -> None:
        self.run = run

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy and pickle ask for hooks this object has not
            raise AttributeError(name)
        return getattr(self.run, name)

    def emit(self, event: Event) -> None:
        self.run.emit(event)


def failure(source: str, exc: Exception, **culprit: Any) -> ErrorEvent:
    """The ``error`` event of an extension that raised (a policy, a feedback provider, a
    checker), recorded instead of breaking the run, with its traceback; ``culprit`` names it
    (``policy=``, ``tool=``, ``provider=``: the event's own fields)."""
    return ErrorEvent(
        source=source,
        error_type=type(exc).__name__,
        message=str(exc),
        traceback=traceback_lines(exc),
        **culprit,
    )


def traceback_lines(exc: BaseException) -> tuple[str, ...]:
    """The last :data:`TRACEBACK_LINES` lines of ``exc``'s traceback: the frames nearest
    the error, and the error."""
    lines = "".join(traceback.format_exception(exc)).splitlines()
    return tuple(lines[-TRACEBACK_LINES:])
