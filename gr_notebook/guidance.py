"""Every order the system gives the model, as data: a :class:`Directive` and its record.

A real model obeys what it reads, so each text the system sends (a workflow prompt, a
feedback block, a resource recommendation, a denial, a refused stop, the todo layer's
INSTRUCTION line) is recorded with the next action it names and the state of the job when it
was given. The record (a :class:`~gr_notebook.events.GuidanceRecord`) is the ``directive`` of
the event that delivered the order (``prompt_injected``, ``tool_call``, ``feedback``), so an
order costs no event of its own; the todo layer and the kickoff, which no other event
delivers, get a ``guidance`` event.
:mod:`gr_notebook.history.lint` reads these records back to find orders that contradict each other
or the job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

from gr_notebook.eventdata import clip
from gr_notebook.events import GuidanceRecord

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget import BudgetUsage
    from gr_notebook.workflow.plan import Plan
    from gr_notebook.workflow.todos import TodoList

__all__ = [
    "ACTIONS",
    "Action",
    "Directive",
    "action_of_text",
    "feedback_directive",
    "guidance_data",
    "limit_fractions",
]

Action: TypeAlias = Literal[
    "work_on_task",
    "change_approach",
    "write_todos",
    "finish_job",
    "wrap_up",
    "continue",
    "do_first",
    "narrow_scope",
]
ACTIONS: tuple[Action, ...] = get_args(Action)
"""The next actions a directive can name:

- ``work_on_task``: do the current todo, then call ``todo_complete()``;
- ``change_approach``: the current todo, done differently (or rewound);
- ``write_todos``: follow a workflow (transition, rewind, reset) and write the next list;
- ``finish_job``: the job's own end: verify, report, call ``job_complete``;
- ``wrap_up``: stop early: summarize what was done and call ``job_complete`` now;
- ``continue``: keep working as before;
- ``do_first``: do what a policy's denial names first (read a file, call a tool), then retry;
- ``narrow_scope``: do less than planned.
"""

_WRAP_UP = re.compile(
    r"\b(wrap(?:ping)?\s+(?:it\s+)?up|stop\s+now|stop\s+working|"
    r"(?:you\s+are|you're)\s+done(?!\s+with)|call\s+job_complete|"
    r"finish\s+(?:the\s+job\s+)?now|end\s+the\s+(?:job|run)\s+now)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"\b(?:not|never|don't|do\s+not|no\s+need\s+to|before\s+you)\s*$", re.I)
_DEFERRED = re.compile(r"^\W*(?:\w+\W+){0,3}?(?:yet|until|unless|later)\b", re.IGNORECASE)
_NEAR = 24
"""Characters around an order that are read for a negation ("do not call job_complete yet")."""
_NARROW = re.compile(r"\bnarrow\s+(?:the|your)\s+scope\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Directive:
    """One order to the model: what it says, who says it, and what it asks for."""

    text: str
    source: str
    """Who gave it: ``prompt:PHASE TRANSITION``, ``feedback:Redundancy``,
    ``check_resources``, ``assess_task``, ``policy:<name>``, ``stop_refused``,
    ``intervention`` or ``todo_layer``."""
    action: Action | None = None
    """The next action it names; None for information that asks for nothing."""
    reads: tuple[str, ...] = ()
    """Files it asks the model to read."""
    avoid_reads: tuple[str, ...] = ()
    """Files it tells the model not to read again."""
    from_limits: bool = False
    """It follows from the run's hard limits (a warning past 80%, an estimate they cannot
    fit), whatever the job's state."""


def action_of_text(text: str) -> Action | None:
    """The action a free text names, for texts the system did not write (a custom
    feedback provider's): an order to stop or wrap up, to narrow the scope, or nothing."""
    for match in _WRAP_UP.finditer(text):
        before = text[max(match.start() - _NEAR, 0) : match.start()]
        after = text[match.end() : match.end() + _NEAR]
        if not _NEGATED.search(before.rstrip()) and not _DEFERRED.search(after):
            return "wrap_up"
    if _NARROW.search(text):
        return "narrow_scope"
    return None


def feedback_directive(provider: str, text: str, *, avoid_reads: tuple[str, ...] = ()) -> Directive:
    """A rendered feedback block as an order: the system's own Redundancy block names the
    file not to re-read; any other provider's text is read for the action it names."""
    if avoid_reads:
        return Directive(text, f"feedback:{provider}", None, avoid_reads=avoid_reads)
    return Directive(text, f"feedback:{provider}", action_of_text(text))


def limit_fractions(usage: BudgetUsage) -> dict[str, float | None]:
    """How much of each hard limit is used, in percent; None where no limit is set."""
    budget = usage.budget
    return {
        "tokens_pct": None
        if budget.max_tokens is None
        else round(100 * usage.tokens / budget.max_tokens, 1),
        "iterations_pct": round(100 * usage.iterations / budget.max_iterations, 1),
        "deadline_pct": None
        if budget.deadline_s is None
        else round(100 * usage.elapsed_s / budget.deadline_s, 1),
    }


def guidance_data(
    directive: Directive,
    *,
    todos: TodoList,
    plan: Plan | None,
    usage: BudgetUsage,
    job_done: bool,
) -> GuidanceRecord:
    """The record of an order: the directive and the state of the job when it was given."""
    phases_left = sum(p.status != "complete" for p in plan.phases) if plan is not None else None
    fractions = limit_fractions(usage)
    used = [f for f in fractions.values() if f is not None]
    return GuidanceRecord(
        source=directive.source,
        action=directive.action,
        text=clip(directive.text),
        reads=directive.reads,  # tuples: no work for the garbage collector
        avoid_reads=directive.avoid_reads,
        from_limits=directive.from_limits,
        phase_name=todos.phase_name,
        phase_kind=todos.kind,
        tasks_left=todos.remaining,
        phases_left=phases_left,
        job_done=job_done,
        tokens_pct=fractions["tokens_pct"],
        iterations_pct=fractions["iterations_pct"],
        deadline_pct=fractions["deadline_pct"],
        limits_pct=max(used) if used else None,
    )
