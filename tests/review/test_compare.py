"""``gr.compare``: where two runs diverge, how their outcomes differ, and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.display.timeline import describe
from gr_notebook.events import RunResumedEvent, RunUnpausedEvent
from gr_notebook.examples import QUICKSTART


def test_a_fork_that_does_otherwise_diverges_at_its_turn(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.SimulatedModel(), workspace=tmp_path / "ws", store=tmp_path / "s", max_iterations=200
    )
    parent = agent.run_sync(QUICKSTART)
    short = gr.Agent(gr.SimulatedModel(), max_iterations=30)  # a tighter budget from turn 20
    fork = parent.fork(20, short, workspace=tmp_path / "fork")
    assert fork.status == "budget_exhausted"
    comparison = gr.compare(parent, fork, labels=["parent", "tight budget"])
    assert comparison.labels == ("parent", "tight budget")
    assert comparison.diverged_at is not None and comparison.diverged_at >= 20
    turns = comparison.turns
    assert list(turns["turn"]) == list(range(1, parent.turns + 1))
    assert turns.loc[turns["turn"] < 20, "same"].all()
    assert turns["b_tokens"].isna().sum() == parent.turns - fork.turns
    outcomes = comparison.outcomes
    assert outcomes.loc["status", "parent"] == "completed"
    assert outcomes.loc["status", "tight budget"] == "budget_exhausted"
    assert outcomes.loc["turns", "tight budget"] == fork.turns == 30
    assert outcomes.loc["deliverables", "parent"] == "report.md"
    assert "they diverge at turn" in repr(comparison) and "<table" in comparison._repr_html_()
    figure = comparison.plot()
    _tokens, tasks = figure.axes
    assert [line.get_label() for line in tasks.get_lines()][:2] == ["parent", "tight budget"]
    by_id = gr.compare(parent.run_id, fork.run_id, store=tmp_path / "s")
    assert by_id.diverged_at == comparison.diverged_at


def test_a_fork_whose_replayed_call_is_denied_diverges_at_the_fork_turn(tmp_path: Path) -> None:
    # Notebook 07: the reckless agent rewrites notes.md unread at the start of phase 2; the
    # fork replays that turn under ReadBeforeWritePolicy, and the same call is denied there.
    job = "\n".join(
        f"## {part}\n" + "\n".join(f"- {part}: section {i}" for i in range(1, 5))
        for part in ("Gather", "Draft", "Review")
    )
    listed = gr.SequentialDependencyPolicy(dependencies={"job_complete": {"list_files"}})
    weak = gr.Agent(
        gr.SimulatedModel("reckless"),
        workspace=tmp_path / "ws",
        store=tmp_path / "s",
        max_iterations=300,
        policies=[listed],
    )
    parent = weak.run_sync(job)
    calls = parent.tool_calls_df()
    to_notes = calls["input"].map(lambda i: i.get("path")) == "notes.md"
    turn = int(calls[(calls["tool"] == "write_file") & to_notes]["turn"].iloc[1])
    strict = gr.Agent(
        gr.SimulatedModel("reckless"),
        max_iterations=300,
        policies=[listed, gr.ReadBeforeWritePolicy()],
    )
    fork = parent.fork(turn=turn, agent=strict, workspace=tmp_path / "fork")
    comparison = gr.compare(parent, fork, labels=["weak", "strict"])
    assert comparison.diverged_at == turn
    assert comparison.describe().endswith(f"they diverge at turn {turn}")
    rows = comparison.turns.set_index("turn")
    assert rows.loc[: turn - 1, "same"].all()
    row = rows.loc[turn]
    assert not row["same"]
    assert (row["a_tools"], row["b_tools"]) == ("write_file", "write_file (denied)")
    assert (row["a_denials"], row["b_denials"]) == (0, 1)
    assert row["a_tokens"] == row["b_tokens"]  # the same model call, answered otherwise
    counts = rows[["a_tokens", "b_tokens", "a_denials", "b_denials"]]
    assert ".0" not in counts.to_string()  # counts read as counts, with <NA> past a run's end
    assert counts["a_denials"].isna().sum() == fork.turns - parent.turns


def test_a_fork_under_the_same_agent_never_diverges(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.SimulatedModel(), workspace=tmp_path / "ws", store=tmp_path / "s", max_iterations=200
    )
    parent = agent.run_sync(QUICKSTART)
    again = gr.compare(parent, parent.fork(12, workspace=tmp_path / "fork"))
    assert again.diverged_at is None and again.turns["same"].all()
    assert again.describe().endswith("no turn differs")


def test_compare_says_what_it_takes() -> None:
    with pytest.raises(gr.ConfigError, match=r"compare takes a gr\.Run, a run id"):
        gr.compare(3, 4)
    with pytest.raises(gr.ConfigError, match="labels takes two names"):
        gr.compare([], [], labels=["one"])
    same = gr.compare([], [])
    assert same.diverged_at is None and same.turns.empty


def test_the_timeline_tells_a_resume_a_fork_and_a_pause_apart() -> None:
    assert describe(RunUnpausedEvent()) == "Unpaused"
    assert describe(RunResumedEvent()) == "Unpaused"  # an unpause in an older store
    fork = RunResumedEvent(parent_run_id="p1", parent_turn=7, relation="fork")
    assert describe(fork) == "Forked from run p1 at turn 7"
    back = RunResumedEvent(
        parent_run_id="p1", parent_turn=9, relation="resume", kept_aside=["a.md", "b.md"]
    )
    assert (
        describe(back)
        == "Resumed after an interruption of run p1 at turn 9; 2 later files kept aside"
    )
    assert RunUnpausedEvent().to_data() == {}
