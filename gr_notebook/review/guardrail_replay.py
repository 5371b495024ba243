"""Replay any guardrail on recorded runs, with no model call: what a policy would have
denied, a checker refused, a feedback provider said, an intervention setting done. It is the
one door for replays and sweeps, interventions included (``interventions=`` and a sweep's
grid over :class:`~gr_notebook.guardrails.interventions.InterventionConfig` fields).

The real :class:`~gr_notebook.guardrails.runtime.Guardrails` and
:class:`~gr_notebook.guardrails.interventions.InterventionEngine` are driven again along
the record through a :class:`~gr_notebook.review.replay_view.ReplayView`, so a guardrail
decides in a replay as it decides live, and replaying one on a run where it was live gives
the decisions it made, row for row. Guardrails that read the workspace read the files as
they were, rebuilt from the run's checkpoints
(:class:`~gr_notebook.review.replay_workspace.ReplayWorkspace`); where those cannot say
(a run without checkpoints, a file another call changed earlier in the same turn) the row
says "cannot tell".

The trajectory is taken as recorded. Once a replayed guardrail would have acted otherwise
than what happened (the first divergence), the agent would have seen something else and
the record no longer shows what it would have done: later rows are marked
``after_divergence``. To see what happens for real, fork the run where it diverged, with
the guardrail live::

    replay = gr.replay_guardrails(run, policies=[policy])
    where = replay.first_divergence(run)
    if where is not None:
        forked = run.fork(turn=where.turn, agent=gr.Agent(model, policies=[policy]))

``run.fork`` starts from the checkpoint of ``where.turn``, the state as that turn began,
and plays that turn again with the new agent (``gr.fork(run_id, turn, agent)`` for a
stored run).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.events import InterventionCheckEvent, RunStartedEvent
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import ACTIONS, InterventionConfig
from gr_notebook.guardrails.policy import ToolPolicy
from gr_notebook.history.analysis import FRAMES
from gr_notebook.review.backtest_sweep import SweepBacktest, labelled_sweep
from gr_notebook.review.replay_guardrail_set import GuardrailSet, guardrail_set, made_guardrail_set
from gr_notebook.review.replay_sources import RecordedRun, recorded_runs, run_count
from gr_notebook.review.replayer import CANNOT_TELL, Replayer
from gr_notebook.wording import plural

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.display.figures import NotebookFigure
    from gr_notebook.history.store import StoreLike
    from gr_notebook.review.sweep_frame import GuardrailSweep


__all__ = [
    "CANNOT_TELL",
    "COLUMNS",
    "LONG_SWEEP",
    "MAX_SETTINGS",
    "Divergence",
    "GuardrailReplay",
    "replay_guardrails",
    "sweep_guardrails",
]

COLUMNS = [
    "run",
    "turn",
    "seq",
    "point",
    "tool",
    "tool_use_id",
    "kind",
    "guardrail",
    "decision",
    "reason",
    "error",
    "live",
    "differs",
    "after_divergence",
    "full_input",
]
"""The columns of :attr:`GuardrailReplay.df`: one row per recorded tool call, stop attempt
or intervention check, and guardrail. ``kind`` is policy, feedback, checker or
intervention, ``guardrail`` its name, and ``decision`` its verdict in the words every frame
and trace uses (:data:`~gr_notebook.events.guardrails.GUARDRAIL_KINDS`), or ``not asked``
(another guardrail decided first) or ``cannot tell``; ``live`` is what happened live at that
point in the same words; ``full_input`` is False where the call's input is known only
clipped."""


_KIND_COLOURS = {
    "policy": "#c62828",
    "feedback": "#1565c0",
    "checker": "#ef6c00",
    "intervention": "#6a1b9a",
}
"""A replay plot's bar colour for each kind of guardrail."""

