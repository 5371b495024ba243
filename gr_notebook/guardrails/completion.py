"""Task-completion checking (seed 002): a stop is allowed only once the work is done.

The checker is part of the agent's definition, so the same criteria hold on every model.
The run asks it on every attempt to stop (a final ``end_turn`` text, or ``job_complete``);
an incomplete result refuses the stop and its feedback goes back to the model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.paths import is_file
from gr_notebook.harness import GR_LOOP, Harness
from gr_notebook.wording import plural
from gr_notebook.workflow import prompts

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget import BudgetUsage
    from gr_notebook.workflow.plan import Plan
    from gr_notebook.workflow.todos import TodoList
    from gr_notebook.workflow.workspace import Workspace

__all__ = [
    "STOP_BY_TOOL",
    "CompositeChecker",
    "FileOutputChecker",
    "PlanBasedChecker",
    "StopKind",
    "TaskCompletionChecker",
    "TaskCompletionContext",
    "TaskCompletionResult",
    "as_checker",
]

StopKind: TypeAlias = Literal["end_turn", "job_complete"]
"""How the model tries to stop: ending its turn without a tool call, or calling a tool
that ends the job (``Tool.ends_job``, the built-in ``job_complete``)."""
STOP_BY_TOOL: StopKind = "job_complete"
MAX_TITLES = 3
PLAN_FILE = "main_plan.md"


@dataclass(frozen=True, slots=True)
class TaskCompletionResult:
    complete: bool
    feedback: str | None = None

    @classmethod
    def ok(cls, feedback: str | None = None) -> TaskCompletionResult:
        return cls(True, feedback)

    @classmethod
    def incomplete(cls, feedback: str) -> TaskCompletionResult:
        """Not done; ``feedback`` tells the model what is left."""
        return cls(False, feedback)


@dataclass(frozen=True, slots=True)
class TaskCompletionContext:
    """The run as it stands when the model tries to stop."""

    workspace: Workspace
    todos: TodoList
    plan: Plan | None
    tentative_output: Any
    """The final text, or the arguments given to ``job_complete``."""
    stop_reason: StopKind
    budget: BudgetUsage
    run_id: str = ""
    harness: Harness = GR_LOOP
    """What runs the model: feedback names gr's todo tools only where ``harness.phased``."""
    plan_file: str = PLAN_FILE
    """The plan's file in the workspace, as the model is told to write it."""


@runtime_checkable
class TaskCompletionChecker(Protocol):
    def check(self, context: TaskCompletionContext) -> TaskCompletionResult: ...


CheckerLike: TypeAlias = TaskCompletionChecker | Callable[[TaskCompletionContext], Any]


@dataclass(frozen=True, slots=True)
class _FunctionChecker:
    function: Callable[[TaskCompletionContext], TaskCompletionResult]

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        return self.function(context)


def as_checker(value: CheckerLike) -> TaskCompletionChecker:
    """A checker object as it is, or a plain ``def check(context)`` function wrapped."""
    if isinstance(value, TaskCompletionChecker):
        return value
    if callable(value):
        return _FunctionChecker(value)
    raise ConfigError(
        f"task_completion_checker takes an object with check(context) or a function, not "
        f"{type(value).__name__}"
    )


class PlanBasedChecker:
    """Incomplete while the todo list or the plan has unfinished steps, or while there is no
    plan: a missing plan file, or one without phases, is a job never planned, not a finished
    one (a rewind during the bootstrap leaves neither a plan nor todos).

    ``require_plan=False`` judges an unplanned job by its todo list alone: with none left,
    nothing shows work left. gr reads a stop that no checker judges this way, to tell a
    limit's stop with work left from one without.
    """

    def __init__(self, *, require_plan: bool = True) -> None:
        self.require_plan = require_plan

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        todos = context.todos
        pending = [i.title for i in todos.items if not i.done]
        if context.stop_reason == "job_complete" and pending == [prompts.JOB_COMPLETION_TODOS[-1]]:
            pending = []  # the stop itself is the last task of the job-completion list
        steps: list[str] = []
        phases = 0
        plan = context.plan
        if plan is not None:
            for phase in plan.phases:
                if phase.status != "complete":
                    left = [s.text for s in phase.steps if not s.done]
                    phases += bool(left)
                    steps += left
        unplanned = _unplanned(context) if self.require_plan else None
        if not pending and not steps and unplanned is None:
            return TaskCompletionResult.ok("Every todo and every step of the plan is done.")
        lines = []
        if pending or steps:
            parts = []
            if pending:
                verb = "is" if len(pending) == 1 else "are"
                parts.append(
                    f"{len(pending)} of {plural(len(todos.items), 'todo')} in "
                    f"{todos.phase_label()} {verb} unfinished"
                )
            if steps:
                parts.append(
                    f"the plan has {plural(len(steps), 'unfinished step')} in "
                    f"{plural(phases, 'phase')}"
                )
            sentence = ", and ".join(parts)
            titles = list(dict.fromkeys([*pending, *steps]))
            listed = ", ".join(titles[:MAX_TITLES]) + (", ..." if len(titles) > MAX_TITLES else "")
            lines.append(f"{sentence[0].upper()}{sentence[1:]}: {listed}")
        # todo_complete is gr's loop's tool: another harness's model finishes them its own way
        phased = context.harness.phased
        if unplanned is not None:  # another harness has no todo list of gr's to speak of
            empty = ", and the todo list is empty" if phased and not todos.items else ""
            lines.append(
                f"The job has no plan yet: {unplanned}{empty}, so nothing shows that the job "
                "is done."
            )
        finish = "Finish them (todo_complete() after each)" if phased else "Finish them"
        if unplanned is None:
            lines.append(
                f"{finish}, or revise the plan if some are no longer needed, before you stop."
            )
        elif pending:
            lines.append(f"{finish}, and {_plan_shape(context.plan_file)}, before you stop.")
        else:
            lines.append(_plan_order(context.plan_file, phased=phased))
        return TaskCompletionResult.incomplete("\n".join(["<blocker>", *lines, "</blocker>"]))

    def __repr__(self) -> str:
        return "PlanBasedChecker()" if self.require_plan else "PlanBasedChecker(require_plan=False)"


