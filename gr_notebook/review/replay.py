"""Counterfactual replay: what other intervention settings would have done to a recorded run.

The intervention engine is driven again over a run's recorded tool calls, with no model
call, so safeguards can be tuned on real trajectories in a notebook. The trajectory is
taken as recorded: an intervention that would have fired cannot change what the agent did
next, so a replay answers "when would it have stepped in", not "what would have happened".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

from gr_notebook.errors import ConfigError
from gr_notebook.events import Event, RewindEvent, RunStartedEvent, ToolCallEvent, as_typed
from gr_notebook.guardrails.interventions import (
    InterventionConfig,
    InterventionEngine,
    replay_steps,
)
from gr_notebook.history.analysis import FRAMES, INTERVENTION_COLUMNS, events_of

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.run import Run

__all__ = ["recorded_steps", "replay_interventions", "sweep_interventions"]

RunLike: TypeAlias = "Run | Iterable[Event]"

_SWEEP_COLUMNS = [
    "run",
    "model",
    "steps",
    "checks",
    "interventions",
    "first_intervention_step",
    "max_tier",
    "stopped",
]


def recorded_steps(
    events: Iterable[Event],
) -> list[tuple[str, Mapping[str, Any], str, bool] | None]:
    """What the live engine was fed: every tool call, and ``None`` for a person's rewind.

    The system's own rewinds are left out: the replayed engine decides its own.
    """
    steps: list[tuple[str, Mapping[str, Any], str, bool] | None] = []
    for e in map(as_typed, events):
        if isinstance(e, ToolCallEvent):
            steps.append((e.tool, e.input or {}, e.result or "", bool(e.is_error)))
        elif isinstance(e, RewindEvent) and e.source == "person":
            steps.append(None)
    return steps


def replay_interventions(
    run_or_events: RunLike,
    config: InterventionConfig | None = None,
    *,
    include_skipped: bool = False,
) -> pd.DataFrame:
    """The interventions ``config`` would have fired on a recorded run, one row each, in
    the columns of ``run.interventions_df()`` (``turn`` is the turn of the checked step).
    ``include_skipped=True`` adds the checks a safeguard held off."""
    import pandas as pd

    events = events_of(run_or_events, "replay_interventions")
    turns = [e.turn for e in events if e.kind == "tool_call"]
    checks = replay_steps(InterventionEngine(config), recorded_steps(events))
    fired = [  # each at the turn of the step it checked
        replace(check.event(), turn=turns[check.step - 1])
        for check in checks
        if check.fired or include_skipped
    ]
    return pd.DataFrame(FRAMES["interventions_df"].rows(fired), columns=INTERVENTION_COLUMNS)


def sweep_interventions(
    runs: Sequence[RunLike] | Mapping[str, RunLike],
    grid: Mapping[str, Iterable[Any]],
    *,
    base: InterventionConfig | None = None,
) -> pd.DataFrame:
    """Replay every run under every combination of ``grid`` (field name → values), e.g.
    ``{"grace_period_after_reset": range(5, 26, 5), "consecutive_stuck_tolerance": range(2, 6)}``.

    One tidy row per (run, combination): the grid values, then what fired. ``run`` is the
    mapping's key when ``runs`` is a mapping, else the run id.
    """
    import pandas as pd

    base = base or InterventionConfig()
    names = list(grid)
    values = [list(grid[n]) for n in names]
    if not names or any(not v for v in values):
        raise ConfigError(
            "grid maps InterventionConfig fields to the values to try, e.g. "
            "{'grace_period_after_reset': [5, 10, 15]}; every field needs at least one value"
        )
    configs = [
        (combo, base.with_(**dict(zip(names, combo, strict=True))))
        for combo in itertools.product(*values)
    ]
    rows: list[dict[str, Any]] = []
    for label, events in _labelled(runs):
        started = next((e for e in map(as_typed, events) if isinstance(e, RunStartedEvent)), None)
        run_id = (started.run_id or label) if started else label
        model = started.model if started else None
        steps = recorded_steps(events)
        tool_steps = sum(s is not None for s in steps)
        for combo, config in configs:
            checks = replay_steps(InterventionEngine(config), steps)
            fired = [c for c in checks if c.fired]
            rows.append(
                {
                    "run": label if isinstance(runs, Mapping) else run_id,
                    "model": model,
                    **dict(zip(names, combo, strict=True)),
                    "steps": tool_steps,
                    "checks": len(checks),
                    "interventions": len(fired),
                    "first_intervention_step": fired[0].step if fired else None,
                    "max_tier": max((c.tier for c in fired), default=0),
                    "stopped": any(c.action == "stop" for c in fired),
                }
            )
    columns = _SWEEP_COLUMNS[:2] + names + _SWEEP_COLUMNS[2:]
    return pd.DataFrame(rows, columns=columns)


def _labelled(runs: object) -> Iterator[tuple[str, list[Event]]]:
    if isinstance(runs, Mapping):
        for label, run in runs.items():
            yield str(label), events_of(run, "sweep_interventions")
        return
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Iterable):
        raise ConfigError("runs takes a list of runs (or a dict of name → run)")
    for index, run in enumerate(runs):
        yield str(getattr(run, "run_id", index)), events_of(run, "sweep_interventions")
