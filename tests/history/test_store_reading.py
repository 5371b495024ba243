"""A store that is read must exist: reading a path where there is none is a StoreError naming
it, and creates nothing (no folder, no empty store). A run's ``store=`` still creates one."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.history.store import reading


def test_compare_from_a_mistyped_store_path_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "store.sqlite"
    with pytest.raises(gr.errors.StoreError, match=f"there is no run store at {typo}"):
        gr.compare("run-a", "run-b", store=typo)
    assert not (tmp_path / "typo").exists()


def test_runs_df_from_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "store.sqlite"
    with pytest.raises(gr.errors.StoreError, match=f"there is no run store at {missing}"):
        gr.runs_df(missing)
    assert list(tmp_path.iterdir()) == []


def test_the_default_store_is_not_created_by_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert gr.runs_df().empty  # nothing has run here yet: no runs, not a typo
    with pytest.raises(
        gr.errors.StoreError, match=r"Pass store= the path your agent recorded into"
    ):
        gr.compare("run-a", "run-b")
    assert list(tmp_path.iterdir()) == []


def test_a_store_opened_to_read_is_never_created(tmp_path: Path) -> None:
    with pytest.raises(gr.errors.StoreError, match="no run store"):
        gr.Store(tmp_path / "s.sqlite", create=False)
    with pytest.raises(gr.errors.StoreError, match="no run store"), reading(tmp_path / "s.sqlite"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_budget_suggest_reads_a_missing_store_as_no_history_and_creates_nothing(
    tmp_path: Path,
) -> None:
    suggestion = gr.Budget.suggest("file_edit", store=tmp_path / "none" / "s.sqlite")
    assert suggestion.source == "table"
    assert list(tmp_path.iterdir()) == []


def test_a_runs_store_is_still_created_and_then_read(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    agent = gr.Agent(gr.SimulatedModel(), store=store, workspace=tmp_path / "ws")
    run = agent.run_sync("Write hello.md saying hello.")
    assert store.is_file()
    assert list(gr.runs_df(store).run_id) == [run.run_id]
    comparison = gr.compare(run.run_id, run.run_id, store=store)
    assert comparison.diverged_at is None


def test_an_experiments_results_read_a_moved_store_as_an_error(tmp_path: Path) -> None:
    from gr_notebook.experiments.results import Results

    results = Results([], grid=[], store=tmp_path / "exp" / "store.sqlite")
    with pytest.raises(gr.errors.StoreError, match="there is no run store at"):
        results.events("run-a")
    assert list(tmp_path.iterdir()) == []
