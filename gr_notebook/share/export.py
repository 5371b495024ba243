"""Runs as one HTML file that opens anywhere: ``run.to_html(path)``,
:func:`export_html` for runs, run ids in a store or an experiment's results, and
``python -m gr_notebook export``. :func:`view` shows the same page in a cell's output.

The page needs no server and no install, and loads nothing (see
:mod:`gr_notebook.share.page`). Two runs where one was forked or resumed from the other, or
any two exported together, get a side-by-side view with their first divergence marked; an
experiment's runs get its index table.
"""

from __future__ import annotations

import html
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError, RunError
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, StoreLike
from gr_notebook.limits import usd
from gr_notebook.run import Run
from gr_notebook.share.divergence import first_divergence
from gr_notebook.share.page import page
from gr_notebook.share.run_data import RunSource, run_data
from gr_notebook.share.texts import Texts

if TYPE_CHECKING:
    from gr_notebook.experiments.results import Results

__all__ = ["SharedView", "export_html", "page_of", "view"]


def _version() -> str:
    try:
        return metadata.version("gr-notebook")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True, slots=True)
class _Index:
    title: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]


def export_html(
    runs: object,
    path: str | os.PathLike[str],
    *,
    store: StoreLike | None = None,
    title: str | None = None,
) -> Path:
    """Write ``runs`` to ``path`` as one self-contained HTML file; returns the path.

    ``runs`` is a ``gr.Run``, a run id (read from ``store``, default gr_runs/store.sqlite),
    a list of either, or an experiment's ``Results``; a run named twice is drawn once."""
    target = _target(path)
    text = page_of(runs, store=store, title=title)
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _target(path: object) -> Path:
    """The file to write, checked before a run is read: a mistake costs no export."""
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"name the HTML file to write, e.g. run.html, not {path!r}")
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"the page is HTML: name the file with .html, e.g. {target.stem}.html")
    if not target.parent.is_dir():
        raise ConfigError(f"there is no folder {str(target.parent)!r} to write {target.name} in")
    if target.is_dir():
        raise ConfigError(
            f"{str(target)!r} is a folder: name a file in it, e.g. {target / 'run.html'}"
        )
    return target


def page_of(runs: object, *, store: StoreLike | None = None, title: str | None = None) -> str:
    """The page :func:`export_html` writes, as text."""
    return _built(runs, store, title)[0]


def _built(runs: object, store: StoreLike | None, title: str | None) -> tuple[str, str]:
    """The page and its title."""
    if title is not None and not isinstance(title, str):
        raise ConfigError(f"title= is the page's title, a str, not {type(title).__name__}")
    sources, index, opened = _sources(runs, store)
    try:
        texts = Texts()
        data = [run_data(source, texts) for source in sources]
    finally:
        if opened is not None:
            opened.close()
    by_id = {run["id"]: i for i, run in enumerate(data)}
    pairs = [
        (by_id[run["parent"]["id"]], i)
        for i, run in enumerate(data)
        if run["parent"] and run["parent"]["id"] in by_id
    ]
    if not pairs and len(data) == 2:
        pairs = [(0, 1)]
    payload = {
        "version": _version(),
        "made": time.strftime("%Y-%m-%d %H:%M", time.localtime()),
        "texts": texts.items,
        "runs": data,
        "pairs": [
            {
                "a": a,
                "b": b,
                "divergence": first_divergence(data[a]["by_turn"], data[b]["by_turn"], texts.items),
            }
            for a, b in pairs
        ],
        "index": _index_data(index or _plain_index(data, texts), by_id)
        if len(data) > 1 or index
        else None,
    }
    title = title or _title(data)
    return page(payload, title), title


@dataclass(frozen=True)
class SharedView:
    """The page in a cell's output: a frame of its own, so the page's script and style
    touch nothing of the notebook's, and an nbconvert HTML of the notebook carries it."""

    html: str
    title: str
    height: int = 760

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" sandbox="allow-scripts" '
            f'style="width:100%;height:{self.height}px;border:1px solid #d1d9e0;'
            f'border-radius:6px" title="gr_notebook run viewer">{html.escape(repr(self))}</iframe>'
        )  # the text inside shows where a sanitizer drops the frame (an untrusted notebook)

    def __repr__(self) -> str:
        return f"Run viewer: {self.title} (a page in a frame; gr.share.export_html writes it)"


