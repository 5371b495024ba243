"""Stuck detection (seed 000): when the todo list stops moving, force a progress check.

The loop asks its detector once per turn; a detector is any callable with this signature,
so a notebook can try its own rule without touching the loop. A detector that keeps state
may offer ``to_json()`` and ``load_json(data)``, so the run state's snapshot includes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gr_notebook.workflow.prompts import progress_check_prompt
from gr_notebook.workflow.todos import TodoList

__all__ = ["SameStateDetector", "StuckDetector"]


class StuckDetector(Protocol):
    """Decides, once per turn, whether to force a progress check; returns the prompt or None."""

    def __call__(self, turn: int, todos: TodoList) -> str | None: ...


@dataclass
class SameStateDetector:
    """Stuck detection: the todo list unchanged for ``turns`` turns forces a progress check."""

    turns: int = 10
    _last: tuple[Any, ...] | None = field(default=None, init=False)
    _same: int = field(default=0, init=False)

    def __call__(self, turn: int, todos: TodoList) -> str | None:
        signature = (todos.kind, todos.phase_number, tuple(i.done for i in todos.items))
        self._same = self._same + 1 if signature == self._last else 0
        self._last = signature
        if self._same >= self.turns:
            self._same = 0
            return progress_check_prompt(self.turns, waiting_for_todos=not todos.items)
        return None

    def to_json(self) -> dict[str, Any]:
        last = self._last
        return {"last": [last[0], last[1], list(last[2])] if last else None, "same": self._same}

    def load_json(self, data: Mapping[str, Any]) -> None:
        last = data["last"]
        self._last = (
            None if last is None else (str(last[0]), int(last[1]), tuple(map(bool, last[2])))
        )
        self._same = int(data["same"])
