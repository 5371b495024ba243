"""Experiments: many runs of many agent variants, at once, compared as data.

``gr.Experiment(agents={...}, jobs={...}, repeats=N).run()`` runs the grid (on this event
loop, a process pool, any ``concurrent.futures.Executor`` or a Dask cluster) and returns
:class:`Results`: one row per run, each run's events one call away, and per-agent rates and
means with confidence intervals.
"""

from gr_notebook.experiments.experiment import Experiment
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.limiter import RateLimiter
from gr_notebook.experiments.progress import Progress, StatusCounts, set_notebook_progress
from gr_notebook.experiments.record import COLUMNS, RunRecord
from gr_notebook.experiments.results import Results

__all__ = [
    "COLUMNS",
    "Experiment",
    "Progress",
    "RateLimiter",
    "Results",
    "RunRecord",
    "RunSpec",
    "StatusCounts",
    "set_notebook_progress",
]
