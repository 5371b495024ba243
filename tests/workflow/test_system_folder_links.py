"""The system's folder (``.gr/``) is never reached through a link.

A ``.gr`` that is a symlink to a folder outside the workspace would take the run's lock, its
writes journal and the files a resume sets aside out of the workspace with it. Every reader
and writer of the folder refuses it instead, with a WorkspaceError that says what to do.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import writes_journal, written_since
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock, live_owner
from gr_notebook.workflow.workspace_restore import restore_files
from tests.review.test_timetravel import interrupted

REFUSED = r"\.gr.* is a symlink"


def linked_system_folder(root: Path, outside: Path) -> None:
    """Make ``root/.gr`` a link to ``outside``, keeping what the real folder held."""
    root.mkdir(exist_ok=True)
    if (root / ".gr").is_dir():
        shutil.copytree(root / ".gr", outside, dirs_exist_ok=True)
        shutil.rmtree(root / ".gr")
    outside.mkdir(exist_ok=True)
    (root / ".gr").symlink_to(outside, target_is_directory=True)


def test_the_lock_is_not_taken_through_a_link(tmp_path: Path) -> None:
    linked_system_folder(tmp_path / "ws", tmp_path / "outside")
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED) as refused:
        WorkspaceLock.acquire(tmp_path / "ws", LockOwner.this_process("r1", 0.0))
    assert "remove the link" in str(refused.value)
    assert list((tmp_path / "outside").iterdir()) == []


def test_the_lock_file_itself_is_not_opened_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".gr").mkdir(parents=True)
    (tmp_path / "elsewhere.lock").write_text("", encoding="utf-8")
    (tmp_path / "ws" / ".gr" / "run.lock").symlink_to(tmp_path / "elsewhere.lock")
    with pytest.raises(gr.errors.WorkspaceError, match=r"run\.lock.* is a symlink"):
        WorkspaceLock.acquire(tmp_path / "ws", LockOwner.this_process("r1", 0.0))
    assert (tmp_path / "elsewhere.lock").read_text(encoding="utf-8") == ""


def test_a_live_owner_is_not_read_through_a_link(tmp_path: Path) -> None:
    linked_system_folder(tmp_path / "ws", tmp_path / "outside")
    (tmp_path / "outside" / "run.lock").write_text("{}", encoding="utf-8")
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED):
        live_owner(tmp_path / "ws")
    assert live_owner(tmp_path / "nowhere") is None  # no workspace: nobody holds it


def test_a_run_in_a_workspace_whose_system_folder_is_a_link_is_refused(tmp_path: Path) -> None:
    linked_system_folder(tmp_path / "ws", tmp_path / "outside")
    agent = gr.Agent(
        gr.ScriptedModel([gr.text("done")]),
        workspace=tmp_path / "ws",
        store=tmp_path / "store.sqlite",
    )
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED):
        agent.run_sync("Do it.")
    assert list((tmp_path / "outside").iterdir()) == []


def test_the_journal_is_not_read_through_a_link(tmp_path: Path) -> None:
    linked_system_folder(tmp_path / "ws", tmp_path / "outside")
    (tmp_path / "outside" / "writes-r1").write_text('1\t"a.md"\n', encoding="utf-8")
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED):
        written_since(tmp_path / "ws", "r1", 0)


def test_a_journal_is_not_removed_through_a_link_swapped_in_mid_run(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()

    def swap(context: gr.tools.ToolContext, params: Any) -> str:
        run_id = gr.current_run().run_id  # type: ignore[union-attr]
        (outside / f"writes-{run_id}").write_text("someone else's\n", encoding="utf-8")
        (ws / ".gr").rename(tmp_path / "real-gr")
        (ws / ".gr").symlink_to(outside, target_is_directory=True)
        context.workspace.write_text("after.md", "written after the swap\n")
        return "swapped"

    swapper = gr.Tool("swap", "Swaps .gr.", {"type": "object", "properties": {}}, swap)
    model = gr.ScriptedModel([gr.tool_call("swap"), gr.text("done")])
    agent = gr.Agent(model, workspace=ws, store=tmp_path / "s.sqlite", tools=[swapper])
    run = agent.run_sync("Swap the system folder.")
    assert run.status == "ended"
    (left,) = outside.iterdir()
    assert left.read_text(encoding="utf-8") == "someone else's\n"


def test_a_resume_in_place_never_moves_files_through_a_linked_system_folder(
    tmp_path: Path,
) -> None:
    run = interrupted(tmp_path, turn=23)
    root, outside = run.workspace.root, tmp_path / "outside"
    with writes_journal(root, run.run_id).open("a", encoding="utf-8") as journal:
        journal.write('23\t"late.md"\n')
    (root / "late.md").write_text("written after the checkpoint\n", encoding="utf-8")
    linked_system_folder(root, outside)
    held = sorted(p.name for p in outside.iterdir())
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    assert (root / "late.md").read_text() == "written after the checkpoint\n"
    assert sorted(p.name for p in outside.iterdir()) == held  # no lock, no aside


def test_restore_never_sets_files_aside_through_a_link(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    linked_system_folder(root, outside)
    (root / "extra.md").write_text("keep me here\n", encoding="utf-8")
    with pytest.raises(gr.errors.WorkspaceError, match=REFUSED):
        restore_files(root, {}, lambda digest: b"", aside=root / ".gr" / "aside" / "r2")
    assert (root / "extra.md").read_text() == "keep me here\n"
    assert list(outside.iterdir()) == []


def test_restore_never_writes_through_a_linked_folder(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "out").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(gr.errors.WorkspaceError, match=r"'out'.* symlink"):
        restore_files(root, {"out/a.md": "h"}, lambda digest: b"x", aside=root / ".gr" / "a")
    assert list(elsewhere.iterdir()) == []


def test_the_run_list_still_reads_when_a_running_runs_system_folder_is_a_link(
    tmp_path: Path,
) -> None:
    with gr.Store(tmp_path / "store.sqlite") as store:
        store.record_run_started(
            "r1",
            started_at=0.0,
            model="m",
            workspace=str(tmp_path / "ws"),
            instructions="Do it.",
            config={},
        )
    linked_system_folder(tmp_path / "ws", tmp_path / "outside")
    frame = gr.runs_df(tmp_path / "store.sqlite")  # who holds it cannot be told: as stored
    assert frame.status.tolist() == ["running"]
