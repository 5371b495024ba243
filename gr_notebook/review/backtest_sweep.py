"""A sweep scored against labels: the metrics of every setting of a grid, the setting with
the most recall that meets a precision floor, and precision against recall drawn."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.review.backtest import (
    METRICS,
    PROBLEM_COLUMNS,
    LabelMatcher,
    kind_of,
    labels_of,
    metrics_row,
    replay_one,
    single_sets,
)
from gr_notebook.review.replay_guardrail_set import GuardrailSet
from gr_notebook.review.replay_sources import recorded_runs

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.store import StoreLike

__all__ = ["Setting", "SweepBacktest", "labelled_sweep"]


@dataclass(frozen=True)
class Setting:
    """One setting of a sweep: the grid's values (``params``, to give ``make``) and the
    metrics of the guardrail it made."""

    params: Mapping[str, Any]
    metrics: Mapping[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        rates = ", ".join(
            f"{k} {self.metrics[k]:.2f}" for k in ("precision", "recall") if k in self.metrics
        )
        return f"<Setting {shown}: {rates}, {self.metrics.get('labelled', 0)} labelled>"


@dataclass(frozen=True, eq=False)
class SweepBacktest:
    """A sweep's settings scored against labels (``gr.sweep_guardrails(..., labels=...)``):
    :attr:`metrics` has one row per setting and guardrail, the grid's values first."""

    metrics: pd.DataFrame
    names: tuple[str, ...]
    """The grid's parameter names."""
    problems: pd.DataFrame = field(repr=False)
    """Labels that name nothing the sweep replayed (as ``Backtest.problems``)."""

    def best(self, *, min_precision: float = 0.0, guardrail: str | None = None) -> Setting:
        """The setting with the highest recall among those whose precision meets
        ``min_precision`` (ties: the higher precision, then the first in the grid); a
        ConfigError saying the best precision reached when none does."""
        if isinstance(min_precision, bool) or not isinstance(min_precision, (int, float)):
            raise ConfigError(f"min_precision is {min_precision!r}; a floor is a rate from 0 to 1")
        if not 0 <= min_precision <= 1:
            raise ConfigError(f"min_precision is {min_precision!r}; a floor is a rate from 0 to 1")
        frame = self.metrics
        if guardrail is not None:
            frame = frame[frame["guardrail"] == guardrail]
        scored = frame[frame["precision"].notna() & frame["recall"].notna()]
        meets = scored[scored["precision"] >= min_precision]
        if meets.empty:
            reached = scored["precision"].max() if not scored.empty else math.nan
            said = (
                "no setting has labels to score it"
                if scored.empty
                else (f"the best precision any setting reaches is {reached:.2f}")
            )
            raise ConfigError(
                f"no setting meets min_precision={min_precision:g}: {said}; widen the grid, "
                "label more points, or lower the floor"
            )
        order = meets.assign(_order=range(len(meets))).sort_values(
            ["recall", "precision", "_order"], ascending=[False, False, True], kind="stable"
        )
        row = order.iloc[0].drop("_order").to_dict()
        return Setting({n: row[n] for n in self.names}, {k: row[k] for k in METRICS})

    def plot(self) -> Any:
        """Precision against recall, one point per setting (labelled with its values), a
        line per guardrail (a matplotlib figure)."""
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(6.5, 4.5))
        for name, group in self.metrics.groupby("guardrail", sort=False):
            group = group.sort_values("recall")
            axes.plot(group["recall"], group["precision"], "o-", label=str(name))
            for row in group.to_dict("records"):
                if math.isnan(row["recall"]) or math.isnan(row["precision"]):
                    continue
                text = ", ".join(f"{row[n]}" for n in self.names)
                axes.annotate(
                    text,
                    (row["recall"], row["precision"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize="x-small",
                )
        axes.set_xlabel("recall")
        axes.set_ylabel("precision")
        axes.set_xlim(-0.02, 1.05)
        axes.set_ylim(-0.02, 1.05)
        axes.set_title(f"precision against recall over {', '.join(self.names)}")
        axes.legend(fontsize="small", loc="lower left")
        figure.tight_layout()
        plt.close(figure)
        return figure

    def __repr__(self) -> str:
        return (
            f"<SweepBacktest of {len(self.metrics)} settings over {', '.join(self.names)}: "
            ".best(min_precision=...) picks one, .plot() draws them>"
        )

    def _repr_html_(self) -> str:
        return self.metrics.to_html(index=False, na_rep="", float_format="{:.2f}".format)


def labelled_sweep(
    runs: object,
    sets: Sequence[tuple[Mapping[str, Any], GuardrailSet]],
    names: Sequence[str],
    labels: object,
    store: StoreLike | None,
    bar: Any = None,
) -> SweepBacktest:
    """Every setting's guardrails replayed on every run and scored against ``labels`` (as
    ``gr.backtest`` takes them): counts kept, not rows."""
    import pandas as pd

    matcher = LabelMatcher(labels_of(labels))
    singles = [(combo, single_sets(chosen)) for combo, chosen in sets]
    counts: list[dict[str, Counter[str]]] = [{n: Counter() for n in s} for _, s in singles]
    errors: list[dict[str, list[str]]] = [{n: [] for n in s} for _, s in singles]
    ran: list[str] = []
    kinds: set[str] = set()
    for source in recorded_runs(runs, store, "sweep_guardrails"):
        ran.append(source.label)
        matcher.read(source)
        for index, (_combo, by_name) in enumerate(singles):
            for name, single in by_name.items():
                kinds.add(kind_of(single))
                found, error = replay_one(source, single)
                if error is not None:
                    errors[index][name].append(f"{source.label}: {error}")
                counts[index][name].update(r["outcome"] for r in matcher.score(source, name, found))
            if bar is not None:
                bar.update(1)
    rows = []
    for index, (combo, by_name) in enumerate(singles):
        for name, single in by_name.items():
            metrics = metrics_row(name, kind_of(single), counts[index][name], errors[index][name])
            rows.append({**combo, **metrics})
    problems = matcher.problems(ran, kinds)
    return SweepBacktest(
        pd.DataFrame(rows, columns=[*names, *METRICS]),
        tuple(names),
        pd.DataFrame(_unique(problems), columns=PROBLEM_COLUMNS),
    )


def _unique(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, kept = set(), []
    for row in rows:
        key = tuple(row.values())
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept
