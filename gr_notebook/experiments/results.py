"""What an experiment returns: one row per run as a DataFrame, each run's events one call
away, and per-agent rates and means with confidence intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.events import Event
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.record import COLUMNS, RunRecord
from gr_notebook.experiments.stats import checked_confidence, mean_interval, wilson_interval
from gr_notebook.history.store import Store

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["MEANS", "Results"]

MEANS = (
    "turns",
    "tokens",
    "cost_usd",
    "interventions",
    "denials",
    "refused_stops",
    "guidance_conflicts",
    "wall_s",
)
"""The per-run figures :meth:`Results.summary` averages (with an interval for each)."""


class Results:
    """The rows of the runs that finished, in grid order; ``missing`` are the cells that did
    not (the experiment was stopped first): ``experiment.run()`` again runs only those."""

    def __init__(
        self, records: Sequence[RunRecord], *, grid: Sequence[RunSpec], store: Path
    ) -> None:
        order = {spec.key: i for i, spec in enumerate(grid)}
        mine = (r for r in records if r.spec.key in order)  # a shrunk grid leaves rows behind
        self.records = tuple(sorted(mine, key=lambda r: order[r.spec.key]))
        done = {r.spec.key for r in self.records}
        self.missing = tuple(spec for spec in grid if spec.key not in done)
        self.store = store

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def df(self) -> pd.DataFrame:
        """One row per run: agent, job, repeat, seed, status, reason, error, job_done,
        turns, tokens and cost, phases completed, interventions fired, policy denials,
        refused stops, guidance conflicts, wall time, run id, attempts, worker, workspace."""
        import pandas as pd

        return pd.DataFrame(
            [[getattr(r, c) for c in COLUMNS] for r in self.records], columns=COLUMNS
        )

    def events(self, run: str | int | RunRecord) -> list[Event]:
        """The events of one run, from the experiment's store: by run id, by row number in
        :attr:`df`, or by its record."""
        run_id = self._run_id(run)
        with Store(self.store, create=False) as store:  # read: a moved store is not made again
            return store.events(run_id)

    def events_df(self, run: str | int | RunRecord) -> pd.DataFrame:
        from gr_notebook.history.analysis import events_df

        return events_df(self.events(run))

    def summary(
        self, confidence: float = 0.95, *, by: str | Sequence[str] = "agent"
    ) -> pd.DataFrame:
        """Per agent (or per ``by`` columns): runs, the rate of jobs done and of failures with
        Wilson intervals, and the mean of each of :data:`MEANS` with a Student-t interval
        (``_low`` and ``_high`` columns). Means count the runs that ran: a run that raised
        before it finished counts in the rates only."""
        import pandas as pd

        confidence = checked_confidence(confidence)
        keys = [by] if isinstance(by, str) else list(by)
        frame = self.df
        unknown = [k for k in keys if k not in frame.columns]
        if unknown:
            raise ConfigError(
                f"summary(by=...) takes columns of results.df, e.g. 'agent' or "
                f"['agent', 'job']; not {', '.join(map(repr, unknown))}"
            )
        rows = []
        for group, part in frame.groupby(keys, sort=False):
            values = group if isinstance(group, tuple) else (group,)
            row: dict[str, Any] = dict(zip(keys, values, strict=True))
            n = len(part)
            row["runs"] = n
            for rate in ("job_done", "failed"):
                hits = (
                    int((part["status"] == "failed").sum())
                    if rate == "failed"
                    else int(part["job_done"].sum())
                )
                low, high = wilson_interval(hits, n, confidence)
                row[rate], row[f"{rate}_low"], row[f"{rate}_high"] = hits / n, low, high
            ran = part[part["error"].isna()]
            for column in MEANS:
                mean, low, high = mean_interval(ran[column].tolist(), confidence)
                row[column], row[f"{column}_low"], row[f"{column}_high"] = mean, low, high
            rows.append(row)
        return pd.DataFrame(rows)

    def plot(
        self,
        metric: str = "job_done",
        *,
        by_job: bool = False,
        confidence: float = 0.95,
        ax: Axes | None = None,
    ) -> Axes:
        """Each agent's rate or mean of ``metric`` with its interval as error bars; with
        ``by_job``, one group of bars per job. The legend sits right of the axes, clear of
        the bars. Without ``ax``, the axes are those of a new figure that draws itself as a
        cell's last expression (pyplot does not hold it: ``plt.show()`` leaves it out)."""

        if metric not in ("job_done", "failed", *MEANS):
            raise ConfigError(
                f"plot() takes one of job_done, failed, {', '.join(MEANS)}; not {metric!r}"
            )
        confidence = checked_confidence(confidence)
        keys = ["job", "agent"] if by_job else ["agent"]
        table = self.summary(confidence, by=keys)
        if ax is None:
            from gr_notebook.display.figures import subplots

            _, ax = subplots(figsize=(7, 3.5))
        agents = list(dict.fromkeys(table["agent"]))
        groups = list(dict.fromkeys(table["job"])) if by_job else [""]
        width = 0.8 / len(agents)
        for i, agent in enumerate(agents):
            mine = table[table["agent"] == agent]
            if by_job:
                mine = mine.set_index("job").reindex(groups)
            mean = mine[metric].to_numpy(dtype=float)
            low = mean - mine[f"{metric}_low"].to_numpy(dtype=float)
            high = mine[f"{metric}_high"].to_numpy(dtype=float) - mean
            where = [g + (i - (len(agents) - 1) / 2) * width for g in range(len(groups))]
            errors = [
                [0 if math.isnan(v) else v for v in low],
                [0 if math.isnan(v) else v for v in high],
            ]
            ax.bar(where, mean, width * 0.9, yerr=errors, capsize=3, label=agent)
        ax.set_xticks(range(len(groups)), groups if by_job else [""])
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} by agent ({confidence:.0%} intervals)")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
        return ax

    def _run_id(self, run: str | int | RunRecord) -> str:
        if isinstance(run, RunRecord):
            run_id = run.run_id
        elif isinstance(run, bool) or not isinstance(run, (int, str)):
            raise ConfigError(f"events() takes a run id, a row number or a record; got {run!r}")
        elif isinstance(run, int):
            if not -len(self.records) <= run < len(self.records):
                raise ConfigError(
                    f"row {run} is out of range: the results have {len(self.records)} rows"
                )
            run_id = self.records[run].run_id
        else:
            run_id = run
        if run_id is None:
            raise ConfigError(
                "that run failed before it started, so it has no events; its "
                "row's error column says why"
            )
        return run_id

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        statuses: dict[str, int] = {}
        for r in self.records:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        counts = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
        missing = f", {len(self.missing)} not run" if self.missing else ""
        return f"<Results: {len(self.records)} runs ({counts}){missing}>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<p>{escape(repr(self))}</p>" + self.df.to_html(index=False, max_rows=40)