# -- the result -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where the replayed guardrails would have acted otherwise than what
    happened: from here on the record no longer shows what the agent would have done."""

    run: str
    turn: int
    seq: int
    point: str
    tool: str | None
    guardrail: str
    decision: str
    live: str
    reason: str | None

    def __str__(self) -> str:
        at = f"{self.point} {self.tool}" if self.tool else self.point
        why = f": {self.reason}" if self.reason else ""
        return (
            f"turn {self.turn}, {at}: {self.guardrail} would {self.decision} where the live "
            f"run had {self.live}{why}"
        )


@dataclass(frozen=True, eq=False)
class GuardrailReplay:
    """What replayed guardrails would have decided on recorded runs (see
    :func:`replay_guardrails`)."""

    df: pd.DataFrame = field(repr=False)
    runs: tuple[str, ...]
    guardrails: tuple[str, ...]
    divergences: Mapping[str, Divergence | None] = field(repr=False)
    checks: Mapping[str, tuple[InterventionCheckEvent, ...]] = field(
        default_factory=dict, repr=False
    )
    """Each run's replayed intervention checks (with ``interventions=``), by its label."""

    def first_divergence(self, run: object) -> Divergence | None:
        """The first point in ``run`` (a run, its id, or its label in a mapping) where the
        replayed guardrails would have acted otherwise than what happened; None if none."""
        key = str(getattr(run, "run_id", run))
        if key not in self.divergences:
            known = ", ".join(self.runs[:5]) + (", ..." if len(self.runs) > 5 else "")
            raise ConfigError(f"run {key!r} was not replayed here; the runs replayed: {known}")
        return self.divergences[key]

    def interventions_df(self) -> pd.DataFrame:
        """The replayed intervention checks in the columns of ``run.interventions_df()``
        after ``run`` (the run's label): every check, fired with its tier or held off by a
        safeguard, with the tracker's figures. Replayed with a run's own settings, a run's
        rows are its live ones."""
        import pandas as pd

        frame = FRAMES["interventions_df"]
        rows = [[run, *row] for run in self.runs for row in frame.rows(self.checks.get(run, ()))]
        return pd.DataFrame(rows, columns=["run", *frame.names])

    def summary(self) -> pd.DataFrame:
        """Counts per run and guardrail: rows, each decision, the rows that differ from
        what happened, and the turn of the run's first divergence."""
        import pandas as pd

        frame = self.df
        if frame.empty:
            return pd.DataFrame(columns=["run", "kind", "guardrail", "rows", "differs"])
        counts = (
            pd.crosstab([frame["run"], frame["kind"], frame["guardrail"]], frame["decision"])
            .rename_axis(columns=None)
            .reset_index()
        )
        grouped = frame.groupby(["run", "kind", "guardrail"], sort=False)
        counts = counts.merge(
            grouped.agg(rows=("decision", "size"), differs=("differs", "sum")).reset_index(),
            on=["run", "kind", "guardrail"],
        )
        counts["first_divergence_turn"] = [
            d.turn if (d := self.divergences.get(r)) is not None else None for r in counts["run"]
        ]
        head = ["run", "kind", "guardrail", "rows"]
        rest = [c for c in counts.columns if c not in head]
        order = {r: i for i, r in enumerate(self.runs)}
        counts = counts.sort_values("run", key=lambda s: s.map(order), kind="stable")
        return counts[head + rest].reset_index(drop=True)

    def plot(self) -> NotebookFigure:
        """Per guardrail, how many of its decisions differ from what happened live, out of
        all it made, coloured by kind: a matplotlib figure that draws itself as a cell's last
        expression."""
        from gr_notebook.display.figures import subplots

        frame = self.df
        grouped = frame.groupby(["kind", "guardrail"], sort=False)["differs"]
        counts = grouped.agg(["sum", "size"]).reset_index()
        figure, axes = subplots(figsize=(6.4, 0.9 + 0.45 * max(len(counts), 1)))
        labels = [f"{g} ({k})" for k, g in zip(counts["kind"], counts["guardrail"], strict=True)]
        rows = range(len(counts))[::-1]  # the first guardrail on top
        seen: set[str] = set()
        for row, kind, differs, size in zip(
            rows, counts["kind"], counts["sum"], counts["size"], strict=True
        ):
            colour = _KIND_COLOURS.get(kind, "#616161")
            axes.barh(row, int(differs), color=colour, label=None if kind in seen else kind)
            axes.annotate(
                f" {int(differs)} of {int(size)}",
                (int(differs), row),
                va="center",
                fontsize=8,
            )
            seen.add(kind)
        axes.set_yticks(list(rows), labels)
        axes.set_xlabel("decisions that differ from the live run")
        axes.set_title(
            f"Replayed on {_count(len(self.runs), 'run')}: what would have gone otherwise",
            fontsize=10,
        )
        axes.margins(x=0.15)
        if seen:
            axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
        return figure

    def __repr__(self) -> str:
        diverged = sum(d is not None for d in self.divergences.values())
        return (
            f"<GuardrailReplay of {', '.join(self.guardrails)} on {_count(len(self.runs), 'run')}:"
            f" {_count(len(self.df), 'decision')}, {int(self.df['differs'].sum())} differ from "
            f"the record, {diverged} of {len(self.runs)} runs diverge>"
        )

    def _repr_html_(self) -> str:
        from html import escape

        head = f"<p><b>{escape(repr(self)[1:-1])}</b></p>"
        return head + self.summary().to_html(index=False, na_rep="")


# -- replaying one run -------------------------------------------------------------------------


