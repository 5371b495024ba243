"""What a shared page says of a run: every decision beside its call, the todo layer and the
plan as the model saw them, the files each turn changed, where two runs part, and what a
run lacks."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.history.store import Store
from gr_notebook.share.divergence import first_divergence
from gr_notebook.share.run_data import RunSource, run_data
from gr_notebook.share.texts import FILE_CHARS, Texts
from tests.integrations.langchain_kit import langchain_session
from tests.share.runs import HOSTILE, forked_pair, guarded_run, hostile_run


def data_of(run: gr.Run) -> tuple[dict[str, Any], list[str]]:
    texts = Texts()
    source = RunSource(run.run_id, list(run.events), run.store, run.workspace.root)
    return run_data(source, texts), texts.items


def turn(data: dict[str, Any], number: int) -> dict[str, Any]:
    return next(t for t in data["by_turn"] if t["turn"] == number)


def decisions(call: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(d["who"], d["verdict"], d["shadow"]) for d in call["decisions"]]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    return guarded_run(tmp_path_factory.mktemp("guarded"))


def test_each_call_carries_every_live_and_shadow_decision(guarded: gr.Run) -> None:
    data, texts = data_of(guarded)
    [denied] = turn(data, 2)["calls"]
    assert denied["tool"] == "write_file" and '"draft.md"' in texts[denied["input"]]
    assert decisions(denied) == [
        ("read_before_write", "deny", False),
        ("sequential_dependency", "deny", True),
    ]
    assert "read it first" in denied["decisions"][0]["reason"]
    [asked] = turn(data, 4)["calls"]
    assert decisions(asked)[0] == ("approval", "ask", False)
    assert asked["approval"] == {
        "asked": "confirmer",
        "reason": asked["approval"]["reason"],
        "decision": "approve",
        "by": "confirmer",
        "waited": 0.0,
    }
    assert texts[asked["result"]].startswith("Overwrote draft.md")
    refused = [c for c in turn(data, 6)["checks"] if c["verdict"] == "refuse"]
    assert [c["who"] for c in refused] == ["FileOutputChecker (on end_turn)"]
    assert "report.md" in refused[0]["reason"]


def test_the_header_and_timeline_say_how_the_run_went(guarded: gr.Run) -> None:
    data, texts = data_of(guarded)
    assert texts[data["job"]] == "Revise the draft, then write a report."
    assert (data["status"], data["turns"]) == ("completed", 9)
    settings = data["settings"]
    assert settings["live"][:2] == ["policy read_before_write", "policy approval"]
    assert "completion checker FileOutputChecker" in settings["live"]
    assert settings["shadow"] == ["policy sequential_dependency"]
    assert "iterations ≤ 200" in settings["limits"]
    marks = [(m["turn"], m["kind"], m["shadow"]) for m in data["marks"]]
    assert (2, "policy_decision", False) in marks and (2, "policy_decision", True) in marks
    assert (4, "approval_answered", False) in marks
    assert (6, "completion_check", False) in marks
    assert data["missing"] == []


def test_the_todo_layer_is_the_one_the_model_was_shown(guarded: gr.Run) -> None:
    data, texts = data_of(guarded)
    layer = texts[turn(data, 2)["todos"]]
    assert "ACTIVE TODO LIST" in layer and "[ ] 1. Revise the draft      ← CURRENT" in layer
    assert "[x] 1. Revise the draft" in texts[turn(data, 6)["todos"]]
    assert turn(data, 2)["todos"] == turn(data, 3)["todos"]  # the same text is kept once
    context = turn(data, 2)["context"]
    assert [name for name, _ in context["layers"]][1] == "todo layer"
    assert sum(n for _, n in context["layers"]) == context["total"] > 0
    meters = {label: (used, limit) for label, used, limit in turn(data, 2)["meters"]}
    assert meters["iterations"] == (2, 200)


def test_each_turn_names_the_files_it_changed(guarded: gr.Run) -> None:
    data, texts = data_of(guarded)
    assert [p for p, _ in turn(data, 2)["changed"]] == []  # denied: nothing was written
    [(_, text)] = [c for c in turn(data, 4)["changed"] if c[0] == "draft.md"]
    assert texts[text] == "second draft\n"
    files = {f["path"]: f for f in data["files"]}
    assert files["draft.md"]["turns"] == [4] and files["report.md"]["turns"] == [7]
    assert texts[files["report.md"]["text"]] == "# Report\n"


def test_the_plan_is_the_file_as_the_turn_began(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    data, texts = data_of(run)
    assert turn(data, 2)["plan"] is None  # written during turn 2
    assert texts[turn(data, 3)["plan"]].startswith(f"# Plan {HOSTILE}")


def test_a_fork_parts_from_its_parent_where_a_decision_differs(tmp_path: Path) -> None:
    parent, fork = forked_pair(tmp_path)
    texts = Texts()
    one = run_data(RunSource(parent.run_id, list(parent.events), parent.store), texts)
    two = run_data(RunSource(fork.run_id, list(fork.events), fork.store), texts)
    assert two["parent"] == {"id": parent.run_id, "turn": 4, "how": "fork"}
    assert first_divergence(one["by_turn"], two["by_turn"], texts.items) == 4
    assert first_divergence(one["by_turn"], one["by_turn"], texts.items) is None
    shorter = [t for t in two["by_turn"] if t["turn"] < 8]
    assert first_divergence(shorter, [*shorter, turn(two, 8)], texts.items) == 8


def test_a_long_file_is_cut_saying_so() -> None:
    texts = Texts()
    index = texts.add("x" * (FILE_CHARS + 5), limit=FILE_CHARS, what="file")
    assert texts.items[index].endswith("… cut here: 5 more characters of this file")
    assert texts.add("x" * (FILE_CHARS + 5), limit=FILE_CHARS, what="file") == index


def test_a_run_without_a_store_says_what_it_lacks(tmp_path: Path) -> None:
    run = gr.Agent(
        model=gr.ScriptedModel([gr.text("Nothing to do.")]),
        workspace=tmp_path / "ws",
        store=False,
    ).run_sync("Say hello.")
    assert run.store is None
    data, _ = data_of(run)
    assert data["files"] == [] and turn(data, 1)["plan"] is None
    assert any("it had no store" in note for note in data["missing"])


def test_a_run_killed_mid_run_exports_what_it_recorded(guarded: gr.Run, tmp_path: Path) -> None:
    """The store as a SIGKILL leaves it: events up to a point, no ending, status running."""
    killed = tmp_path / "killed.sqlite"
    with Store(killed) as store:
        started = guarded.events[0]
        store.record_run_started(
            "killed-run",
            started_at=started.time,
            model=started["model"],
            workspace=str(guarded.workspace.root),
            instructions="Revise the draft",
            config=started["config"],
        )
        for event in guarded.events:
            if event.turn <= 4 and event.kind != "run_finished":
                store.record_event("killed-run", event)
        data, _ = data_of_stored(store, "killed-run")
    assert data["status"] == "running" and data["turns"] == 4
    assert any("did not finish" in n for n in data["missing"])
    assert any("no checkpoints" in n for n in data["missing"])


def test_a_run_whose_checkpoints_are_gone_still_exports(guarded: gr.Run) -> None:
    path = guarded.store.path if guarded.store else None
    assert path is not None
    copy = path.with_name("copy.sqlite")
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
        dst.execute("DELETE FROM checkpoints")
    with Store(copy, create=False) as store:
        data, _ = data_of_stored(store, guarded.run_id)
    assert data["files"] == [] and data["status"] == "completed"
    assert any("it has no checkpoints" in n for n in data["missing"])


def test_a_failed_run_says_why(tmp_path: Path) -> None:
    async def broken(request: Any) -> Any:
        raise RuntimeError("the provider is down")

    run = gr.Agent(
        gr.FunctionModel(broken), workspace=tmp_path / "ws", store=tmp_path / "s.sqlite"
    ).run_sync("Try.")
    data, _ = data_of(run)
    assert data["status"] == "failed" and "the provider is down" in data["reason"]


async def test_a_langchain_session_exports_without_a_todo_layer(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    agent = gr.Agent(
        workspace=ws, store=tmp_path / "s.sqlite", policies=[gr.ReadBeforeWritePolicy()]
    )
    (ws / "data.md").write_text("old\n")
    script = [gr.tool_call("write_file", path="data.md", content="new\n"), gr.text("Done.")]
    session = await langchain_session(agent, script, ws)
    data, _ = data_of(session.run)
    assert data["settings"]["harness"] == "langchain"
    [call] = turn(data, 1)["calls"]
    assert decisions(call) == [("read_before_write", "deny", False)]
    assert any("langchain session runs its own loop" in n for n in data["missing"])
    assert all(t["todos"] is None for t in data["by_turn"])


def data_of_stored(store: Store, run_id: str) -> tuple[dict[str, Any], list[str]]:
    row = next(r for r in store.runs() if r["run_id"] == run_id)
    texts = Texts()
    source = RunSource(run_id, store.events(run_id), store, None, "", row["status"])
    return run_data(source, texts), texts.items
