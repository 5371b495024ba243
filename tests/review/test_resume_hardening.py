"""Resume and fork under attack: racing resumers, a fork onto its parent, late files made links.

A run is resumed once, whoever races for it (two processes, or two threads of one); a fork or
a copy never lands in its parent's workspace, nor around it; and a file of the run that a
person replaced by a symlink is a change by hand, as an edit is.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import writes_journal
from gr_notebook.errors import WorkspaceError
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history import lineage
from gr_notebook.review import timetravel
from gr_notebook.workflow.workspace_files import hash_files
from tests.review.test_timetravel import agent_in, files, interrupted


def resumes(store: Path) -> list[lineage.Lineage]:
    with gr.Store(store) as opened:
        return [x for x in lineage.lineage(opened) if x.relation == "resume"]


def run_ids(store: Path) -> set[str]:
    with gr.Store(store) as opened:
        return set(opened.run_ids())


# -- 5: a run is resumed once ---------------------------------------------------------------------

RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import gr_notebook as gr
    from gr_notebook.review import timetravel

    root, run_id, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    checked = timetravel._check_resumable

    def check_then_wait(store, row):  # both pass the check before either records its resume
        checked(store, row)
        (root / f"ready-{me}").touch()
        deadline = time.monotonic() + 30
        while not (root / f"ready-{other}").exists():
            if time.monotonic() > deadline:
                sys.exit("the other process never reached its check")
            time.sleep(0.005)

    timetravel._check_resumable = check_then_wait
    agent = gr.Agent(gr.SimulatedModel(), store=root / "store.sqlite", max_iterations=200)
    try:
        run = gr.resume(run_id, agent, workspace=root / f"copy-{me}", store=root / "store.sqlite")
    except gr.RunError as exc:
        print("refused", exc, flush=True)
    else:
        print("resumed", run.run_id, run.status, flush=True)
    """
)


def test_two_processes_resuming_one_run_onto_two_copies_one_is_refused(tmp_path: Path) -> None:
    # two interpreters start (about a second each, side by side): the race needs processes
    run = interrupted(tmp_path, turn=23)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), run.run_id, me, other],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        outcomes.append(out.strip())
    won = [o for o in outcomes if o.startswith("resumed")]
    lost = [o for o in outcomes if o.startswith("refused")]
    assert len(won) == 1 and len(lost) == 1, outcomes
    _, winner, status = won[0].split()
    assert status == "completed"
    assert f"was already resumed as run {winner}" in lost[0]
    assert [x.run_id for x in resumes(tmp_path / "store.sqlite")] == [winner]
    assert run_ids(tmp_path / "store.sqlite") == {run.run_id, winner}  # the loser left no row