def replay_guardrails(
    runs: object,
    *,
    policies: Iterable[ToolPolicy] | None = None,
    feedback_providers: Iterable[FeedbackProviderConfig] | None = None,
    task_completion_checker: object = None,
    interventions: InterventionConfig | None = None,
    store: StoreLike | None = None,
) -> GuardrailReplay:
    """What these guardrails would have decided on recorded runs, with no model call.

    ``runs`` is a run (a Run, a run id, or its events), a list of them, a dict of label →
    run, or an experiment's results; ``store=`` (a Store or its path, default
    ``gr_runs/store.sqlite``) holds the runs given by id. Each guardrail is asked at the
    points it is asked live: a policy before each tool call, the checker at each attempt to
    stop, a feedback provider after each call, the interventions at their checks
    (:meth:`GuardrailReplay.interventions_df` has them in full). A guardrail that raises is
    recorded as what it does live (a policy or a checker refuses, feedback stays silent),
    with the error.
    """
    chosen = guardrail_set(policies, feedback_providers, task_completion_checker, interventions)
    return _replay(recorded_runs(runs, store, "replay_guardrails"), chosen)


def _replay(sources: Iterable[RecordedRun], chosen: GuardrailSet) -> GuardrailReplay:
    import pandas as pd

    rows: list[dict[str, Any]] = []
    divergences: dict[str, Divergence | None] = {}
    checks: dict[str, tuple[InterventionCheckEvent, ...]] = {}
    labels: list[str] = []
    for source in sources:
        if source.label in divergences:
            raise ConfigError(f"run {source.label!r} is given twice; give each run once")
        replayer = Replayer(source, chosen)
        found = replayer.rows()
        divergences[source.label] = _mark(found)
        checks[source.label] = tuple(replayer.checks)
        labels.append(source.label)
        rows += found
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return GuardrailReplay(frame, tuple(labels), chosen.names, divergences, checks)


def _mark(rows: list[dict[str, Any]]) -> Divergence | None:
    """Mark the rows after the run's first divergence; return it."""
    first = next((r for r in rows if r["differs"]), None)
    if first is None:
        return None
    for row in rows:
        row["after_divergence"] = row["seq"] > first["seq"]
    return Divergence(
        run=first["run"],
        turn=first["turn"],
        seq=first["seq"],
        point=first["point"],
        tool=first["tool"],
        guardrail=first["guardrail"],
        decision=first["decision"],
        live=first["live"],
        reason=first["reason"],
    )


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- sweeps --------------------------------------------------------------------------------------

MAX_SETTINGS = 10_000
"""The most settings (combinations of the grid) one sweep makes. Each setting builds its
guardrails and replays every run, about a tenth of a second a replay on a run of 200 calls, so
10,000 settings take a quarter of an hour a run; a grid past this (``range(1000)`` by
``range(1000)``) is refused before anything is made: sweep a coarser grid, then a finer one
around what it finds."""

LONG_SWEEP = 1_000
"""Replays from which a sweep shows a progress bar unless told not to (``progress=``)."""

_SWEEP_COUNTS = [
    "decisions",
    "denials",
    "asks",
    "feedback",
    "refusals",
    "interventions",
    "first_intervention_step",
    "max_tier",
    "stopped",
    "cannot_tell",
    "differs",
    "first_divergence_turn",
]


