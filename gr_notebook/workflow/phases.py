"""The phase workflow of seeds 000/001: bootstrap, transitions, rewinds and job completion.

The controller owns the todo board and decides what happens when a list runs out. It never
talks to the model directly: it queues prompts for the loop to inject and notes when
compaction is due, which the tool-execution step hands the loop as an effect of the turn, so
the loop stays the one orchestrator. Its state (:meth:`PhaseController.to_json`) is part of
the run state's snapshot; the plan, the journal and the archive are workspace files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gr_notebook.errors import TodoError, WorkspaceError
from gr_notebook.eventdata import fields_json
from gr_notebook.events import (
    ErrorEvent,
    Event,
    JobCompleteEvent,
    PhaseStartedEvent,
    PhaseTransitionEvent,
    PlanUpdatedEvent,
    RewindEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    WorkspaceSummaryEvent,
)
from gr_notebook.guidance import Directive
from gr_notebook.workflow import prompts
from gr_notebook.workflow.journal import EXPERIENCES_FILE, Journal
from gr_notebook.workflow.plan import Phase, Plan
from gr_notebook.workflow.summary import SUMMARY_FILE, build_workspace_summary
from gr_notebook.workflow.todos import TodoBoard, TodoItem, TodoKind, TodoList
from gr_notebook.workflow.workspace import Workspace

__all__ = ["JobResult", "PhaseController", "Segment"]

Emit = Callable[[Event], object]
TransitionKind = Literal["phase", "rewind", "reset"]

_WAITING = "Follow the {what} instructions in the conversation, then call todo_write(todos=[...])"


@dataclass(frozen=True, slots=True)
class Segment:
    """One todo list from start to end: a phase attempt, the bootstrap, or the finale."""

    phase: int
    name: str
    kind: TodoKind
    outcome: str
    titles: tuple[str, ...]
    done: int
    archive: str | None = None
    issue: str | None = None


@dataclass(frozen=True, slots=True)
class JobResult:
    summary: str
    deliverables: tuple[str, ...] = ()
    confidence: float | None = None
    notes: str | None = None
    source: str = "model"


@dataclass
class PhaseController:
    workspace: Workspace
    plan_file: str
    emit: Emit
    clock: Callable[[], float]
    segments: list[Segment] = field(default_factory=list)
    job: JobResult | None = None
    compaction_due: bool = False
    _board: TodoBoard = field(init=False)
    _journal: Journal = field(init=False)
    _pending: TransitionKind | None = field(default=None, init=False)
    regulated: bool = False
    """Self-regulation is on: transitions and rewinds ask for an assessment of the phase."""
    _prompts: list[Directive] = field(default_factory=list, init=False)
    _wrap_up: bool = field(default=False, init=False)
    _plan_cache: tuple[tuple[int, int, int], Plan] | None = field(default=None, init=False)
    _plan_written: bool = field(default=False, init=False)
    """Whether the plan was written during this run (a leftover plan proves nothing)."""

    def __post_init__(self) -> None:
        self._board = TodoBoard(
            self.workspace,
            on_problem=lambda message: self.emit(ErrorEvent(source="todos", message=message)),
        )
        self._journal = Journal(self.workspace)

    # -- state ------------------------------------------------------------------------------

    @property
    def todos(self) -> TodoList:
        return self._board.list

    @property
    def journal(self) -> Journal:
        return self._journal

    @property
    def transition_pending(self) -> bool:
        return self._pending is not None

    def plan(self) -> Plan | None:
        """The plan as it is on disk now; None when missing or unreadable.

        Parsed again only when the file changes (inode, mtime or size), since people and models
        edit it between any two calls but most calls see the same file.
        """
        key = self.workspace.version(self.plan_file)
        if key is None:
            return None
        if self._plan_cache is None or self._plan_cache[0] != key:
            try:
                self._plan_cache = (key, Plan.parse(self.workspace.read_text(self.plan_file)))
            except WorkspaceError:
                return None
        return self._plan_cache[1]

    def take_prompts(self) -> list[Directive]:
        queued, self._prompts = self._prompts, []
        return queued

    def take_compaction_due(self) -> bool:
        """Whether a new list began since the last ask (layers 4-5 are due a compaction)."""
        due, self.compaction_due = self.compaction_due, False
        return due

    def queue_prompt(self, text: str, *, reads: Sequence[str] = ()) -> None:
        self._prompts.append(prompts.directive(text, reads=reads))

    def order_wrap_up(self) -> None:
        """The run was told to wrap up: the INSTRUCTION line says so from now on."""
        if not self._wrap_up:
            self._wrap_up = True
            self._set(self.todos)

    @property
    def wrap_up_ordered(self) -> bool:
        return self._wrap_up

    def phase_ahead(self) -> tuple[int, str]:
        """The phase an assessment made now covers, and its label: the current list's, or
        during a phase transition the next phase of the plan."""
        todos = self.todos
        if self._pending is None:
            if todos.kind == "bootstrap":
                return todos.phase_number, "the bootstrap"
            return todos.phase_number, f"Phase {todos.phase_number}" + (
                f" '{todos.phase_name}'" if todos.phase_name else ""
            )
        plan = self.plan()
        if self._pending == "phase":  # the phase after the one that just finished
            finished = self.segments[-1].phase if self.segments else todos.phase_number
            upcoming = self._next_phase(plan)
        else:  # a rewind or reset: the list written next belongs to the plan's active phase
            upcoming = plan.active if plan else None
            finished = max(todos.phase_number, 1) - 1
        if upcoming is None:
            return finished + 1, f"Phase {finished + 1}"
        return upcoming.number, f"Phase {upcoming.number} '{upcoming.name}'"

    # -- workflow ---------------------------------------------------------------------------

    def start(self) -> None:
        """Every job starts with the seed's five bootstrap todos."""
        leftover, problem = self._board.load_existing()
        if problem:
            self.emit(ErrorEvent(source="todos", message=problem))
        if leftover is not None and leftover.items:  # an earlier run's list: keep, don't clobber
            self._set(leftover)
            self._board.archive("superseded")
        bootstrap = TodoList.of(
            prompts.bootstrap_todos(self.plan_file), phase_name="Bootstrap", kind="bootstrap"
        )
        self._begin(bootstrap, source="system")

    def write_todos(self, items: Sequence[TodoItem], *, source: str = "model") -> str:
        if not items:
            raise TodoError("todos is empty; give at least one task")
        notes: list[str] = []
        current = self.todos
        kind: TodoKind = "job_completion" if current.kind == "job_completion" else "phase"
        plan = self.plan()
        if self._pending == "phase" and plan:
            plan = self._ensure_advanced(plan, notes)
        active = plan.active if plan else None
        todos = TodoList(
            items=tuple(items),
            phase_number=active.number if active else max(current.phase_number, 1),
            phase_total=len(plan.phases) if plan else current.phase_total,
            phase_name=active.name if active else (current.phase_name or "Unplanned work"),
            kind=kind,
        )
        if self._pending is not None or current.kind == "bootstrap":
            if self._pending is None and current.items:  # the model skipped the rest
                self._end_segment("replaced")
            self._pending = None
            self._begin(todos, source=source)
            self.compaction_due = True
        else:
            self._set(todos)
            self.emit(_todos_written(todos, source))
        if todos.is_finished:  # every task written as done: the list ends at once
            notes.append("Every task was written as done, so the list is complete.")
            self._finish_list()
            if self.transition_pending:  # compact after the next list exists, not now
                self.compaction_due = False
        if plan is None:
            notes.append(f"{self.plan_file} does not exist yet; create it with write_file()")
        head = f"Todo list set: {len(items)} tasks for Phase: {todos.phase_label()}."
        index = todos.current_index
        if index is not None:
            head += f" Current task: {index + 1}. {todos.items[index].title}"
        return "\n".join([head, *notes])

    def add_todo(self, title: str, *, source: str = "person") -> str:
        if self._pending is not None:
            raise TodoError(
                "the phase transition is under way and the next todo list is not written yet; "
                "add the task once it is"
            )
        todos = self.todos
        updated = replace(todos, items=(*todos.items, TodoItem(title)), instruction=None)
        self._set(updated)
        self.emit(_todos_written(updated, source))
        return f"Added task {len(updated.items)} '{title}'."

    def complete_todo(self, *, source: str = "model") -> str:
        if self._pending is not None:
            raise TodoError(
                "the todo list is empty while the phase transition is under way; follow the "
                "transition instructions and call todo_write(todos=[...])"
            )
        todos, number = self.todos.complete_next()
        self._set(todos)
        title = todos.items[number - 1].title
        self.emit(
            TodoCompletedEvent(index=number, title=title, remaining=todos.remaining, source=source)
        )
        plural = "task" if todos.remaining == 1 else "tasks"
        message = f"Task {number} '{title}' marked complete. {todos.remaining} {plural} remaining."
        if todos.is_finished:
            self._finish_list()
        return message

    def rewind(self, issue: str, *, source: str = "model") -> str:
        issue = " ".join(issue.split())
        if not issue:
            raise TodoError("issue is empty; say what is wrong and what could work instead")
        todos = self.todos
        label = f"Phase {todos.phase_number} '{todos.phase_name or todos.phase_label()}'"
        archive = self._end_segment("rewound", issue=issue) if todos.items else None
        self._journal.add_failed_approach(f"{label}: {issue}")
        self.generate_summary(blocking=issue)
        self.emit(RewindEvent(issue=issue, source=source, archive=archive))
        self._await_todos("rewind", what="rewind")
        if not self._wrap_up:  # recorded either way, but a standing wrap-up asks for no new list
            self.queue_prompt(
                prompts.rewind_prompt(
                    issue=issue,
                    phase=label,
                    archive=archive,
                    plan_file=self.plan_file,
                    by=source,
                    assess=self.regulated,
                ),
                reads=prompts.rewind_reads(self.plan_file),
            )
        return f"Rewound: the todo list{f' was archived to {archive}' if archive else ''}."

    def archive_and_reset(self, *, source: str = "model") -> str:
        archive = self._end_segment("reset")
        self._await_todos("reset", what="reset")
        self.queue_prompt(prompts.reset_prompt(archive=archive))
        where = f" to {archive}" if archive else ""
        return f"Archived the todo list{where}; it is now empty. Write the next todos."

    def generate_summary(self, *, blocking: str | None = None) -> str:
        finished = self.segments[-1] if self.segments and not self.todos.items else None
        text = build_workspace_summary(
            self.workspace,
            plan_file=self.plan_file,
            todos=self.todos,
            clock=self.clock,
            blocking=blocking,
            journal=self._journal,
            plan=self.plan(),
            just_finished=(
                f"{finished.name or 'Bootstrap'}: {finished.outcome}, {finished.done} tasks done"
                if finished
                else None
            ),
        )
        self.workspace.write_text(SUMMARY_FILE, text)
        self.emit(WorkspaceSummaryEvent(file=SUMMARY_FILE, chars=len(text)))
        return text

    def complete_job(self, result: JobResult) -> None:
        self.job = result
        current = self.todos.current
        if current is not None and current.title == prompts.JOB_COMPLETION_TODOS[-1]:
            self.complete_todo(source="job_complete")
        self.emit(JobCompleteEvent(**fields_json(result)))

    def complete_if_planned(self, final_text: str) -> None:
        """The model stopped without ending the job: with a plan written during this run and
        every phase of it complete, the job is complete all the same (``detected``)."""
        if self.job is not None:
            return
        plan = self.plan()
        if plan is not None and plan.is_complete and self._plan_written:
            self.complete_job(
                JobResult(
                    summary=final_text.strip() or "All phases of the plan are complete.",
                    source="detected",
                )
            )

    def on_plan_written(self, plan: Plan, *, source: str = "model") -> list[str]:
        """React to a new plan; returns the warnings the writer should see.

        ``plan`` is the file just written, parsed, so it primes the cache of :meth:`plan`.
        """
        self._plan_written = True
        key = self.workspace.version(self.plan_file)
        if key is not None:
            self._plan_cache = (key, plan)
        self.emit(
            PlanUpdatedEvent(
                phases=len(plan.phases),
                complete=sum(p.status == "complete" for p in plan.phases),
                warnings=list(plan.warnings),
                source=source,
            )
        )
        if self._pending == "phase" and plan.is_complete:
            self._pending = None
            self._begin_job_completion()
        elif self._pending == "phase":  # the phase ahead may have changed with the plan
            self._name_next_phase(self.todos)
        return list(plan.warnings)

    # -- snapshots --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        todos = self.todos
        return {
            "todos": {**todos.to_json(), "instruction": todos.instruction},
            "segments": [fields_json(s) for s in self.segments],
            "job": fields_json(self.job) if self.job else None,
            "compaction_due": self.compaction_due,
            "pending": self._pending,
            "prompts": [fields_json(p) for p in self._prompts],
            "wrap_up": self._wrap_up,
            "plan_written": self._plan_written,
        }

    def load_json(self, data: Mapping[str, Any]) -> Callable[[], None]:
        """Check a saved state; returns the function that applies it."""
        todos = replace(
            TodoList.from_json(data["todos"], source="the snapshot"),
            instruction=data["todos"].get("instruction"),
        )
        segments = [Segment(**{**s, "titles": tuple(s["titles"])}) for s in data["segments"]]
        job = data["job"]
        result = JobResult(**{**job, "deliverables": tuple(job["deliverables"])}) if job else None
        queued = [
            Directive(**{**p, "reads": tuple(p["reads"]), "avoid_reads": tuple(p["avoid_reads"])})
            for p in data["prompts"]
        ]
        pending = data["pending"]
        if pending not in (None, "phase", "rewind", "reset"):
            raise ValueError(f"unknown pending transition {pending!r}")

        def apply() -> None:
            self._board.set(todos)
            self.segments, self.job = segments, result
            self.compaction_due = bool(data["compaction_due"])
            self._pending, self._prompts = pending, queued
            self._wrap_up, self._plan_written = bool(data["wrap_up"]), bool(data["plan_written"])

        return apply

    # -- internals --------------------------------------------------------------------------

    def _finish_list(self) -> None:
        todos = self.todos
        if todos.kind == "job_completion":
            if self.job is None:
                self.queue_prompt(
                    "All final tasks are done. Call job_complete(summary=..., deliverables=[...], "
                    "confidence=..., notes=...) to finish the job."
                )
            return
        finished = (
            "the bootstrap"
            if todos.kind == "bootstrap"
            else f"Phase {todos.phase_number} '{todos.phase_name}'"
        )
        archive = self._end_segment("complete")
        plan = self.plan()
        last = (
            todos.kind == "phase" and plan is not None and _is_last_phase(plan, todos.phase_number)
        )
        if last and plan is not None and not plan.is_complete:
            self._write_plan(plan.with_status(todos.phase_number, "complete"))
        self.generate_summary()
        if last:
            self._begin_job_completion()
            return
        self._await_todos("phase", what="phase transition")
        if self._wrap_up:  # told to wrap up: no workflow that orders the next phase
            return
        has_experiences = self.workspace.exists(EXPERIENCES_FILE)
        self.queue_prompt(
            prompts.transition_prompt(
                finished=finished,
                archive=archive,
                plan_file=self.plan_file,
                plan_warnings=plan.warnings if plan else (f"{self.plan_file} does not exist",),
                has_experiences=has_experiences,
                assess=self.regulated,
            ),
            reads=prompts.transition_reads(self.plan_file, has_experiences=has_experiences),
        )

    def _ensure_advanced(self, plan: Plan, notes: list[str]) -> Plan:
        """If the model wrote todos without moving the plan on, move it on for them."""
        finished = self.segments[-1] if self.segments else None
        active = plan.active
        if finished is None or finished.kind != "phase" or active is None:
            return plan
        if active.number > finished.phase:
            return plan
        advanced = plan.with_status(finished.phase, "complete")
        upcoming = next((p for p in advanced.phases if p.status == "pending"), None)
        if upcoming:
            advanced = advanced.with_status(upcoming.number, "current")
        self._write_plan(advanced)
        notes.append(
            f"Note: {self.plan_file} still had Phase {finished.phase} unfinished; the system "
            f"marked it ✓ COMPLETE"
            + (f" and Phase {upcoming.number} ← CURRENT." if upcoming else ".")
        )
        return advanced

    def _write_plan(self, plan: Plan) -> None:
        self.workspace.write_text(self.plan_file, plan.render())
        self.on_plan_written(plan, source="system")

    def _begin_job_completion(self) -> None:
        plan = self.plan()
        total = len(plan.phases) if plan else 0
        finale = TodoList.of(
            prompts.JOB_COMPLETION_TODOS,
            phase_number=total + 1,
            phase_total=total,
            phase_name="Job Completion",
            kind="job_completion",
        )
        self._begin(finale, source="system")
        self.compaction_due = True
        if not self._wrap_up:  # told to wrap up, it finishes now, not the long way
            self.queue_prompt(prompts.job_completion_prompt(self.plan_file))

    def _set(self, todos: TodoList) -> None:
        """Every list goes on the board through here, so a standing wrap-up order stays
        on its INSTRUCTION line."""
        if self._wrap_up and todos.instruction != prompts.WRAP_UP_INSTRUCTION:
            todos = replace(todos, instruction=prompts.WRAP_UP_INSTRUCTION)
        self._board.set(todos)

    def _begin(self, todos: TodoList, *, source: str) -> None:
        self._set(todos)
        self.emit(_todos_written(todos, source))
        self.emit(
            PhaseStartedEvent(
                phase_number=todos.phase_number,
                name=todos.phase_name,
                todo_kind=todos.kind,
                total=todos.phase_total,
                tasks=len(todos.items),
            )
        )

    def _await_todos(self, kind: TransitionKind, *, what: str) -> None:
        self._pending = kind
        todos = self.todos
        waiting = TodoList(
            phase_number=todos.phase_number,
            phase_total=todos.phase_total,
            phase_name=todos.phase_name,
            instruction=_WAITING.format(what=what),
        )
        if kind == "phase":
            self._name_next_phase(waiting)
        else:
            self._set(waiting)

    def _next_phase(self, plan: Plan | None) -> Phase | None:
        """During a phase transition, the plan's first unfinished phase after the one that
        just ended (the model may not have marked it current yet)."""
        if plan is None:
            return None
        finished = self.segments[-1].phase if self.segments else self.todos.phase_number
        return next(
            (p for p in plan.phases if p.status != "complete" and p.number > finished), None
        )

    def _name_next_phase(self, waiting: TodoList) -> None:
        """Between phases the empty list names the phase whose todos come next, not the one
        that ended: the layer and the plan agree on where the job is."""
        plan = self.plan()
        upcoming = self._next_phase(plan)
        if plan is not None and upcoming is not None:
            waiting = replace(
                waiting,
                phase_number=upcoming.number,
                phase_total=len(plan.phases),
                phase_name=upcoming.name,
                kind="phase",
            )
        self._set(waiting)

    def _end_segment(self, outcome: str, *, issue: str | None = None) -> str | None:
        todos = self.todos
        archive = self._board.archive(outcome, note=issue)
        segment = Segment(
            phase=todos.phase_number,
            name=todos.phase_name,
            kind=todos.kind,
            outcome=outcome,
            titles=tuple(i.title for i in todos.items if i.done),
            done=todos.done_count,
            archive=archive,
            issue=issue,
        )
        self.segments.append(segment)
        self.emit(
            PhaseTransitionEvent(
                from_phase=todos.phase_number,
                name=todos.phase_name,
                todo_kind=todos.kind,
                outcome=outcome,
                tasks=len(todos.items),
                done=todos.done_count,
                archive=archive,
                issue=issue,
            )
        )
        return archive


def _is_last_phase(plan: Plan, number: int) -> bool:
    """True when ``number`` is a phase of the plan and every other phase is complete."""
    numbers = [p.number for p in plan.phases]
    if number not in numbers:
        return False
    return all(p.status == "complete" or p.number == number for p in plan.phases)


def _todos_written(todos: TodoList, source: str) -> TodosWrittenEvent:
    return TodosWrittenEvent(
        source=source,
        phase_number=todos.phase_number,
        name=todos.phase_name,
        todo_kind=todos.kind,
        titles=[i.title for i in todos.items],
    )