def _unplanned(context: TaskCompletionContext) -> str | None:
    """Why the job has no plan, or None when it has one."""
    if context.plan is None:
        return f"{context.plan_file} is missing or cannot be read"
    if not context.plan.phases:
        return f"{context.plan_file} has no phases"
    return None


def _plan_shape(plan_file: str) -> str:
    """The plan to write, in the format it is read in (:mod:`gr_notebook.workflow.plan`)."""
    return (
        f"write {plan_file} with the job's phases: each a '## Phase N: Name' heading followed "
        "by its steps as '- [ ] step' lines"
    )


def _plan_order(plan_file: str, *, phased: bool) -> str:
    """What a model with no plan and nothing left to finish is told: write the plan; gr's
    loop then has it write the phase's todo list, another harness ticks the plan's steps."""
    shape = _plan_shape(plan_file)
    if phased:
        return (
            f"{shape[0].upper()}{shape[1:]}, with '← CURRENT' after the heading of the first "
            "phase. Then write the todo list for that phase with todo_write(todos=[...]) and "
            "work through it before you stop."
        )
    return (
        f"{shape[0].upper()}{shape[1:]}. Then do the steps, and mark each step '- [x]' when "
        "it is done, before you stop."
    )


class FileOutputChecker:
    """Incomplete until every named file exists in the workspace."""

    def __init__(self, files: Iterable[str]) -> None:
        if isinstance(files, str):
            raise ConfigError(f"files is a list of paths, e.g. FileOutputChecker([{files!r}])")
        self.files: tuple[str, ...] = tuple(files)
        if not self.files or not all(isinstance(f, str) and f.strip() for f in self.files):
            raise ConfigError("FileOutputChecker needs the paths of the files that must exist")

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        names = [_in_workspace(context.workspace, f) for f in self.files]
        missing = [f for f in names if not is_file(context.workspace, f)]
        if not missing:
            return TaskCompletionResult.ok(f"All {plural(len(self.files), 'required file')} exist.")
        listed = ", ".join(missing[:MAX_TITLES]) + (", ..." if len(missing) > MAX_TITLES else "")
        verb = "is" if len(missing) == 1 else "are"
        return TaskCompletionResult.incomplete(
            "<blocker>\n"
            f"{len(missing)} of {plural(len(self.files), 'required output file')} {verb} "
            f"missing: {listed}\nCreate {'it' if len(missing) == 1 else 'them'} before you stop.\n"
            "</blocker>"
        )

    def __repr__(self) -> str:
        return f"FileOutputChecker({list(self.files)!r})"


def _in_workspace(workspace: Workspace, name: str) -> str:
    """A person's absolute path as the workspace-relative name it denotes (a relative one
    is already that); one outside the workspace is a mistake in the agent's definition."""
    if not os.path.isabs(name):
        return name
    path = Path(os.path.normpath(name))
    for root in (workspace.root, workspace.root.resolve()):
        if path == root or path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    raise ConfigError(
        f"FileOutputChecker: {name!r} is outside the workspace {workspace.root}; name the "
        "files inside it, relative to it (e.g. 'report.md')"
    )


class CompositeChecker:
    """All of several checkers must pass (the first failure is reported), or any one."""

    def __init__(self, checkers: Sequence[CheckerLike], *, all_must_pass: bool = True) -> None:
        given: object = checkers
        if isinstance(given, (str, bytes)) or not checkers:
            raise ConfigError("CompositeChecker needs at least one checker")
        self.checkers = tuple(as_checker(c) for c in checkers)
        self.all_must_pass = all_must_pass

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        said: list[str] = []  # every pass when all must pass; every failure when any may
        for checker in self.checkers:
            result = checker.check(context)
            if result.complete != self.all_must_pass:  # the first failure, or the first pass
                return result
            if result.feedback:
                said.append(result.feedback)
        if self.all_must_pass:
            return TaskCompletionResult.ok("\n".join(said) or None)
        return TaskCompletionResult.incomplete("\n".join(said) or "No completion check passed.")

    def __repr__(self) -> str:
        return f"CompositeChecker({list(self.checkers)!r}, all_must_pass={self.all_must_pass})"
