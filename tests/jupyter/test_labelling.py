"""The labelling widget, driven through its methods as a click or a key would."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import RichOutput, capture_output

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


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def display_id(output: RichOutput) -> str | None:
    return (output.transient or {}).get("display_id")


def test_in_a_cell_it_lists_each_label_and_leaves_itself_static_when_finished(
    ip: InteractiveShell, run: gr.Run
) -> None:
    """Two outputs: the widget, and the labels given so far, static and updated as each is
    kept (what a notebook saved mid-way shows); Finish leaves the labeller as it stopped."""
    labeller = Labeller(run, tools=["write_file"], who="di")
    with capture_output() as captured:
        ip.user_ns["labeller"] = labeller
        ip.run_cell("labeller")
        widget, listed = captured.outputs
        assert WIDGET_VIEW in widget.data and display_id(widget)
        assert (
            widget.data["text/plain"]
            == f"<Labeller: 0 of {len(labeller.points)} policy points labelled>"
        )
        assert set(listed.data) == {"text/html", "text/plain"} and display_id(listed)
        assert listed.data["text/plain"].startswith("Labels given here by di: none yet")
        first = labeller.current
        assert first is not None
        labeller.set_note("lost <the> notes")
        labeller.act()
        labeller.dont()
        updates = [o for o in captured.outputs if o.update]
        assert [display_id(o) for o in updates] == [display_id(listed)] * 2
        table = updates[-1].data
        assert table["text/plain"].startswith(
            "Labels given here by di: 2 (1 should act, 1 should not)"
        )
        assert (
            f"{first.run}  {first.turn}  {first.seq}  write_file  should act  lost <the> notes"
            in (table["text/plain"])
        )
        assert "lost &lt;the&gt; notes" in table["text/html"] and "gr-labels" in table["text/html"]

        labeller.finish()  # the Finish button
        view, ended = captured.outputs[-2:]
        assert view.update and display_id(view) == display_id(widget)
        assert set(view.data) == {"text/html", "text/plain"}  # no widget view: static
        assert "class='gr-labeller'" in view.data["text/html"]
        assert "Labelling finished: 2 of" in view.data["text/html"]
        assert "It stopped at point 3" in view.data["text/html"]
        assert "the call: write_file" in view.data["text/html"]  # the point it stopped at
        assert view.data["text/plain"].startswith(f"<Labeller: 2 of {len(labeller.points)} policy")
        assert "labelled, finished>" in view.data["text/plain"]
        assert ended.update and display_id(ended) == display_id(listed)
        assert ended.data == labeller.labels_bundle() == table

        shown = len(captured.outputs)
        labeller.act()  # a finished labeller takes no more labels
        labeller.finish()
        assert len(captured.outputs) == shown and len(labeller.given) == 2
        assert labeller.widget.comm is None  # its widgets are closed

        ip.run_cell("labeller")  # shown again: static from the start
        again = captured.outputs[shown:]
        assert [o.data for o in again] == [labeller.static_bundle(), labeller.labels_bundle()]
        assert not any(o.update for o in again)


def test_a_label_on_every_point_finishes_the_labelling(ip: InteractiveShell, run: gr.Run) -> None:
    writes = [e.seq for e in run.events if e.kind == "tool_call" and e.tool == "write_file"]
    points = {"run_id": [run.run_id] * 2, "seq": writes[:2]}
    labeller = Labeller(run, points=points, who="ed")
    with capture_output() as captured:
        ip.user_ns["labeller"] = labeller
        ip.run_cell("labeller")
        labeller.key("n")
        assert not labeller.finished
        labeller.key("y")
    assert labeller.finished
    outputs = captured.outputs
    assert WIDGET_VIEW not in outputs[-2].data and outputs[-2].update
    assert "Labelling finished: 2 of 2 policy points labelled" in outputs[-2].data["text/html"]
    assert outputs[-1].data["text/plain"].startswith("Labels given here by ed: 2 (1 should act")
