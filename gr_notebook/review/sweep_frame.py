"""What :func:`~gr_notebook.review.guardrail_replay.sweep_guardrails` returns: a pandas
DataFrame, one tidy row per (run, setting), whose ``plot()`` draws a count across the grid.

It imports pandas: a sweep imports this module when it runs, never ``import gr_notebook``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import pandas as pd
from pandas.plotting import PlotAccessor

from gr_notebook.display.figures import NotebookFigure, subplots
from gr_notebook.errors import ConfigError

__all__ = ["GuardrailSweep", "SweepPlot"]

FIRST_COUNT = "decisions"
"""The first count column: the grid's columns stand between ``model`` and it."""
MAX_LINES = 12
"""Lines one plot draws (one per setting of the grid's other names); more are left out and
the title says how many."""


class GuardrailSweep(pd.DataFrame):
    """A sweep's rows: ``run, model``, the grid's names, then the counts. It is a DataFrame
    in every way but ``plot``: ``sweep.plot()`` (or ``sweep.plot("feedback")``) draws that
    count, the mean per run, across the grid; ``sweep.plot(x=..., y=...)`` and
    ``sweep.plot.bar(...)`` are pandas' own. Frames made from it are plain DataFrames."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @property
    def grid(self) -> list[str]:
        """The names the grid varied, in its order."""
        columns = list(self.columns)
        return columns[2 : columns.index(FIRST_COUNT)] if FIRST_COUNT in columns else []

    @property
    def plot(self) -> SweepPlot:  # type: ignore[override]
        return SweepPlot(self)


class SweepPlot:
    """``sweep.plot``: bare or with a count's name, that count across the grid; with pandas'
    arguments, or as ``sweep.plot.bar(...)``, pandas' plot of the frame."""

    def __init__(self, sweep: GuardrailSweep) -> None:
        self._sweep = sweep

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) + len(kwargs) <= 1 and set(kwargs) <= {"metric"}:
            metric = args[0] if args else kwargs.get("metric", "differs")
            return plot_sweep(self._sweep, metric)
        return PlotAccessor(pd.DataFrame(self._sweep))(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(PlotAccessor(pd.DataFrame(self._sweep)), name)


def plot_sweep(sweep: GuardrailSweep, metric: str = "differs") -> NotebookFigure:
    """``metric``, the mean over the runs, against the grid's first name: one line per
    setting of the others (at most :data:`MAX_LINES`)."""
    names = sweep.grid
    counts = [c for c in sweep.columns[2 + len(names) :] if _numeric(sweep[c])]
    if metric not in counts:
        raise ConfigError(
            f"plot draws one of the sweep's counts, e.g. sweep.plot('feedback'); {metric!r} "
            f"is not one: {', '.join(map(str, counts))}"
        )
    frame = pd.DataFrame(sweep[[*names, metric]])
    frame[metric] = frame[metric].astype(float)  # a flag (stopped) counts as 0 or 1
    for name in names:
        if not all(isinstance(v, Hashable) for v in frame[name]):
            frame[name] = frame[name].map(repr)
    x_name, others = names[0], names[1:]
    xs = list(dict.fromkeys(frame[x_name]))
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    position = {v: (v if numeric else i) for i, v in enumerate(xs)}
    lines = frame.groupby(others, sort=False, dropna=False) if others else [((), frame)]
    figure, axes = subplots(figsize=(6.4, 3.4))
    drawn = 0
    for key, part in lines:
        if drawn == MAX_LINES:
            break
        means = part.groupby(x_name, sort=False)[metric].mean()
        points = sorted((position[v], mean) for v, mean in means.items())
        label = _label(others, key) if others else None
        axes.plot([p for p, _ in points], [m for _, m in points], "o-", label=label)
        drawn += 1
    settings = len(lines) if others else 1
    more = f" (the first {MAX_LINES} of {settings} settings)" if settings > drawn else ""
    axes.set_title(f"{metric}, mean per run, across the grid{more}", fontsize=10)
    axes.set_xlabel(x_name)
    axes.set_ylabel(metric)
    if not numeric:
        axes.set_xticks(range(len(xs)), [str(v) for v in xs])
    if others:
        axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def _label(names: Sequence[str], key: Any) -> str:
    values = key if isinstance(key, tuple) else (key,)
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


def _numeric(column: pd.Series) -> bool:
    """A count: numbers or flags, with None where a run has none (no divergence)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return True
    return bool(column.map(lambda v: v is None or isinstance(v, int | float)).all())
