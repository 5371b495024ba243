"""``lint_guidance``: orders the system gave a model that contradict each other or the job.

It reads the guidance records of a run's events (see :mod:`gr_notebook.guidance`), so it
works the same on a live run, a finished one and one read back from the store. Each rule is
one kind of contradiction a model that obeys would trip over:

``wrap_up_with_work_left``
    An order to wrap up (stop, call ``job_complete`` now) while tasks or phases are left
    and every hard limit is under 80% used.
``rebuke_for_requested_read``
    Feedback telling the model not to read a file that a workflow prompt or a strategy
    check asked it to read, on the first read after the request.
``conflicting_orders``
    Two orders reaching the model in one turn (the todo layer's INSTRUCTION line counts)
    that name incompatible next actions: wrap up and keep working (or finish the job the long
    way), or write the next todo list and work on the current task.
``stop_refused_after_completion``
    A refused stop after the job was complete.
``stop_refused_after_wrap_up``
    A refused stop after the system itself ordered a wrap-up.
``narrow_scope_within_limits``
    An order to narrow the scope that the run's hard limits do not call for (a person's
    denied confirmation is theirs to give, and is not counted).

A person's own orders (a denied confirmation, the reason given for denying a tool call,
source ``approval:<policy>``) break none of these rules: they are the person's to give.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from gr_notebook.events import (
    Event,
    FeedbackEvent,
    GuidanceRecord,
    ToolCallEvent,
    directive_of,
)
from gr_notebook.history.run_arg import read_run

if TYPE_CHECKING:
    from gr_notebook.history.store import StoreLike
    from gr_notebook.run import Run

__all__ = ["RULES", "GuidanceConflict", "lint_guidance"]

RULES: Mapping[str, str] = {
    "wrap_up_with_work_left": "an order to wrap up while work is left and the limits are far",
    "rebuke_for_requested_read": "a rebuke for a read the system asked for",
    "conflicting_orders": "two orders in one turn that name different next actions",
    "stop_refused_after_completion": "a stop refused after the job was complete",
    "stop_refused_after_wrap_up": "a stop refused after the system ordered a wrap-up",
    "narrow_scope_within_limits": "an order to narrow the scope the hard limits do not call for",
}
FAR = 80.0
"""A hard limit under this percentage used is far: no reason to wrap up or narrow."""

_KEEP_WORKING = frozenset({"work_on_task", "change_approach", "write_todos", "continue"})
_CLASHES: tuple[tuple[str, frozenset[str]], ...] = (
    ("wrap_up", _KEEP_WORKING | {"finish_job"}),
    ("write_todos", frozenset({"work_on_task", "change_approach"})),
)


@dataclass(frozen=True, slots=True)
class GuidanceConflict:
    """One contradiction: the rule it breaks, where, and the orders involved."""

    rule: str
    turn: int
    message: str
    sources: tuple[str, ...]
    texts: tuple[str, ...]
    mode: Literal["live", "shadow"] = "live"
    """``shadow``: only a shadow's feedback, had it been sent, would have made it."""

    def __str__(self) -> str:
        where = f"turn {self.turn} (shadow)" if self.mode == "shadow" else f"turn {self.turn}"
        return f"{where}: {self.rule}: {self.message}"

    @property
    def key(self) -> tuple[str, int, tuple[str, ...]]:
        return (self.rule, self.turn, self.texts)


def lint_guidance(
    run: Run | str | Iterable[Event], *, store: StoreLike | None = None
) -> list[GuidanceConflict]:
    """The conflicts among the orders a run gave its model, in the order they happened.
    Takes a Run, a run id in ``store``, or a run's events (ConfigError for anything else).

    Shadow feedback (``gr.Agent(shadow=[...])``) is checked as if it had been sent: the
    conflicts only it would have made follow the live ones, each with ``mode="shadow"``."""
    with read_run(run, store, "lint_guidance") as given:
        events = given.events
    live = _lint(events, directive_of)
    if not any(_shadow_order(e) for e in events):
        return live
    seen = {c.key for c in live}
    shadow = [c for c in _lint(events, _sent) if c.key not in seen]
    return live + [replace(c, mode="shadow") for c in shadow]


def _shadow_order(event: Event) -> GuidanceRecord | None:
    """The order a shadow feedback block would have given, had it been sent."""
    if isinstance(event, FeedbackEvent) and event.mode == "shadow":
        return event.directive
    return None


