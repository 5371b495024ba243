"""The labelling widget, driven through its methods as a click or a key would."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.history.labels import stored_labels
from gr_notebook.jupyter.labelling import Labeller


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    root = tmp_path_factory.mktemp("labelling")
    agent = gr.Agent(
        "simulated:reckless", workspace=root / "ws", store=root / "store.sqlite", max_iterations=200
    )
    return agent.run_sync(gr.examples.QUICKSTART)


def test_it_walks_the_writes_and_keeps_each_label_as_it_goes(run: gr.Run) -> None:
    labeller = Labeller(run, tools=["write_file"], who="ann")
    writes = [e for e in run.events if e.kind == "tool_call" and e.tool == "write_file"]
    assert [p.seq for p in labeller.points] == [e.seq for e in writes]
    first = labeller.current
    assert first is not None and first.tool == "write_file" and first.input
    assert "the call: write_file" in labeller._body.value
    assert "the todo list" in labeller._body.value
    labeller.set_note("overwrote the notes")
    labeller.act()
    labeller.key("n")
    labeller.key("s")
    labeller.back()
    labeller.dont()  # the second point again: the person changed their mind
    store = run.store
    assert store is not None
    kept = [lab for lab in stored_labels(store) if lab.who == "ann"]
    assert [(lab.seq, lab.label, lab.note) for lab in kept] == [
        (writes[0].seq, True, "overwrote the notes"),
        (writes[1].seq, False, None),
        (writes[2].seq, False, None),
    ]
    assert all(lab.kind == "policy" for lab in kept)
    assert repr(labeller) == f"<Labeller: 3 of {len(writes)} policy points labelled>"


def test_the_keys_box_takes_typed_keys(run: gr.Run) -> None:
    labeller = Labeller(run, tools=["write_file"], who="bo")
    labeller._keys.value = "y"  # as JupyterLab sends a keystroke
    assert labeller._keys.value == "" and labeller.index == 1
    labeller._keys.value = "x"  # not a key: ignored
    assert labeller.index == 1


def test_stops_for_a_checker_and_a_bad_kind(run: gr.Run, tmp_path: Path) -> None:
    stops = Labeller(run, kind="checker", who="cy")
    assert stops.points and all(p.what == "stop" or p.tool == "job_complete" for p in stops.points)
    with pytest.raises(ConfigError, match="kind is 'judge'"):
        Labeller(run, kind="judge")
    with pytest.raises(ConfigError, match="no store to keep its labels"):
        Labeller(list(run.events))