def test_two_threads_resuming_one_run_onto_two_copies_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = interrupted(tmp_path, turn=23)
    both_checked = threading.Barrier(2, timeout=30)
    checked = timetravel._check_resumable

    def check_then_wait(store: gr.Store, row: Any) -> None:
        checked(store, row)
        both_checked.wait()

    monkeypatch.setattr(timetravel, "_check_resumable", check_then_wait)
    outcomes: dict[str, gr.Run | Exception] = {}

    def resume_onto(name: str) -> None:
        agent = agent_in(tmp_path)
        try:
            outcomes[name] = gr.resume(
                run.run_id, agent, workspace=tmp_path / name, store=tmp_path / "store.sqlite"
            )
        except Exception as exc:  # what the other thread's race gave
            outcomes[name] = exc

    threads = [threading.Thread(target=resume_onto, args=(n,)) for n in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    won = [o for o in outcomes.values() if isinstance(o, gr.Run)]
    lost = [o for o in outcomes.values() if not isinstance(o, gr.Run)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert won[0].status == "completed"
    assert isinstance(lost[0], gr.RunError), lost[0]
    assert f"was already resumed as run {won[0].run_id}" in str(lost[0])
    assert [x.run_id for x in resumes(tmp_path / "store.sqlite")] == [won[0].run_id]
    assert run_ids(tmp_path / "store.sqlite") == {run.run_id, won[0].run_id}
    frame = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id")
    assert frame.loc[run.run_id, "status"] == "interrupted"


def test_a_fork_is_not_a_resume_and_a_run_forks_many_times(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    first = gr.fork(run.run_id, 10, workspace=tmp_path / "f1", store=tmp_path / "store.sqlite")
    second = gr.fork(run.run_id, 10, workspace=tmp_path / "f2", store=tmp_path / "store.sqlite")
    assert first.status == second.status == "completed"
    resumed = gr.resume(run.run_id, workspace=tmp_path / "copy", store=tmp_path / "store.sqlite")
    assert resumed.status == "completed"


# -- 6: a fork or a copy never lands in its parent's workspace ----------------------------------


def test_a_fork_into_its_parents_own_workspace_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)  # its files are the checkpoint's: no longer "busy"
    root = run.workspace.root
    before = files(root)
    for where in (root, tmp_path / "ws" / "." / "", tmp_path / "ws" / "tools" / ".."):
        with pytest.raises(WorkspaceError, match=r"is the workspace of run .*its parent"):
            gr.fork(run.run_id, 23, workspace=where, store=tmp_path / "store.sqlite")
    assert files(root) == before
    assert run_ids(tmp_path / "store.sqlite") == {run.run_id}


def test_a_fork_into_its_parents_workspace_through_a_link_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    (tmp_path / "alias").symlink_to(run.workspace.root, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="its parent"):
        gr.fork(run.run_id, 23, workspace=tmp_path / "alias", store=tmp_path / "store.sqlite")


def test_a_fork_inside_its_parents_workspace_or_around_it_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    before = files(root)
    with pytest.raises(WorkspaceError, match=r"inside the workspace of run .*its parent"):
        gr.fork(run.run_id, 10, workspace=root / "forked", store=tmp_path / "store.sqlite")
    assert not (root / "forked").exists()
    with pytest.raises(WorkspaceError, match=r"holds the workspace of run .*its parent"):
        gr.fork(run.run_id, 10, workspace=tmp_path, store=tmp_path / "store.sqlite")
    assert files(root) == before


def test_a_resume_onto_a_copy_inside_the_runs_workspace_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    before = files(root)
    with pytest.raises(WorkspaceError, match=r"inside the workspace of run"):
        gr.resume(run.run_id, workspace=root / "copy", store=tmp_path / "store.sqlite")
    assert not (root / "copy").exists() and files(root) == before
    assert resumes(tmp_path / "store.sqlite") == []


# -- 7: a late file made a link is a change by hand -----------------------------------------------


def late_write(root: Path, run_id: str, *paths: str) -> None:
    """As if the killed turn had noted ``paths`` in its journal after its last checkpoint."""
    with writes_journal(root, run_id).open("a", encoding="utf-8") as journal:
        journal.writelines(f'23\t"{p}"\n' for p in paths)


def test_a_late_file_replaced_by_a_link_outside_is_refused_as_changed_by_hand(
    tmp_path: Path,
) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    outside = tmp_path / "outside.md"
    outside.write_text("not the run's\n", encoding="utf-8")
    late_write(root, run.run_id, "report.md")
    (root / "report.md").symlink_to(outside)
    with pytest.raises(WorkspaceError, match=r"changed by hand .*report\.md") as refused:
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    assert "workspace=" in str(refused.value)  # a copy is offered
    assert (root / "report.md").is_symlink() and outside.read_text() == "not the run's\n"
    resumed = gr.resume(run.run_id, workspace=tmp_path / "copy", store=tmp_path / "store.sqlite")
    assert resumed.status == "completed"
    assert not (resumed.workspace.root / "report.md").is_symlink()


def test_a_file_of_the_checkpoint_replaced_by_a_link_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    late_write(root, run.run_id, "notes.md")  # the run wrote it late, then a person linked it
    (tmp_path / "mine.md").write_text("mine\n", encoding="utf-8")
    (root / "notes.md").unlink()
    (root / "notes.md").symlink_to(tmp_path / "mine.md")
    with pytest.raises(WorkspaceError, match=r"changed by hand .*notes\.md"):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")


def test_a_late_files_folder_replaced_by_a_link_outside_is_refused(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "draft.md").write_text("not the run's\n", encoding="utf-8")
    late_write(root, run.run_id, "out/draft.md")
    (root / "out").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(WorkspaceError, match=r"changed by hand .*out/draft\.md"):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    assert (elsewhere / "draft.md").read_text() == "not the run's\n"


# -- 14: a damaged blob leaves the folder as it was --------------------------------------------


def test_a_damaged_file_blob_leaves_the_copy_as_it_was_and_a_retry_resumes(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    store = tmp_path / "store.sqlite"
    with gr.Store(store) as opened:
        written_last = [*rows.load_checkpoint(opened, run.run_id).files.values()][-1]
    with sqlite3.connect(store) as conn:
        [(kept,)] = conn.execute("SELECT data FROM blobs WHERE digest = ?", (written_last,))
        conn.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"damaged", written_last))
    copy = tmp_path / "copy"
    with pytest.raises(gr.errors.StoreError, match=f"blob {written_last} is damaged"):
        gr.resume(run.run_id, workspace=copy, store=store)
    assert hash_files(copy) == {}  # no file of the checkpoint was written
    assert resumes(store) == [] and run_ids(store) == {run.run_id}
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE blobs SET data = ? WHERE digest = ?", (kept, written_last))
    resumed = gr.resume(run.run_id, workspace=copy, store=store)  # the folder is taken again
    assert resumed.status == "completed"