def _sent(event: Event) -> GuidanceRecord | None:
    return _shadow_order(event) or directive_of(event)


def _lint(
    events: list[Event], order_of: Callable[[Event], GuidanceRecord | None]
) -> list[GuidanceConflict]:
    conflicts: list[GuidanceConflict] = []
    requested: dict[str, int] = {}  # path -> reads since the latest request for it
    wrapped_up = False
    turn_orders: list[GuidanceRecord] = []
    layer: GuidanceRecord | None = None
    current_turn: int | None = None

    def close_turn() -> None:
        orders = list(turn_orders)
        if layer is not None and all(o is not layer for o in orders):
            orders.append(layer)
        conflicts.extend(_clashes(orders, current_turn or 0))
        turn_orders.clear()

    for event in events:
        if isinstance(event, ToolCallEvent) and event.tool == "read_file":
            path = _norm(str((event.input or {}).get("path", "")))
            if path in requested and not event.is_error:
                requested[path] += 1
        d = order_of(event)
        if d is None:
            continue
        if event.turn != current_turn:
            close_turn()
            current_turn = event.turn
        if d.source == "todo_layer":
            layer = d
        turn_orders.append(d)
        conflicts.extend(_alone(d, event.turn, wrapped_up))
        for path in d.avoid_reads or ():
            if requested.get(_norm(path)) == 1:  # the read that was asked for
                conflicts.append(
                    _conflict("rebuke_for_requested_read", event.turn, [d], f"{path} was asked for")
                )
        if d.reads:
            requested = {_norm(p): 0 for p in d.reads}
        for path in d.avoid_reads or ():
            requested.pop(_norm(path), None)
        if d.action == "wrap_up" and d.source != "todo_layer":
            wrapped_up = True
    close_turn()
    return conflicts


def _alone(d: GuidanceRecord, turn: int, wrapped_up: bool) -> list[GuidanceConflict]:
    """The rules one order breaks by itself, given the state it was given in."""
    found = []
    action, limits = d.action, d.limits_pct
    far = limits is None or limits < FAR
    work_left = not d.job_done and ((d.tasks_left or 0) > 0 or (d.phases_left or 0) > 0)
    if action == "wrap_up" and far and work_left and not _persons(d):
        found.append(
            _conflict(
                "wrap_up_with_work_left",
                turn,
                [d],
                f"{d.tasks_left} tasks and "
                + ("no plan yet" if d.phases_left is None else f"{d.phases_left} phases left")
                + f", limits {limits or 0:.0f}% used",
            )
        )
    if action == "narrow_scope" and far and not d.from_limits and not _persons(d):
        found.append(
            _conflict("narrow_scope_within_limits", turn, [d], f"limits {limits or 0:.0f}% used")
        )
    if d.source in ("stop_refused", "prompt:STOP REFUSED"):
        if d.job_done or (d.phases_left == 0 and not d.tasks_left):
            found.append(
                _conflict("stop_refused_after_completion", turn, [d], "the job was complete")
            )
        if wrapped_up:
            found.append(
                _conflict("stop_refused_after_wrap_up", turn, [d], "a wrap-up was ordered")
            )
    return found


def _persons(d: GuidanceRecord) -> bool:
    """A person's answer (a denied confirmation, a denied tool call) is theirs to give,
    whatever the limits and whatever the system said."""
    return d.source == "confirmation" or d.source.startswith("approval:")


def _clashes(orders: list[GuidanceRecord], turn: int) -> list[GuidanceConflict]:
    actions = {o.action: o for o in orders if o.action and not _persons(o)}
    found = []
    for action, others in _CLASHES:
        if action not in actions:
            continue
        for other in sorted(others & actions.keys()):
            pair = [actions[action], actions[other]]
            found.append(_conflict("conflicting_orders", turn, pair, f"{action} vs {other}"))
    return found


def _conflict(rule: str, turn: int, orders: list[GuidanceRecord], detail: str) -> GuidanceConflict:
    return GuidanceConflict(
        rule=rule,
        turn=turn,
        message=f"{RULES[rule]} ({detail})",
        sources=tuple(o.source for o in orders),
        texts=tuple(o.text for o in orders),
    )


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).lstrip("/") if path else path
