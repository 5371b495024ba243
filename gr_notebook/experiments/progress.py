"""How an experiment shows its progress: a bar, and a count by status for each agent.

:class:`Progress` is the extension point (three methods). In a terminal the default is a
``tqdm`` bar whose postfix counts the statuses; in a notebook the facade registers the
widget of :mod:`gr_notebook.jupyter.experiment_progress` (a bar over a live table of
agents by status), which this layer never imports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from gr_notebook.errors import ConfigError
from gr_notebook.experiments.record import RunRecord

__all__ = [
    "NullProgress",
    "Progress",
    "ProgressLike",
    "StatusCounts",
    "TqdmProgress",
    "choose_progress",
    "set_notebook_progress",
]


@runtime_checkable
class Progress(Protocol):
    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        """The experiment begins: ``total`` runs, of which ``done`` finished before (resumed)."""

    def update(self, record: RunRecord) -> None:
        """One run finished (or failed)."""

    def close(self) -> None: ...


ProgressLike = Progress | bool | None


class StatusCounts:
    """Runs finished so far, by agent and status: what the live table shows."""

    def __init__(self, agents: Sequence[str] = ()) -> None:
        self.by_agent: dict[str, Counter[str]] = {a: Counter() for a in agents}
        self.done = 0

    def add(self, record: RunRecord) -> None:
        self.by_agent.setdefault(record.agent, Counter())[record.status] += 1
        self.done += 1

    def statuses(self) -> list[str]:
        return sorted(self.totals(), key=lambda s: (s != "completed", s))

    def totals(self) -> Mapping[str, int]:
        seen = Counter[str]()
        for counts in self.by_agent.values():
            seen.update(counts)
        return seen

    def line(self) -> str:
        """``completed 12 · failed 1``, for a terminal bar's postfix."""
        totals = self.totals()
        return " · ".join(f"{s} {totals[s]}" for s in self.statuses())


class NullProgress:
    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        pass

    def update(self, record: RunRecord) -> None:
        pass

    def close(self) -> None:
        pass


class TqdmProgress:
    """A ``tqdm.auto`` bar (a terminal bar, or tqdm's own widget in a notebook)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.counts = StatusCounts()
        self._bar: Any = None

    def start(self, total: int, agents: Sequence[str], done: Sequence[RunRecord]) -> None:
        from tqdm.auto import tqdm

        self.counts = StatusCounts(agents)
        for record in done:
            self.counts.add(record)
        self._bar = tqdm(
            total=total,
            initial=len(done),
            desc="runs",
            unit="run",
            **self.options,
        )

    def update(self, record: RunRecord) -> None:
        self.counts.add(record)
        if self._bar is not None:
            self._bar.set_postfix_str(self.counts.line(), refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


_notebook: Callable[[], Progress | None] | None = None


def set_notebook_progress(factory: Callable[[], Progress | None]) -> None:
    """The facade's hook: ``factory`` returns a notebook widget, or None outside a kernel."""
    global _notebook
    _notebook = factory


def choose_progress(progress: ProgressLike) -> Progress:
    """``True`` (the default): the notebook's widget in a kernel, else a tqdm bar;
    ``False``/``None``: nothing; or any object with ``start``, ``update`` and ``close``."""
    if progress is None or progress is False:
        return NullProgress()
    if progress is True:
        widget = _notebook() if _notebook is not None else None
        return widget if widget is not None else TqdmProgress()
    if isinstance(progress, Progress):
        return progress
    raise ConfigError(
        "progress takes True (a bar, or a live table in a notebook), False, or an object "
        f"with start(total, agents, done), update(record) and close(); got "
        f"{type(progress).__name__}"
    )
