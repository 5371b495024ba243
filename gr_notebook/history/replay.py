"""Counterfactual replay: what other intervention settings would have done to a recorded run.

The intervention engine is driven again over a run's recorded tool calls, with no model
call, so safeguards can be tuned on real trajectories in a notebook. The trajectory is
taken as recorded: an intervention that would have fired cannot change what the agent did
next, so a replay answers "when would it have stepped in", not "what would have happened".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from gr_notebook.errors import ConfigError
from gr_notebook.events import Event
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionConfig,
    InterventionEngine,
    replay_steps,
)
from gr_notebook.history.analysis import INTERVENTION_COLUMNS

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
    for e in events:
        if e.kind == "tool_call":
            data = e.data
            steps.append(
                (
                    str(data.get("tool", "")),
                    data.get("input") or {},
                    str(data.get("result") or ""),
                    bool(data.get("is_error")),
                )
            )
        elif e.kind == "rewind" and e.data.get("source") == "person":
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

    events = _events_of(run_or_events)
    turns = [e.turn for e in events if e.kind == "tool_call"]
    checks = replay_steps(InterventionEngine(config), recorded_steps(events))
    rows = [
        {**_row(check), "turn": turns[check.step - 1]}
        for check in checks
        if check.fired or include_skipped
    ]
    return pd.DataFrame(rows, columns=INTERVENTION_COLUMNS)


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
        started = next((e for e in events if e.kind == "run_started"), None)
        run_id = str(started.data.get("run_id", label)) if started else label
        model = started.data.get("model") if started else None
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


def _row(check: InterventionCheck) -> dict[str, Any]:
    data = check.to_event()
    return {c: data.get(c) for c in INTERVENTION_COLUMNS}


def _events_of(run: RunLike) -> list[Event]:
    events = getattr(run, "events", run)
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise ConfigError(
            f"expected a Run or its events (run.events, store.events(run_id)), got "
            f"{type(run).__name__}"
        )
    out = list(events)
    if out and not all(isinstance(e, Event) for e in out):
        raise ConfigError("expected a Run or a sequence of gr_notebook events")
    return out


def _labelled(runs: object) -> Iterator[tuple[str, list[Event]]]:
    if isinstance(runs, Mapping):
        for label, run in runs.items():
            yield str(label), _events_of(run)
        return
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Iterable):
        raise ConfigError("runs takes a list of runs (or a dict of name → run)")
    for index, run in enumerate(runs):
        yield str(getattr(run, "run_id", index)), _events_of(run)
