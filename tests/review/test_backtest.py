"""``gr.backtest``: guardrails replayed on recorded runs and scored against labels; the gate
that promotes one to production; ``gr.sweep_guardrails(..., labels=...)``."""

from __future__ import annotations

import dataclasses
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.history.labels import Label, save_labels
from gr_notebook.review.backtest import METRICS, Point
from gr_notebook.review.backtest_sweep import SweepBacktest
from tests.review.test_guardrail_replay import Broken

JOB = gr.examples.QUICKSTART
RBW = gr.ReadBeforeWritePolicy()
NAME = "policy read_before_write"


@dataclasses.dataclass(frozen=True)
class DenyWrites:
    """Denies every write: catches each overwrite, and much else."""

    name: str = "deny_writes"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        if tool.name == "write_file":
            return gr.PolicyDecision.deny("no writes")
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        pass


@pytest.fixture(scope="module")
def reckless(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    root = tmp_path_factory.mktemp("backtest")
    agent = gr.Agent(
        "simulated:reckless",
        workspace=root / "ws",
        store=root / "store.sqlite",
        max_iterations=200,
    )
    return agent.run_sync(JOB)


@pytest.fixture(scope="module")
def truth(reckless: gr.Run) -> pd.DataFrame:
    """Labels that agree with the read-before-write policy at every write: it should deny
    exactly where it would."""
    frame = gr.replay_guardrails(reckless, policies=[RBW]).df
    writes = frame[frame["tool"] == "write_file"]
    return pd.DataFrame(
        {
            "run_id": reckless.run_id,
            "seq": writes["seq"],
            "label": writes["decision"] == "deny",
            "kind": "policy",
            "who": "ann",
        }
    )


def test_labels_that_agree_give_perfect_rates_with_intervals(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    result = gr.backtest(reckless, policies=[RBW], labels=truth)
    assert list(result.metrics.columns) == METRICS
    row = result.metrics.set_index("guardrail").loc[NAME]
    positives = int(truth["label"].sum())
    assert positives > 0
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (
        positives,
        0,
        0,
        len(truth) - positives,
    )
    assert row["precision"] == 1.0 and row["recall"] == 1.0 and row["f1"] == 1.0
    assert 0 < row["precision_low"] < 1.0 == row["precision_high"]
    assert row["labelled"] == len(truth) and row["unlabelled"] > 0  # the reads are unlabelled
    assert row["status"] == "ok"
    assert result.mistakes.empty and result.problems.empty and result.conflicts.empty


def test_each_candidate_is_judged_on_its_own_and_mistakes_say_where(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    result = gr.backtest(reckless, policies=[RBW, DenyWrites()], labels=truth)
    metrics = result.metrics.set_index("guardrail")
    strict = metrics.loc["policy deny_writes"]
    assert strict["recall"] == 1.0 and strict["fp"] == (~truth["label"]).sum() > 0
    assert metrics.loc[NAME, "precision"] == 1.0  # not left "not asked" by the other
    mistakes = result.mistakes
    assert set(mistakes["guardrail"]) == {"policy deny_writes"}
    assert set(mistakes["mistake"]) == {"false positive: acted, should not"}
    first = mistakes.iloc[0]
    assert first["run_id"] == reckless.run_id and first["decision"] == "deny"
    assert first["reason"] == "no writes" and first["turn"] >= 1
    fork = reckless.fork(
        turn=int(first["turn"]), agent=gr.Agent("simulated:reckless", policies=[DenyWrites()])
    )
    assert fork.run_id != reckless.run_id  # ready to fork from


def test_a_wrong_label_is_a_mistake_with_its_note(reckless: gr.Run, truth: pd.DataFrame) -> None:
    flipped = truth.copy()
    index = flipped.index[flipped["label"]][0]
    flipped.loc[index, "label"] = False
    flipped["note"] = None
    flipped.loc[index, "note"] = "the file was empty"
    result = gr.backtest(reckless, policies=[RBW], labels=flipped)
    assert list(result.mistakes["note"]) == ["the file was empty"]
    assert result.metrics.loc[0, "fp"] == 1


def test_no_labels_says_so_and_never_divides_by_zero(reckless: gr.Run) -> None:
    empty = pd.DataFrame({"run_id": [], "seq": [], "label": []})
    result = gr.backtest(reckless, policies=[RBW], labels=empty)
    row = result.metrics.iloc[0]
    assert row["status"] == "no labels" and row["labelled"] == 0 and row["tp"] == 0
    assert math.isnan(row["precision"])  # a NaN the status explains
    gate = result.gate(min_precision=0.5)
    assert not gate.passed and "no labels" in gate.reasons[0]
    assert "no labels" in repr(result.gate()) or not result.gate().passed


def test_a_function_labels_each_point_once(reckless: gr.Run) -> None:
    seen: list[Point] = []

    def judge(point: Point) -> bool | None:
        seen.append(point)
        if point.tool != "write_file":
            return None
        return point.input is not None and point.input.get("path") == "notes.md"

    result = gr.backtest(reckless, policies=[RBW, DenyWrites()], labels=judge)
    keys = [(p.run_id, p.seq, p.kind) for p in seen]
    assert len(keys) == len(set(keys))  # asked once per point and kind, whatever the guardrail
    assert all(p.result is not None for p in seen if p.tool is not None)
    assert (result.metrics["labelled"] > 0).all()
    with pytest.raises(ConfigError, match="returned 'yes'"):
        gr.backtest(reckless, policies=[RBW], labels=lambda point: "yes")
    with pytest.raises(ConfigError, match="raised ZeroDivisionError"):
        gr.backtest(reckless, policies=[RBW], labels=lambda point: 1 / 0)


def test_a_guardrail_that_raises_is_an_error_row(reckless: gr.Run, truth: pd.DataFrame) -> None:
    result = gr.backtest(reckless, policies=[Broken(), RBW], labels=truth)
    metrics = result.metrics.set_index("guardrail")
    assert metrics.loc["policy broken", "errors"] > 0
    assert metrics.loc["policy broken", "status"].startswith("error")
    assert metrics.loc["policy broken", "labelled"] == 0
    assert metrics.loc[NAME, "status"] == "ok"
    gate = result.gate(guardrail="policy broken")
    assert not gate.passed and "raised" in gate.reasons[0]


def test_labels_that_fit_nothing_are_reported(reckless: gr.Run, truth: pd.DataFrame) -> None:
    todos = next(e for e in reckless.events if e.kind == "todos_written")
    read = next(e for e in reckless.events if e.kind == "tool_call" and e.tool == "read_file")
    stray = pd.DataFrame(
        {
            "run_id": ["elsewhere", reckless.run_id, reckless.run_id, reckless.run_id],
            "seq": [3, 99_999, todos.seq, read.seq],
            "label": [True, True, False, True],
            "kind": ["", "", "", "checker"],
        }
    )
    result = gr.backtest(reckless, policies=[RBW], labels=pd.concat([truth, stray]))
    problems = list(result.problems["problem"])
    assert len(problems) == 4
    assert "is not among the 1 runs backtested" in problems[0]
    assert "has no event 99999" in problems[1]
    assert "todos_written, not a point a guardrail decides at" in problems[2]
    assert "a checker label, and no checker is backtested" in problems[3]
    assert result.metrics.loc[0, "labelled"] == len(truth)  # the rest still count
    checked = gr.backtest(reckless, task_completion_checker=gr.PlanBasedChecker(), labels=stray)
    assert "no checker decides at event" in list(checked.problems["problem"])[-1]


def test_labels_that_disagree_are_kept_reported_and_left_out_until_settled(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    store = reckless.store
    assert store is not None
    deny = truth[truth["label"]].iloc[0]
    seq = int(deny["seq"])
    save_labels(store, [Label(reckless.run_id, seq, True, "policy", "ann", given_at=1.0)])
    save_labels(store, [Label(reckless.run_id, seq, False, "policy", "bo", given_at=2.0)])
    result = gr.backtest(reckless, policies=[RBW])  # the labels the store keeps
    assert len(result.conflicts) == 1
    assert (
        result.conflicts.loc[0, "labels"] == "ann: should act (policy); bo: should not act (policy)"
    )
    row = result.metrics.iloc[0]
    assert row["conflicts"] == 1 and row["labelled"] == 0
    assert "left out 1 point whose labels disagree" in " ".join(result.gate(min_labels=0).reasons)
    # a person's later label replaces their own earlier one
    save_labels(store, [Label(reckless.run_id, seq, True, "policy", "bo", given_at=3.0)])
    assert gr.backtest(reckless, policies=[RBW]).conflicts.empty
    save_labels(store, [Label(reckless.run_id, seq, False, "policy", "cy", given_at=4.0)])
    save_labels(store, [Label(reckless.run_id, seq, True, "policy", "lead", 5.0, settles=True)])
    settled = gr.backtest(reckless, policies=[RBW])
    assert settled.conflicts.empty and settled.metrics.loc[0, "tp"] == 1
    assert len(store.labels()) == 5  # every label is kept


def test_the_store_loses_and_changes_nothing(reckless: gr.Run, truth: pd.DataFrame) -> None:
    store = reckless.store
    assert store is not None

    def tables() -> dict[str, list[Any]]:
        with sqlite3.connect(store.path) as conn:
            names = [
                r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if r[0] != "labels"
            ]
            return {n: sorted(map(repr, conn.execute(f"SELECT * FROM {n}"))) for n in names}

    before = tables()
    gr.backtest(reckless, policies=[RBW, Broken()], labels=truth)
    gr.sweep_guardrails(reckless, make=lambda on: [RBW], grid={"on": [1, 2]}, labels=truth)
    assert tables() == before


def test_the_gate_passes_with_reasons_and_refuses_a_floor_outside_0_to_1(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    result = gr.backtest(reckless, policies=[RBW, DenyWrites()], labels=truth)
    gate = result.gate(min_precision=0.9, min_recall=0.9, min_labels=3, guardrail=NAME)
    assert gate.passed and bool(gate)
    assert any(
        "precision 1.00 (95% CI" in r and "meets min_precision=0.9" in r for r in gate.reasons
    )
    both = result.gate(min_precision=0.9, min_recall=0.9, min_labels=3)
    assert not both.passed
    assert any(
        r.startswith("policy deny_writes: precision") and "is below min_precision=0.9" in r
        for r in both.reasons
    )
    too_many = result.gate(min_labels=10_000, guardrail=NAME)
    assert not too_many.passed and "fewer than min_labels=10000" in " ".join(too_many.reasons)
    for bad in (1.5, -0.1, float("nan"), True, "0.9"):
        with pytest.raises(ConfigError, match="a floor is a rate from 0 to 1"):
            result.gate(min_precision=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="min_labels"):
        result.gate(min_labels=-1)
    with pytest.raises(ConfigError, match="no guardrail 'policy nope'"):
        result.gate(guardrail="policy nope")


def test_promotion_needs_a_passing_gate_and_every_run_says_what_admitted_it(
    reckless: gr.Run, truth: pd.DataFrame, tmp_path: Path
) -> None:
    result = gr.backtest(reckless, policies=[RBW, DenyWrites()], labels=truth)
    shadowed = gr.Agent(
        "simulated:reckless",
        max_iterations=200,
        shadow=[gr.ReadBeforeWritePolicy()],
        store=tmp_path / "store.sqlite",
        workspace=tmp_path / "ws",
    )
    failed = result.gate(min_precision=0.9)
    with pytest.raises(ConfigError, match="the gate did not pass, so nothing is promoted"):
        failed.promote(shadowed, RBW)
    gate = result.gate(min_precision=0.9, min_recall=0.9, min_labels=3, guardrail=NAME)
    with pytest.raises(ConfigError, match="is not what this gate passed"):
        gate.promote(shadowed, DenyWrites())
    promoted = gate.promote(shadowed)
    config = promoted.config()
    assert config["policies"] == ["read_before_write"] and config["shadow"] is None
    run = promoted.run_sync(JOB)
    started = run.events[0]
    (admitted,) = started.config["admitted"]
    assert admitted["backtest"] == result.id and admitted["guardrail"] == NAME
    assert admitted["labels"] == len(truth) and admitted["precision"] == 1.0
    assert admitted["min_precision"] == 0.9 and admitted["at"].endswith("+00:00")
    assert run.policy_df()["decision"].eq("deny").any()  # live now
    assert shadowed.config()["policies"] == []  # the agent given is unchanged


def test_a_labelled_sweep_finds_the_setting(reckless: gr.Run, truth: pd.DataFrame) -> None:
    def make(strict: bool) -> object:
        return DenyWrites() if strict else gr.ReadBeforeWritePolicy()

    sweep = gr.sweep_guardrails(reckless, make=make, grid={"strict": [True, False]}, labels=truth)
    assert isinstance(sweep, SweepBacktest)
    assert list(sweep.metrics.columns) == ["strict", *METRICS]
    best = sweep.best(min_precision=0.9)
    assert best.params == {"strict": False} and best.metrics["recall"] == 1.0
    assert sweep.best().params == {"strict": False}  # both reach recall 1: the more precise
    with pytest.raises(ConfigError, match="no setting meets min_precision=1"):
        gr.sweep_guardrails(
            reckless, make=lambda strict: DenyWrites(), grid={"strict": [True]}, labels=truth
        ).best(min_precision=1.0)
    with pytest.raises(ConfigError, match="a floor is a rate from 0 to 1"):
        sweep.best(min_precision=2)
    figure = sweep.plot()
    assert figure.axes[0].get_xlabel() == "recall"


def test_plot_draws_the_counts_and_the_rates(reckless: gr.Run, truth: pd.DataFrame) -> None:
    figure = gr.backtest(reckless, policies=[RBW, DenyWrites()], labels=truth).plot()
    counts, rates = figure.axes
    assert counts.get_title() == "confusion counts" and rates.get_title() == "precision and recall"


def test_bad_labels_argument_says_what_to_pass(reckless: gr.Run, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="labels takes a DataFrame or a CSV's path"):
        gr.backtest(reckless, policies=[RBW], labels=42)
    wrong = tmp_path / "labels.csv"
    wrong.write_text("run,seq\nx,1\n")
    with pytest.raises(ConfigError, match="it lacks run_id, label"):
        gr.backtest(reckless, policies=[RBW], labels=wrong)
    with pytest.raises(ConfigError, match="needs a guardrail to replay"):
        gr.backtest(reckless, labels=wrong)


def test_labels_may_name_runs_by_their_label_in_a_dict(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    by_name = truth.assign(run_id="the reckless one")
    result = gr.backtest(
        {"the reckless one": reckless.run_id},
        policies=[RBW],
        labels=by_name,
        store=reckless.store,
    )
    assert result.metrics.loc[0, "labelled"] == len(truth) and result.problems.empty


def test_the_same_backtest_has_the_same_id_in_every_process(
    reckless: gr.Run, truth: pd.DataFrame
) -> None:
    one = gr.backtest(reckless, policies=[gr.ReadBeforeWritePolicy()], labels=truth)
    two = gr.backtest(reckless, policies=[gr.ReadBeforeWritePolicy()], labels=truth)
    other = gr.backtest(reckless, policies=[gr.ReadBeforeWritePolicy()], labels=truth.iloc[1:])
    assert one.id == two.id != other.id and one.id.startswith("bt-")
    code = (
        "from gr_notebook.review.backtest import _stable; import gr_notebook as gr; "
        "print(_stable(gr.ReadBeforeWritePolicy()))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(seen) == 1  # a set's order follows the hash seed; the id does not
