"""The run as a LangChain session's guardrails read it: the run state, with the wrap-up
order the middleware gave (gr's loop keeps it on its todo list, which a session lacks)."""

from __future__ import annotations

from gr_notebook.engine.state import RunState
from gr_notebook.integrations.session_view import StateView

__all__ = ["SessionView"]


class SessionView(StateView):
    """A :class:`StateView` that knows the session's wrap-up order."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self._wrap_up: str | None = None

    @property
    def wrap_up(self) -> str | None:
        """The wrap-up order, once given: a stop is then let through unchecked."""
        return self._wrap_up

    def order_wrap_up(self, order: str) -> None:
        self._wrap_up = order
