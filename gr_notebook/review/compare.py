"""``gr.compare(run_a, run_b)``: where two runs diverge, and how their outcomes differ.

Made for a fork and its parent (they share every turn before the fork), it reads any two
runs from their events alone: live runs, finished ones, or runs in a store by id. A turn is
the same in both when the model made the same tool calls with the same inputs (or wrote the
same text), each call came out the same way (done, denied by a policy, or failed), and the
turn used as many tokens and completed as many tasks. The first turn that is not is where
they diverge: the first row of ``turns`` that differs. A fork replays its turn, and the
other agent's model often makes the same call there, so a call it denies still differs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.events import (
    Event,
    JobCompleteEvent,
    ModelCallEvent,
    PhaseTransitionEvent,
    PolicyDecisionEvent,
    RunFinishedEvent,
    TodoCompletedEvent,
    ToolCallEvent,
    as_typed,
    is_shadow,
)
from gr_notebook.history.run_arg import read_run
from gr_notebook.history.store import StoreLike, status_as_read

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.display.figures import NotebookFigure

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True, slots=True)
class _Turn:
    """One turn of a run: what it did (``signature``), and the run's totals at its end."""

    signature: str
    tools: str
    tokens: int
    tasks_done: int
    denials: int
    errors: int
    step: tuple[object, ...] = ()
    """What the two runs must share for the turn to be the same: the signature and what
    the turn alone added to each total."""


@dataclass(frozen=True, slots=True)
class _Side:
    label: str
    turns: dict[int, _Turn]
    outcome: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two runs side by side. ``turns`` has one row per turn (``a_*`` and ``b_*``
    columns, and ``same``); ``outcomes`` one row per measure; ``diverged_at`` is the first
    turn that differs (None when none does)."""

    labels: tuple[str, str]
    turns: pd.DataFrame
    outcomes: pd.DataFrame
    diverged_at: int | None

    def plot(self) -> NotebookFigure:
        """Tokens used and tasks completed, turn by turn, with the divergence marked: a
        matplotlib figure that draws itself as a cell's last expression."""
        from gr_notebook.display.figures import subplots

        figure, (tokens, tasks) = subplots(1, 2, figsize=(9, 3.2))
        for side, style in zip(("a", "b"), ("-", "--"), strict=True):
            label = self.labels[0 if side == "a" else 1]
            frame = self.turns.dropna(subset=[f"{side}_tokens"])
            turns = frame["turn"].to_numpy(dtype=float)
            for axes, column in ((tokens, "tokens"), (tasks, "tasks_done")):
                values = frame[f"{side}_{column}"].to_numpy(dtype=float)
                axes.plot(turns, values, style, label=label)
        for axes, title in ((tokens, "tokens used"), (tasks, "tasks completed")):
            if self.diverged_at is not None:
                axes.axvline(self.diverged_at, color="#9e9e9e", linestyle=":", linewidth=1)
            axes.set_title(title, fontsize=10)
            axes.set_xlabel("turn")
        tasks.legend(fontsize=8, loc="upper left")
        return figure

    def describe(self) -> str:
        a, b = self.labels
        where = (
            f"they diverge at turn {self.diverged_at}"
            if self.diverged_at is not None
            else "no turn differs"
        )
        ends = self.outcomes.loc["status"]
        return f"{a} ({ends[a]}) and {b} ({ends[b]}): {where}"

    def __repr__(self) -> str:
        return f"{self.describe()}\n{self.outcomes.to_string()}"

    def _repr_html_(self) -> str:
        return f"<p>{escape(self.describe())}</p>{self.outcomes.to_html()}"


def compare(
    run_a: object,
    run_b: object,
    *,
    store: StoreLike | None = None,
    labels: Sequence[str] | None = None,
) -> Comparison:
    """Compare two runs: each a :class:`~gr_notebook.run.Run`, a run id in ``store``
    (a Store or its path, default ``gr_runs/store.sqlite``; StoreError when there is no
    store there), or a run's events."""
    import pandas as pd

    names = list(labels) if labels is not None else []
    if labels is not None and len(names) != 2:
        raise ConfigError("labels takes two names, one per run")
    sides = [_side(run, names[i] if names else None, store) for i, run in enumerate((run_a, run_b))]
    if sides[0].label == sides[1].label:
        sides = [
            _Side(f"{s.label} ({c})", s.turns, s.outcome) for s, c in zip(sides, "ab", strict=True)
        ]
    a, b = sides
    rows = []
    diverged = None
    for turn in range(1, max([*a.turns, *b.turns, 0]) + 1):
        ta, tb = a.turns.get(turn), b.turns.get(turn)
        same = ta is not None and tb is not None and ta.step == tb.step
        if not same and diverged is None:
            diverged = turn
        row: dict[str, Any] = {"turn": turn}
        for side, t in (("a", ta), ("b", tb)):
            row[f"{side}_tools"] = t.tools if t else None
            row[f"{side}_tokens"] = t.tokens if t else None
            row[f"{side}_tasks_done"] = t.tasks_done if t else None
            row[f"{side}_denials"] = t.denials if t else None
            row[f"{side}_errors"] = t.errors if t else None
        row["same"] = same
        rows.append(row)
    counts = {
        c: "Int64" for c in _COLUMNS if c[2:] in ("tokens", "tasks_done", "denials", "errors")
    }
    turns = pd.DataFrame(rows, columns=_COLUMNS).astype(counts)  # a run's missing turns are <NA>
    outcomes = pd.DataFrame(
        {a.label: a.outcome, b.label: b.outcome}, index=list(a.outcome), dtype=object
    )
    return Comparison((a.label, b.label), turns, outcomes, diverged)


