"""Labels: read from a DataFrame or a CSV, kept in the run's store (schema 5), pointed at the
recorded point they name."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.events import (
    CompletionCheckEvent,
    ModelCallEvent,
    PolicyDecisionEvent,
    ToolCallEvent,
    as_typed,
)
from gr_notebook.history.labels import (
    Label,
    decision_points,
    label_decision,
    read_labels,
    save_labels,
    stored_labels,
)
from gr_notebook.history.store import Store

JOB = gr.examples.QUICKSTART


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    """A reckless run with the read-before-write policy and the plan checker in shadow."""
    root = tmp_path_factory.mktemp("labels")
    agent = gr.Agent(
        "simulated:reckless",
        workspace=root / "ws",
        store=root / "store.sqlite",
        max_iterations=200,
        shadow=[gr.ReadBeforeWritePolicy(), gr.PlanBasedChecker()],
    )
    return agent.run_sync(JOB)


def test_a_store_keeps_every_label_with_who_and_when(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.record_run_started(
            "r1", started_at=1.0, model="m", workspace="/w", instructions="i", config={}
        )
        store.record_label("r1", 4, label=True, kind="", who="ann", note="bad", given_at=2.0)
        store.record_label("r1", 4, label=False, kind="policy", who="bo", note=None, given_at=3.0)
    with Store(path) as store:  # they survive a restart
        kept = stored_labels(store)
    assert kept == [
        Label("r1", 4, True, "", "ann", "bad", 2.0, False),
        Label("r1", 4, False, "policy", "bo", None, 3.0, False),
    ]


def test_an_old_store_gains_the_labels_table_and_nothing_else_changes(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with Store(path) as store:
        store.record_run_started(
            "r1", started_at=1.0, model="m", workspace="/w", instructions="i", config={}
        )
    with sqlite3.connect(path) as conn:  # as a store before schema 5 was
        conn.execute("DROP TABLE labels")
        conn.execute("DELETE FROM _migrations WHERE name = 'add_labels'")
        before = list(conn.execute("SELECT * FROM runs"))
    with Store(path) as store:
        assert store.labels() == []
    with sqlite3.connect(path) as conn:
        assert list(conn.execute("SELECT * FROM runs")) == before
        names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert names[-1] == "add_labels"


def test_a_damaged_label_row_is_a_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.record_run_started(
            "r1", started_at=1.0, model="m", workspace="/w", instructions="i", config={}
        )
        store.record_label("r1", 4, label=True, kind="", who="ann", note=None, given_at=2.0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE labels SET seq = 'four'")
    with Store(path) as store, pytest.raises(gr.errors.StoreError, match="a label of run 'r1'"):
        store.labels()


def test_labels_read_from_a_csv_with_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(
        "run_id,seq,label,kind,who,note\n"
        "r1,4,True,policy,ann,overwrote notes\n"
        "r1,9,false,,,\n"
        "r2,3,1,checker,bo,\n"
    )
    labels = read_labels(path, who="me")
    assert labels == [
        Label("r1", 4, True, "policy", "ann", "overwrote notes"),
        Label("r1", 9, False, "", "me", None),
        Label("r2", 3, True, "checker", "bo", None),
    ]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"run": ["r1"], "seq": [1], "label": [True]}), "it lacks run_id"),
        (
            pd.DataFrame({"run_id": ["r1"], "seq": [1], "label": [True], "verdict": ["x"]}),
            "verdict is unknown",
        ),
        (pd.DataFrame({"run_id": ["r1"], "seq": [1], "label": ["maybe"]}), "not a boolean"),
        (pd.DataFrame({"run_id": ["r1"], "seq": [1], "label": [2]}), "not a boolean"),
        (pd.DataFrame({"run_id": ["r1"], "seq": [1.5], "label": [True]}), "seq is 1.5"),
        (
            pd.DataFrame({"run_id": ["r1"], "seq": [1], "label": [True], "kind": ["judge"]}),
            "kind is 'judge'",
        ),
        (pd.DataFrame({"run_id": [None], "seq": [1], "label": [True]}), "run_id is empty"),
    ],
)
def test_bad_labels_are_a_config_error_naming_the_problem(
    frame: pd.DataFrame, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        read_labels(frame)


def test_a_csv_with_the_wrong_columns_names_them(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("run,event,ok\nr1,4,True\n")
    with pytest.raises(ConfigError, match="run, event, ok: it lacks run_id, seq, label"):
        read_labels(path)
    with pytest.raises(ConfigError, match="no labels file"):
        read_labels(tmp_path / "missing.csv")


def test_labels_for_a_run_the_store_lacks_are_refused_whole(shadowed: gr.Run) -> None:
    store = shadowed.store
    assert store is not None
    before = len(store.labels())
    labels = [Label(shadowed.run_id, 3, True), Label("no-such-run", 3, True)]
    with pytest.raises(ConfigError, match="no run 'no-such-run'"):
        save_labels(store, labels)
    assert len(store.labels()) == before


def test_every_decision_points_at_the_call_or_the_stop_it_was_made_on(shadowed: gr.Run) -> None:
    events = [as_typed(e) for e in shadowed.events]
    points = decision_points(events)
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert all(points[c.seq] == (c.seq, "") for c in calls)
    decisions = [e for e in events if isinstance(e, PolicyDecisionEvent)]
    assert decisions  # the shadow policy decided on every write
    for decision in decisions:
        seq, kind = points[decision.seq]
        call = next(c for c in calls if c.seq == seq)
        assert kind == "policy" and call.tool_use_id == decision.tool_use_id
    stops = [e for e in events if isinstance(e, CompletionCheckEvent) and e.stop == "end_turn"]
    for stop in stops:
        seq, kind = points[stop.seq]
        model = next(e for e in events if e.seq == seq)
        assert kind == "checker" and isinstance(model, ModelCallEvent) and model.tool_calls == 0
    assert not any(e.kind == "todos_written" and e.seq in points for e in events)


def test_a_decision_marked_right_or_wrong_labels_what_should_have_happened(
    shadowed: gr.Run,
) -> None:
    deny = next(
        e
        for e in map(as_typed, shadowed.events)
        if isinstance(e, PolicyDecisionEvent) and e.verdict == "deny"
    )
    assert label_decision(deny, right=True, who="ann").label is True
    assert label_decision(deny, right=False, who="ann").label is False
    allow = next(
        e
        for e in map(as_typed, shadowed.events)
        if isinstance(e, PolicyDecisionEvent) and e.verdict == "allow"
    )
    assert label_decision(allow, right=False).label is True  # it should have denied
    call = next(e for e in shadowed.events if e.kind == "tool_call")
    with pytest.raises(ConfigError, match="not a guardrail's decision"):
        label_decision(as_typed(call), right=True)


def test_run_label_keeps_a_label_in_the_runs_store(shadowed: gr.Run) -> None:
    """The dashboard's one-click right/wrong on a shadow decision calls this."""
    store = shadowed.store
    assert store is not None
    shadow = shadowed.shadow_df()
    row = shadow[shadow["kind"] == "policy"].iloc[0]
    kept = shadowed.label(int(row["seq"]), right=False, who="ann", note="the file was new")
    assert kept.kind == "policy" and kept.label is (row["decision"] not in ("deny", "ask"))
    call = next(e for e in shadowed.events if e.kind == "tool_call")
    shadowed.label(call.seq, True, who="bo")
    found = [lab for lab in stored_labels(store) if lab.who in ("ann", "bo")]
    assert {(lab.who, lab.seq) for lab in found} >= {("ann", int(row["seq"])), ("bo", call.seq)}
    assert all(lab.given_at > 0 for lab in found)
    todos = next(e for e in shadowed.events if e.kind == "todos_written")
    with pytest.raises(RunError, match="is not a point a guardrail decides at"):
        shadowed.label(todos.seq, True)
    with pytest.raises(RunError, match="label=True/False for a point, or right="):
        shadowed.label(call.seq)
    with pytest.raises(RunError, match="not True or False"):
        shadowed.label(call.seq, "yes")  # type: ignore[arg-type]