def sweep_guardrails(
    runs: object,
    *,
    grid: Mapping[str, Iterable[Any]],
    make: Callable[..., object] | InterventionConfig | None = None,
    store: StoreLike | None = None,
    progress: bool | None = None,
    labels: object = None,
) -> GuardrailSweep | SweepBacktest:
    """Replay the guardrails ``make(**params)`` builds for every combination of ``grid``
    (parameter name → values) on every run (as :func:`replay_guardrails` takes them): one
    tidy row per (run, combination), the run's model, the grid values, then the counts.
    ``make`` returns a guardrail (a policy, a ``FeedbackProviderConfig``, a checker, an
    ``InterventionConfig``), a list of them, or a dict of :func:`replay_guardrails` keyword
    arguments. Without ``make`` the grid names ``InterventionConfig`` fields, e.g.
    ``{"grace_period_after_reset": range(5, 26, 5)}``; ``make=`` an ``InterventionConfig``
    is the base those fields change.

    The counts: rows (``decisions``), ``denials``, ``asks``, ``feedback`` blocks,
    ``refusals`` of a stop, ``interventions`` (with the tool call of the first, the highest
    tier, and whether one ``stopped`` the run), ``cannot_tell``, the rows that differ from
    the live run and the turn of the first divergence.

    The frame is a :class:`~gr_notebook.review.sweep_frame.GuardrailSweep`: ``.plot()``
    draws a count (``differs`` unless named, ``.plot("feedback")``) across the grid.

    A grid of more than :data:`MAX_SETTINGS` settings is refused before anything is made. A
    ``tqdm`` bar counts the replays of a sweep of :data:`LONG_SWEEP` or more
    (``progress=True`` always, ``False`` never).

    With ``labels=`` (as :func:`gr.backtest <gr_notebook.review.backtest.backtest>` takes
    them) each setting's guardrails are scored instead of counted: a
    :class:`~gr_notebook.review.backtest_sweep.SweepBacktest` whose ``metrics`` hold one row
    per setting and guardrail (precision, recall, their intervals), ``.best(min_precision=...)``
    the setting with the most recall above the floor, ``.plot()`` precision against recall."""

    if make is None or isinstance(make, InterventionConfig):
        make = _interventions_from(make or InterventionConfig(), grid)
    if not callable(make):
        raise ConfigError(
            "make takes a function: make=lambda **params: gr.MyPolicy(**params), or an "
            "InterventionConfig whose fields the grid names"
        )
    if not isinstance(grid, Mapping):
        raise ConfigError(
            "grid maps make's parameter names to the values to try, e.g. {'n': [1, 2]}"
        )
    names = list(grid)
    values = [list(grid[n]) for n in names]
    if not names or any(not v for v in values):
        raise ConfigError(
            "grid maps make's parameter names to the values to try, e.g. "
            "{'every_n_calls': [5, 10, 20]}; every name needs at least one value"
        )
    settings = math.prod(map(len, values))
    if settings > MAX_SETTINGS:
        axes = " × ".join(f"{len(v):,} {n}" for n, v in zip(names, values, strict=True))
        raise ConfigError(
            f"the grid has {plural(settings, 'setting')} ({axes}); a sweep makes at most "
            f"{MAX_SETTINGS:,}, each replaying every run: sweep a coarser grid first, e.g. "
            "range(0, 1000, 50) rather than range(1000), then a finer one around what it finds"
        )
    replays = settings * run_count(runs, "sweep_guardrails")
    combos = (dict(zip(names, combo, strict=True)) for combo in itertools.product(*values))
    sets = [(combo, made_guardrail_set(make, combo)) for combo in combos]
    bar = _progress_bar(replays, progress)
    if labels is not None:
        try:
            return labelled_sweep(runs, sets, names, labels, store, bar)
        finally:
            if bar is not None:
                bar.close()
    rows = []
    try:
        for source in recorded_runs(runs, store, "sweep_guardrails"):  # read while it is open
            for combo, chosen in sets:
                rows.append(_sweep_row(source, combo, chosen))
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    from gr_notebook.review.sweep_frame import GuardrailSweep

    return GuardrailSweep(rows, columns=["run", "model", *names, *_SWEEP_COUNTS])


def _progress_bar(replays: int, progress: bool | None) -> Any:
    """A ``tqdm.auto`` bar over the replays (a terminal bar, or tqdm's widget in a notebook),
    or None for a short sweep."""
    if progress is False or (progress is None and replays < LONG_SWEEP):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=replays, desc="sweep", unit="replay")


def _interventions_from(
    base: InterventionConfig, grid: Mapping[str, Iterable[Any]]
) -> Callable[..., InterventionConfig]:
    """``make`` for a grid over ``base``'s fields, refused up front if it names another."""
    known = set(InterventionConfig.__dataclass_fields__)
    unknown = [name for name in grid if name not in known] if isinstance(grid, Mapping) else []
    if unknown:
        raise ConfigError(
            f"without make=, grid names InterventionConfig fields, and {unknown[0]!r} is not "
            f"one (they include grace_period_after_reset, consecutive_stuck_tolerance); to "
            "sweep another guardrail, pass make=lambda **params: ..."
        )
    return lambda **params: base.with_(**params)


def _sweep_row(
    source: RecordedRun, combo: Mapping[str, Any], chosen: GuardrailSet
) -> dict[str, Any]:
    """One run replayed with one combination's guardrails, counted."""
    replay = _replay([source], chosen)
    frame = replay.df
    where = replay.divergences[source.label]
    decisions = frame["decision"]
    fired = [c for c in replay.checks[source.label] if c.fired]
    started = next((e for e in source.events if isinstance(e, RunStartedEvent)), None)
    return {
        "run": source.label,
        "model": started.model if started is not None else None,
        **combo,
        "decisions": len(frame),
        "denials": int((decisions == "deny").sum()),
        "asks": int((decisions == "ask").sum()),
        "feedback": int((decisions == "fire").sum()),
        "refusals": int((decisions == "refuse").sum()),
        "interventions": int(decisions.isin(ACTIONS).sum()),
        "first_intervention_step": fired[0].step if fired else None,
        "max_tier": max((c.tier for c in fired), default=0),
        "stopped": any(c.action == "stop" for c in fired),
        "cannot_tell": int((decisions == CANNOT_TELL).sum()),
        "differs": int(frame["differs"].sum()),
        "first_divergence_turn": where.turn if where is not None else None,
    }
