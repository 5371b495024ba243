"""One row of an experiment's results: what one run of the grid did, as plain values that
cross a process boundary and a JSON line alike."""

from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from gr_notebook.events import (
    CompletionCheckEvent,
    InterventionCheckEvent,
    PolicyDecisionEvent,
    as_typed,
    is_shadow,
)
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.history.store import status_as_read
from gr_notebook.review.lint import lint_guidance

if TYPE_CHECKING:
    from gr_notebook.run import Run

__all__ = ["COLUMNS", "RunRecord", "failed_record", "record_of"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    agent: str
    job: str
    repeat: int
    seed: int
    status: str
    """The run's status (decision 129's table, in docs/decisions/run-status-and-lifecycle.md),
    or ``failed`` for a run that raised before it ended."""
    reason: str | None
    error: str | None
    """What raised, for a run that never finished on its own (with the traceback's last line)."""
    job_done: bool
    """The job is done: the status is ``completed``, which means nothing else."""
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    cost_usd: float = math.nan
    phases_completed: int = 0
    interventions: int = 0
    denials: int = 0
    refused_stops: int = 0
    guidance_conflicts: int = 0
    wall_s: float = 0.0
    run_id: str | None = None
    attempts: int = 1
    worker: str = ""
    workspace: str | None = None
    store: str | None = None
    """The store the run was written to; the experiment merges it into its own."""

    @property
    def spec(self) -> RunSpec:
        return RunSpec(self.agent, self.job, self.repeat, self.seed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """A row from its JSON; one written before ``ended`` existed reads its status in its words.
        Anything else (not an object, a cell named by other than text and whole numbers) is
        a ``TypeError``."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a row is a JSON object, not {type(data).__name__}")
        for name, kind in _IDENTITY.items():
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise TypeError(f"a row's {name} is a {kind.__name__}, not {value!r}")
        known = {f.name for f in fields(cls)}
        row = {k: v for k, v in data.items() if k in known}
        if "status" in row:
            row["status"] = status_as_read(row["status"], job=bool(row.get("job_done")))
        return cls(**row)


_IDENTITY = {"agent": str, "job": str, "repeat": int, "seed": int, "status": str}
"""The fields that name a row's cell and its outcome, with the type each must have."""

COLUMNS = [f.name for f in fields(RunRecord) if f.name != "store"]
"""The DataFrame's columns, in order (the worker's store path is bookkeeping)."""


def record_of(
    spec: RunSpec, run: Run, *, wall_s: float, attempts: int, worker: str, store: str | None
) -> RunRecord:
    """The row of a finished run, read from its events in one pass (and the guidance lint)."""
    interventions = denials = refused = 0
    for event in map(as_typed, run.events):
        if is_shadow(event):  # a shadow's decisions changed nothing: run.shadow_df() has them
            continue
        if isinstance(event, InterventionCheckEvent):
            interventions += event.fired
        elif isinstance(event, PolicyDecisionEvent):
            denials += event.verdict == "deny"
        elif isinstance(event, CompletionCheckEvent):
            refused += event.complete is False
    totals = run.summary()
    cost = totals["cost_usd"]
    return RunRecord(
        agent=spec.agent,
        job=spec.job,
        repeat=spec.repeat,
        seed=spec.seed,
        status=run.status,
        reason=run.reason,
        error=None,
        job_done=run.status == "completed",
        turns=totals["turns"],
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        tokens=totals["tokens_used"],
        cost_usd=math.nan if cost is None else float(cost),
        phases_completed=totals["phases_completed"],
        interventions=interventions,
        denials=denials,
        refused_stops=refused,
        guidance_conflicts=sum(c.mode == "live" for c in lint_guidance(run)),
        wall_s=wall_s,
        run_id=run.run_id,
        attempts=attempts,
        worker=worker,
        workspace=str(run.workspace.root),
        store=store,
    )


def failed_record(
    spec: RunSpec,
    error: BaseException | str,
    *,
    attempts: int,
    worker: str = "",
    wall_s: float = 0.0,
) -> RunRecord:
    """The row of a run that raised (or whose worker died for good): ``failed``, with why."""
    if isinstance(error, BaseException):
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        message = last[:400]
    else:
        message = error
    return RunRecord(
        agent=spec.agent,
        job=spec.job,
        repeat=spec.repeat,
        seed=spec.seed,
        status="failed",
        reason=message,
        error=message,
        job_done=False,
        wall_s=wall_s,
        attempts=attempts,
        worker=worker,
    )