def view(runs: object, *, store: StoreLike | None = None, height: int = 760) -> SharedView:
    """The page of ``runs`` (as :func:`export_html` takes them), shown in a cell."""
    if isinstance(height, bool) or not isinstance(height, int) or height <= 0:
        # it is written into the notebook's own markup, outside the frame's sandbox
        raise ConfigError(f"height= is the frame's height in pixels, e.g. 760, not {height!r}")
    return SharedView(*_built(runs, store, None), height)


def _sources(
    runs: object, store: StoreLike | None
) -> tuple[list[RunSource], _Index | None, Store | None]:
    """The runs to draw, an experiment's index, and a store opened here (to close)."""
    from gr_notebook.experiments.results import Results

    index = None
    if isinstance(runs, Results):
        index = _experiment_index(runs)
        store = runs.store
        runs = [r.run_id for r in runs.records if r.run_id]
    items: Sequence[object] = [runs] if isinstance(runs, Run | str) else _listed(runs)
    if not items:
        raise ConfigError(
            "there is no run to export: pass a run, run ids or an experiment's results"
        )
    opened: Store | None = None
    sources: list[RunSource] = []
    for item in items:
        if not isinstance(item, Run | str):
            raise ConfigError(
                f"export_html takes gr.Run objects or run ids, not {type(item).__name__}"
            )
        if _id(item) in (source.run_id for source in sources):
            continue  # named twice (a run and its id): one run, not a run beside itself
        if isinstance(item, Run):
            sources.append(_live_source(item))
            continue
        if opened is None:
            opened = store if isinstance(store, Store) else _open(store)
        sources.append(_stored_source(opened, item))
    return sources, index, None if isinstance(store, Store) else opened


def _id(item: Run | str) -> str:
    return item.run_id if isinstance(item, Run) else item


def _listed(runs: object) -> list[object]:
    if isinstance(runs, Iterable) and not isinstance(runs, bytes | Mapping):
        return list(runs)
    raise ConfigError(
        f"export_html takes a run, run ids, a list of them or an experiment's results, "
        f"not {type(runs).__name__}"
    )


def _open(store: object) -> Store:
    if store is not None and not isinstance(store, str | os.PathLike):
        raise ConfigError(f"store= is a gr.Store or the path of one, not {type(store).__name__}")
    return Store(Path(store) if store is not None else DEFAULT_STORE_PATH, create=False)


def _live_source(run: Run) -> RunSource:
    return RunSource(
        run.run_id,
        list(run.events),
        run.store,
        run.workspace.root,
        run.instructions,
        run.status,
    )


def _stored_source(store: Store, run_id: str) -> RunSource:
    row = next((r for r in store.runs() if r["run_id"] == run_id), None)
    if row is None:
        known = ", ".join(store.run_ids()[:5]) or "none"
        raise RunError(f"no run {run_id!r} in run store {store.path}; its runs include: {known}")
    workspace = Path(row["workspace"]) if row["workspace"] else None
    return RunSource(
        run_id, store.events(run_id), store, workspace, row["instructions"] or "", row["status"]
    )


def _experiment_index(results: Results) -> _Index:
    rows = [
        {
            "cells": [r.agent, r.job, r.repeat, r.status, r.turns, _cost(r.cost_usd)],
            "run_id": r.run_id,
        }
        for r in results.records
    ]
    columns = ("variant", "job", "repeat", "status", "turns", "cost")
    return _Index("Experiment", columns, rows)


def _plain_index(data: list[dict[str, Any]], texts: Texts) -> _Index:
    rows = [
        {
            "cells": [
                run["id"],
                _first_line(texts.items[run["job"]]),
                run["status"],
                run["turns"],
                _cost(run["cost"]),
            ],
            "run_id": run["id"],
        }
        for run in data
    ]
    return _Index("Runs", ("run", "job", "status", "turns", "cost"), rows)


def _index_data(index: _Index, by_id: dict[str, int]) -> dict[str, Any]:
    return {
        "title": index.title,
        "columns": list(index.columns),
        "rows": [{"cells": row["cells"], "run": by_id.get(row["run_id"])} for row in index.rows],
    }


def _cost(value: float | None) -> str:
    return "not priced" if value is None or not math.isfinite(value) else usd(value)


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _title(data: list[dict[str, Any]]) -> str:
    return f"Run {data[0]['id']}" if len(data) == 1 else f"{len(data)} runs"
