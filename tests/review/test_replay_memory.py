"""What a replay keeps in memory: a stored run read once while its record is unchanged, and
files written out only when a guardrail reads them, with the stamps they would have had."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.events import Event
from gr_notebook.history.checkpoint_store import Checkpoint
from gr_notebook.history.store import Store
from gr_notebook.review import replay_sources
from gr_notebook.review.replay_sources import recorded_runs
from gr_notebook.review.replay_workspace import ReplayWorkspace


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("memory")
    agent = gr.Agent(
        "simulated:reckless", workspace=root / "ws", store=root / "store.sqlite", max_iterations=60
    )
    run = agent.run_sync(gr.examples.QUICKSTART)
    return run.run_id, root / "store.sqlite"


def test_a_stored_run_is_read_once_until_its_record_changes(stored: tuple[str, Path]) -> None:
    run_id, path = stored
    replay_sources.forget_runs()
    (first,) = list(recorded_runs([run_id], path, "test"))
    (again,) = list(recorded_runs([run_id], path, "test"))
    assert again.memo is first.memo and again.events is first.events
    first_replay = gr.replay_guardrails(run_id, policies=[gr.ReadBeforeWritePolicy()], store=path)
    with Store(path) as store:  # the run gains an event: it is read again
        last = first.events[-1]
        store.record_event(
            run_id, Event(last.seq + 1, "note", last.turn, last.phase, last.time, {})
        )
    (changed,) = list(recorded_runs([run_id], path, "test"))
    assert changed.memo is not first.memo and len(changed.events) == len(first.events) + 1
    second = gr.replay_guardrails(run_id, policies=[gr.ReadBeforeWritePolicy()], store=path)
    assert second.df.equals(first_replay.df)


def _checkpoint(files: dict[str, str], contents: dict[str, bytes]) -> Checkpoint:
    return Checkpoint("r", 1, 0, 0.0, {}, [], files, contents.__getitem__)


def test_files_are_written_when_read_with_the_stamp_of_their_write() -> None:
    contents = {"h1": b"one", "h2": b"two", "h3": b"three!"}
    with ReplayWorkspace() as space:
        root = Path(space.workspace.root)
        space.begin_turn(_checkpoint({"a.md": "h1", "d/b.md": "h2"}, contents), None)
        assert not (root / "a.md").exists()  # nothing read yet, nothing written
        space.materialize(["d/b.md"])
        assert (root / "d" / "b.md").read_bytes() == b"two" and not (root / "a.md").exists()
        stamp_b = os.stat(root / "d" / "b.md").st_mtime_ns
        space.begin_turn(_checkpoint({"a.md": "h3", "d/b.md": "h2"}, contents), None)
        space.materialize(None)
        assert (root / "a.md").read_bytes() == b"three!"
        assert os.stat(root / "d" / "b.md").st_mtime_ns == stamp_b  # unchanged, same stamp
        assert os.stat(root / "a.md").st_mtime_ns > stamp_b  # written later
        space.begin_turn(_checkpoint({"d/b.md": "h2"}, contents), None)
        space.materialize(["a.md"])
        assert not (root / "a.md").exists()  # gone from the record, gone from the folder
