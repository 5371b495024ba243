"""A store written before events were typed still opens, and reads as it did.

``fixtures/store_v0.sqlite`` holds seven short runs recorded by the code of commit 0ca0f44
(``fixtures/make_store_v0.py``), and ``store_v0_frames.pkl.gz`` the DataFrames that code
built from them.
"""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from gr_notebook.events import EVENT_KINDS, Event, ProgressCheckEvent
from gr_notebook.history import analysis
from gr_notebook.history.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
NEWER_KINDS = frozenset(
    {
        "thinking",
        "allotment_extended",
        "approval_requested",
        "approval_answered",
        "run_unpaused",
        "tool_intent",
        "tool_recovered",
        "parent_calls",
    }
)
"""Kinds the core gained after the fixture was recorded: no old store holds them."""
NEWER_COLUMNS = {
    "interventions_df": ["why", "mode"],
    "policy_df": ["mode", "traceback"],
    "feedback_df": ["mode"],
    "completion_df": ["mode"],
    "tool_calls_df": ["effect", "key", "recovery", "unverified", "parent_made"],
}
"""Columns a frame gained since: derived from the old events, and the old columns unchanged."""
RENAMED_COLUMNS = {"policy_df": {"allowed": "decision", "policy": "guardrail"}}
"""Columns renamed since: the old ``allowed`` reads as the verdict (``allow``, ``deny``)."""
RENAMED_KINDS = {"stuck_checkpoint": "progress_check"}
"""Kinds renamed since: the old rows read as the new kind, in events and in ``kind`` columns."""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A copy: opening a store may write beside it (its WAL), and the fixture stays as is."""
    path = tmp_path / "store_v0.sqlite"
    shutil.copy(FIXTURES / "store_v0.sqlite", path)
    return Store(path)


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, pd.DataFrame]]:
    with gzip.open(FIXTURES / "store_v0_frames.pkl.gz", "rb") as frames:
        loaded: dict[str, dict[str, pd.DataFrame]] = pickle.load(frames)
    for frames_of_run in loaded.values():
        for frame in frames_of_run.values():
            if "kind" in frame.columns:
                frame["kind"] = frame["kind"].replace(RENAMED_KINDS)
    return loaded


def cells(frame: pd.DataFrame) -> list[list[str]]:
    """Every cell as its repr: a list is not a tuple, None is not NaN, 1 is not 1.0."""
    return [[repr(v) for v in frame[c]] for c in frame.columns]


def assert_same(got: pd.DataFrame, want: pd.DataFrame, name: str = "") -> None:
    renamed = RENAMED_COLUMNS.get(name, {})
    if renamed:
        want = want.rename(columns=renamed)
        if "decision" in want.columns:
            verdicts = want["decision"].map({True: "allow", False: "deny"})
            want["decision"] = verdicts.astype(got["decision"].dtype)
    newer = NEWER_COLUMNS.get(name, [])
    assert [c for c in got.columns if c not in want.columns] == newer
    if "mode" in newer:  # every decision of an old store was live
        assert set(got["mode"]) <= {"live"}
    got = got.drop(columns=newer)
    pd.testing.assert_frame_equal(got, want)
    assert list(got.dtypes) == list(want.dtypes)
    assert cells(got) == cells(want)


def test_every_event_of_an_old_store_reads_as_its_kinds_class(store: Store) -> None:
    kinds: set[str] = set()
    for run_id in store.run_ids():
        events = store.events(run_id)
        assert [e.seq for e in events] == list(range(len(events)))
        untyped = [e.kind for e in events if type(e) is Event]
        assert untyped == [], f"{run_id}: read untyped: {untyped}"
        kinds |= {e.kind for e in events}
    # the fixture records every kind the core emitted when it was written
    assert kinds == EVENT_KINDS - NEWER_KINDS


def test_a_renamed_kind_reads_as_the_new_kinds_event(store: Store) -> None:
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute(
            "SELECT run_id, seq, data FROM events WHERE kind = 'stuck_checkpoint'"
        ).fetchall()
    assert rows  # the fixture holds seed 000's check under its old name
    for run_id, seq, data in rows:
        events = store.events(run_id)
        event = events[seq]
        assert type(event) is ProgressCheckEvent and event.kind == "progress_check"
        assert event.prompt == json.loads(data)["prompt"]
        assert event.prompt.startswith("CHECKPOINT: ")  # the words the model read, kept
        assert analysis.events_df(events).kind[seq] == "progress_check"


def test_an_old_store_gives_the_dataframes_it_gave(
    store: Store, expected: dict[str, dict[str, pd.DataFrame]]
) -> None:
    assert sorted(store.run_ids()) == sorted(expected)
    for run_id, frames in expected.items():
        events = store.events(run_id)
        for name, want in frames.items():
            got = getattr(analysis, name)(events)
            try:
                assert_same(got, want, name)
            except AssertionError as exc:
                raise AssertionError(f"{run_id} {name}: {exc}") from None


def test_events_read_from_an_old_store_write_and_read_back_the_same(
    store: Store, tmp_path: Path, expected: dict[str, dict[str, pd.DataFrame]]
) -> None:
    run_id = store.run_ids()[-1]
    events = store.events(run_id)
    with Store(tmp_path / "new.sqlite") as new:
        new.record_run_started(
            run_id, started_at=0.0, model="m", workspace="", instructions="", config={}
        )
        for event in events:
            new.record_event(run_id, event)
        again = new.events(run_id)
    assert again == events
    assert [e.to_data() for e in again] == [e.to_data() for e in events]
    for name, want in expected[run_id].items():
        assert_same(getattr(analysis, name)(again), want, name)


def test_every_event_writes_the_layout_it_was_read_from(store: Store) -> None:
    """A typed event's data is the JSON object the old code wrote: same keys, same order,
    same values, so old and new stores hold one layout."""
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute("SELECT run_id, seq, data FROM events ORDER BY run_id, seq")
        stored = {(run_id, seq): data for run_id, seq, data in rows}
    for run_id in store.run_ids():
        for event in store.events(run_id):
            written = json.loads(json.dumps(event.to_data(), ensure_ascii=False))
            old = json.loads(stored[run_id, event.seq])
            assert list(written.items()) == list(old.items()), (run_id, event.kind)
