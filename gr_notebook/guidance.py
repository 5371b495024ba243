"""Every order the system gives the model, as data: a :class:`Directive` and its record.

A real model obeys what it reads, so each text the system sends (a workflow prompt, a
feedback block, a resource recommendation, a denial, a refused stop, the todo layer's
INSTRUCTION line) is recorded with the next action it names and the state of the job when it
was given. The record (a :class:`~gr_notebook.events.GuidanceRecord`, made by
:mod:`gr_notebook.engine.orders`) is the ``directive`` of
the event that delivered the order (``prompt_injected``, ``tool_call``, ``feedback``), so an
order costs no event of its own; the todo layer and the kickoff, which no other event
delivers, get a ``guidance`` event.
:mod:`gr_notebook.review.lint` reads these records back to find orders that contradict each other
or the job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

__all__ = [
    "ACTIONS",
    "Action",
    "Directive",
    "action_of_text",
    "feedback_directive",
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
    ``check_resources``, ``assess_task``, ``allotment`` (an extended allotment), ``limits``
    (the loop's own wrap-up order under a cost limit), ``policy:<name>``,
    ``approval:<policy>`` (a call not approved, with a person's reason), ``stop_refused``,
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
