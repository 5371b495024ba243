"""The tactical layer: the current phase's todo list, its Layer-2 display, and its archive.

The list is a value (:class:`TodoList`); :class:`TodoBoard` keeps the run's current list
and writes it through to ``todos.json`` on every change, so a person can open the file and a
crashed kernel loses nothing. Completed or abandoned lists move to ``archive/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

from gr_notebook.errors import TodoError, WorkspaceError
from gr_notebook.eventdata import clip
from gr_notebook.reprs import to_html
from gr_notebook.workflow.workspace import Workspace

__all__ = ["TODOS_FILE", "TodoBoard", "TodoItem", "TodoKind", "TodoList"]

TODOS_FILE = "todos.json"
ARCHIVE_DIR = "archive"
WIDTH = 67
TITLE = "ACTIVE TODO LIST"

TodoKind: TypeAlias = Literal["bootstrap", "phase", "job_completion"]
_KINDS = ("bootstrap", "phase", "job_completion")


@dataclass(frozen=True, slots=True)
class TodoItem:
    title: str
    done: bool = False


@dataclass(frozen=True, slots=True)
class TodoList:
    """A phase's tasks together with where the phase sits in the plan."""

    items: tuple[TodoItem, ...] = ()
    phase_number: int = 0
    phase_total: int = 0
    phase_name: str = ""
    kind: TodoKind = "phase"
    instruction: str | None = field(default=None, compare=False)
    """Overrides the INSTRUCTION line, e.g. while a phase transition is under way."""

    @classmethod
    def of(cls, titles: Iterable[str | TodoItem], **meta: Any) -> TodoList:
        items = tuple(t if isinstance(t, TodoItem) else TodoItem(t) for t in titles)
        return cls(items=items, **meta)

    @property
    def done_count(self) -> int:
        return sum(item.done for item in self.items)

    @property
    def remaining(self) -> int:
        return len(self.items) - self.done_count

    @property
    def current_index(self) -> int | None:
        """Zero-based index of the first incomplete task, or None when all are done."""
        return next((i for i, item in enumerate(self.items) if not item.done), None)

    @property
    def current(self) -> TodoItem | None:
        index = self.current_index
        return None if index is None else self.items[index]

    @property
    def is_finished(self) -> bool:
        return bool(self.items) and self.current_index is None

    def complete_next(self) -> tuple[TodoList, int]:
        """Mark the first incomplete task done; returns the new list and its 1-based number."""
        index = self.current_index
        if not self.items:
            raise TodoError(
                "the todo list is empty; write tasks with todo_write(todos=[...]) first"
            )
        if index is None:
            if self.kind == "job_completion":
                raise TodoError(
                    "every task is already complete; finish the job with "
                    "job_complete(summary=..., confidence=...)"
                )
            raise TodoError(
                "every task is already complete; write the next tasks with todo_write(todos=[...])"
            )
        items = list(self.items)
        items[index] = replace(items[index], done=True)
        return replace(self, items=tuple(items)), index + 1

    def phase_label(self) -> str:
        name = self.phase_name or ("Bootstrap" if self.kind == "bootstrap" else "Unnamed phase")
        if self.kind == "phase" and 1 <= self.phase_number <= self.phase_total:
            return f"{name} ({self.phase_number} of {self.phase_total})"
        return name

    def render(self) -> str:
        """The Layer-2 display, exactly in the seed's format."""
        rule, thin = "═" * WIDTH, "─" * WIDTH
        lines = [rule, " " * ((WIDTH - len(TITLE)) // 2) + TITLE, rule, ""]
        lines += [f"Phase: {self.phase_label()}", ""]
        current = self.current_index
        for i, item in enumerate(self.items):
            mark = "← CURRENT" if i == current else ""
            text = f"[{'x' if item.done else ' '}] {i + 1}. {item.title}"
            lines.append(f"{text}      {mark}" if mark else text)
        if not self.items:
            lines.append("(no tasks)")
        lines += ["", f"Progress: {self.done_count}/{len(self.items)} tasks complete", ""]
        lines += [thin, f"INSTRUCTION: {self.next_instruction()}", rule]
        return "\n".join(lines)

    def next_instruction(self) -> str:
        """What the display tells the model to do next."""
        if self.instruction:
            return self.instruction
        if not self.items:
            return "Write the todo list with todo_write(todos=[...])"
        current = self.current_index
        if current is None:
            return "All tasks complete."
        return f"Complete task {current + 1}, then call todo_complete()"

    # -- persistence ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "kind": self.kind,
            "phase": {
                "number": self.phase_number,
                "total": self.phase_total,
                "name": self.phase_name,
            },
            "items": [{"title": item.title, "done": item.done} for item in self.items],
        }

    @classmethod
    def from_json(cls, data: object, *, source: str = TODOS_FILE) -> TodoList:
        """Rebuild a list, or raise :class:`TodoError` saying exactly what is wrong."""
        if not isinstance(data, Mapping):
            raise TodoError(f"{source}: expected a JSON object, got {type(data).__name__}")
        items = data.get("items")
        if not isinstance(items, list):
            raise TodoError(f"{source}: 'items' must be a list of {{title, done}} objects")
        parsed = []
        for i, raw in enumerate(items):
            if isinstance(raw, str):
                raw = {"title": raw}
            if not (isinstance(raw, Mapping) and isinstance(raw.get("title"), str)):
                raise TodoError(f"{source}: items[{i}] needs a string 'title'")
            parsed.append(TodoItem(raw["title"], bool(raw.get("done", False))))
        phase = data.get("phase") or {}
        kind = data.get("kind", "phase")
        if not isinstance(phase, Mapping) or kind not in _KINDS:
            raise TodoError(f"{source}: 'phase' must be an object and 'kind' one of {_KINDS}")
        try:
            return cls(
                items=tuple(parsed),
                phase_number=int(phase.get("number", 0)),
                phase_total=int(phase.get("total", 0)),
                phase_name=str(phase.get("name", "")),
                kind=kind,
            )
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(1e400)
            raise TodoError(
                f"{source}: phase number and total must be integers ({clip(str(exc), 80)})"
            ) from None

    @classmethod
    def loads(cls, text: str, *, source: str = TODOS_FILE) -> TodoList:
        """Parse ``todos.json`` text; any hostile content becomes a :class:`TodoError`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TodoError(
                f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                "fix the file or delete it"
            ) from None
        except (ValueError, RecursionError) as exc:  # a 4,300+ digit number; deep nesting
            reason = (
                "it nests too deeply" if isinstance(exc, RecursionError) else clip(str(exc), 80)
            )
            raise TodoError(
                f"{source} cannot be read as a todo list ({reason}); fix the file or delete it"
            ) from None
        return cls.from_json(data, source=source)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"<TodoList {self.phase_label()!r}: {self.done_count}/{len(self.items)} done>"

    def _repr_html_(self) -> str | None:
        return to_html(self)


class TodoBoard:
    """The run's current todo list, written through to ``todos.json``, with its archive.

    A ``todos.json`` that someone broke by hand since the board last wrote it is moved
    aside before the next write, never overwritten, and ``on_problem`` hears where it went.
    """

    def __init__(
        self, workspace: Workspace, *, on_problem: Callable[[str], object] | None = None
    ) -> None:
        self._workspace = workspace
        self._list = TodoList()
        self._on_problem = on_problem
        self._written: tuple[int, int, int] | None = None

    @property
    def list(self) -> TodoList:
        return self._list

    def set(self, todos: TodoList) -> TodoList:
        version = self._workspace.version(TODOS_FILE)
        if version is not None and version != self._written:
            _, problem = self.load_existing()
            if problem and self._on_problem:
                self._on_problem(f"{TODOS_FILE} was changed during the run: {problem}")
        self._list = todos
        self._workspace.write_text(TODOS_FILE, json.dumps(todos.to_json(), indent=2) + "\n")
        self._written = self._workspace.version(TODOS_FILE)
        return todos

    def load_existing(self) -> tuple[TodoList | None, str | None]:
        """Read the ``todos.json`` on disk, left by an earlier run or edited by a person.

        A corrupt file is moved aside (never deleted) and the reason returned, so the caller
        can report it and start fresh without losing what a person wrote.
        """
        if not self._workspace.exists(TODOS_FILE):
            return None, None
        try:
            return TodoList.loads(self._workspace.read_text(TODOS_FILE)), None
        except (TodoError, WorkspaceError) as exc:
            path = self._workspace.resolve(TODOS_FILE)
            aside = Path(_free_name(path.with_name(TODOS_FILE + ".corrupt")))
            os.replace(path, aside)
            return None, f"{exc} (moved aside to {self._workspace.shown(aside)})"

    def archive(self, outcome: str, *, note: str | None = None) -> str | None:
        """Move the current list to ``archive/phase_NN_<outcome>.json``; returns its name."""
        todos = self._list
        if not todos.items:
            return None
        stem = f"{ARCHIVE_DIR}/phase_{todos.phase_number:02d}_{outcome}"
        name = f"{stem}.json"
        attempt = 1
        while self._workspace.exists(name):
            attempt += 1
            name = f"{stem}_{attempt}.json"
        record = todos.to_json() | {"outcome": outcome, "note": note}
        self._workspace.write_text(name, json.dumps(record, indent=2) + "\n")
        self.set(replace(todos, items=(), instruction=None))
        return name


def _free_name(path: os.PathLike[str]) -> str:
    base = os.fspath(path)
    candidate, n = base, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{base}.{n}"
    return candidate