_COLUMNS = [
    "turn",
    *(
        f"{side}_{name}"
        for side in "ab"
        for name in ("tools", "tokens", "tasks_done", "denials", "errors")
    ),
    "same",
]


def _side(run: object, label: str | None, store: StoreLike | None) -> _Side:
    with read_run(run, store, "compare") as given:
        return _read(label or given.run_id or "run", given.events)


def _read(label: str, events: Iterable[Event]) -> _Side:
    turns: dict[int, _Turn] = {}
    calls: dict[int, list[tuple[str, str]]] = {}  # (the call with its input, its outcome)
    denied: dict[str, list[bool]] = {}  # per tool, the policy decisions its calls await
    texts: dict[int, str] = {}
    tokens = tasks = denials = errors = phases = 0
    outcome: dict[str, Any] = {
        "status": "running",
        "turns": 0,
        "tokens_used": 0,
        "phases_completed": 0,
        "tasks_completed": 0,
        "policy_denials": 0,
        "tool_errors": 0,
        "job": None,
        "deliverables": None,
    }
    for e in map(as_typed, events):
        if is_shadow(e):  # a shadow's decisions changed nothing in the run
            continue
        if isinstance(e, ModelCallEvent):
            tokens = e.tokens_used
            texts[e.turn] = e.text
        elif isinstance(e, ToolCallEvent):
            waiting = denied.get(e.tool)
            was_denied = waiting.pop(0) if waiting else False
            outcome_of_call = "denied" if was_denied else "error" if e.is_error else ""
            call = f"{e.tool}({json.dumps(e.input, sort_keys=True, default=str)})"
            calls.setdefault(e.turn, []).append((call, outcome_of_call))
            errors += e.is_error
        elif isinstance(e, TodoCompletedEvent):
            tasks += 1
        elif isinstance(e, PolicyDecisionEvent):
            denials += e.verdict == "deny"  # a person's answer to an ask is an approval
            denied.setdefault(e.tool, []).append(e.verdict == "deny")
        elif isinstance(e, PhaseTransitionEvent):
            phases += e.todo_kind == "phase" and e.outcome == "complete"
        elif isinstance(e, JobCompleteEvent):
            outcome["job"] = e.summary
            outcome["deliverables"] = ", ".join(e.deliverables)
        elif isinstance(e, RunFinishedEvent):
            outcome["status"] = e.status
        if e.turn > 0:
            done = calls.get(e.turn, [])
            turns[e.turn] = _Turn(
                signature="\n".join(f"{c} {o}".rstrip() for c, o in done)
                if done
                else f"text:{texts.get(e.turn, '')}",
                tools=", ".join(_tool_label(c, o) for c, o in done),
                tokens=tokens,
                tasks_done=tasks,
                denials=denials,
                errors=errors,
            )
    before = _Turn("", "", 0, 0, 0, 0)
    for turn in sorted(turns):
        t = turns[turn]
        step = (
            t.signature,
            t.tokens - before.tokens,
            t.tasks_done - before.tasks_done,
            t.denials - before.denials,
            t.errors - before.errors,
        )
        turns[turn] = before = replace(t, step=step)
    outcome.update(
        status=status_as_read(outcome["status"], job=outcome["job"] is not None),
        turns=max(turns, default=0),
        tokens_used=tokens,
        phases_completed=phases,
        tasks_completed=tasks,
        policy_denials=denials,
        tool_errors=errors,
    )
    return _Side(label, turns, outcome)


def _tool_label(call: str, outcome: str) -> str:
    name = call.split("(", 1)[0]
    return f"{name} ({outcome})" if outcome else name
