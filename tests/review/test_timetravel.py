"""Resume an interrupted run and fork a run at a turn: what comes back, what is refused."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import writes_journal
from gr_notebook.errors import WorkspaceError
from gr_notebook.examples import QUICKSTART, quickstart_job
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history import lineage
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.runner import started_by
from gr_notebook.workflow.workspace_files import hash_files

FIXTURES = Path(__file__).parent.parent / "history" / "fixtures"


def agent_in(root: Path, **kwargs: Any) -> gr.Agent:
    root.mkdir(exist_ok=True)
    kwargs.setdefault("store", root / "store.sqlite")
    kwargs.setdefault("max_iterations", 200)
    kwargs.setdefault("workspace", root / "ws")
    return gr.Agent(gr.SimulatedModel(), **kwargs)


def files(root: Path) -> dict[str, str]:
    """The workspace's files by hash, but the summary, which holds the time it was made."""
    return {p: d for p, d in hash_files(root).items() if p != "workspace_summary.md"}


class Interrupt:
    """A model that raises KeyboardInterrupt once, at ``turn``, as Ctrl-C would."""

    def __init__(self, turn: int) -> None:
        self.inner = gr.SimulatedModel()
        self.turn = turn
        self.fired = False

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.turn == self.turn and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return await self.inner.complete(request)


@pytest.fixture
def reference(tmp_path: Path) -> dict[str, str]:
    """The files of the quickstart job run through without a stop."""
    run = agent_in(tmp_path / "ref", store=False).run_sync(QUICKSTART)
    assert run.status == "completed"
    return files(run.workspace.root)


def interrupted(root: Path, turn: int) -> gr.Run:
    agent = agent_in(root)
    agent.model = Interrupt(turn)  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync(QUICKSTART)
    run = gr.current_run()
    assert run is not None and run.status == "interrupted"
    return run


# -- resume ---------------------------------------------------------------------------------------


def test_a_run_interrupted_by_ctrl_c_resumes_to_the_same_files(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    run = interrupted(tmp_path, turn=23)
    resumed = gr.resume(run.run_id, store=tmp_path / "store.sqlite")  # its agent is known here
    assert resumed.run_id != run.run_id  # a linked run, not the same id (decision 231)
    assert resumed.status == "completed" and resumed.turns == 53
    assert files(resumed.workspace.root) == reference
    (event,) = [e for e in resumed.events if e.kind == "run_resumed"]
    assert (event.parent_run_id, event.parent_turn, event.relation) == (run.run_id, 23, "resume")
    # the new run's record is whole: the parent's events up to the checkpoint, then its own
    with gr.Store(tmp_path / "store.sqlite") as store:
        stored = store.events(resumed.run_id)
        assert [e.seq for e in stored] == list(range(len(stored)))
        assert stored[0].kind == "run_started" and stored[-1].kind == "run_finished"
        assert [(x.relation, x.parent_turn) for x in lineage.lineage(store, [resumed.run_id])] == [
            ("resume", 23)
        ]
    frame = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id")
    assert frame.loc[resumed.run_id, "parent_run_id"] == run.run_id
    assert frame.loc[resumed.run_id, "relation"] == "resume"
    assert not frame.loc[run.run_id, "resumable"]  # resumed already


def test_files_written_after_the_checkpoint_are_kept_aside(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    with gr.Store(tmp_path / "store.sqlite") as store:
        turns = rows.checkpoint_turns(store, run.run_id)
    assert turns[-1] == 23
    # as if the killed turn had written a file after its checkpoint, and noted it first
    with writes_journal(root, run.run_id).open("a", encoding="utf-8") as journal:
        journal.write('23\t"late.md"\n23\t"notes.md"\n')
    (root / "late.md").write_text("written after the checkpoint\n", encoding="utf-8")
    notes_then = (root / "notes.md").read_bytes()
    (root / "notes.md").write_text("overwritten after the checkpoint\n", encoding="utf-8")
    resumed = gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    (event,) = [e for e in resumed.events if e.kind == "run_resumed"]
    assert sorted(event.kept_aside) == ["late.md", "notes.md"]
    aside = Path(event.aside)
    assert aside == root / ".gr" / "aside" / resumed.run_id
    assert (aside / "late.md").read_text() == "written after the checkpoint\n"
    assert (aside / "notes.md").read_text() == "overwritten after the checkpoint\n"
    assert not (root / "late.md").exists()
    assert (root / "notes.md").read_bytes().startswith(notes_then[:20])


def test_a_workspace_changed_by_hand_is_refused_with_a_copy_offered(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=23)
    root = run.workspace.root
    (root / "notes.md").write_text("my own notes\n", encoding="utf-8")
    with pytest.raises(WorkspaceError) as refused:
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    message = str(refused.value)
    assert "changed by hand" in message and "notes.md" in message
    assert f"gr.resume({run.run_id!r}, workspace=" in message
    assert (root / "notes.md").read_text() == "my own notes\n"  # left as it is
    copy = tmp_path / "copy"
    resumed = gr.resume(run.run_id, workspace=copy, store=tmp_path / "store.sqlite")
    assert resumed.status == "completed" and resumed.workspace.root == copy.resolve()
    assert (root / "notes.md").read_text() == "my own notes\n"


def test_a_moved_workspace_is_refused_and_resumes_where_it_went(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=15)
    moved = tmp_path / "moved"
    shutil.move(run.workspace.root, moved)
    with pytest.raises(WorkspaceError, match=r"is gone \(moved or deleted\); resume"):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    resumed = gr.resume(run.run_id, workspace=moved, store=tmp_path / "store.sqlite")
    assert resumed.status == "completed" and resumed.workspace.root == moved.resolve()


def test_resume_refuses_what_it_cannot_continue(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    done = agent_in(tmp_path).run_sync(QUICKSTART)
    with pytest.raises(gr.RunError, match=r"completed; there is nothing to resume.*gr.fork"):
        gr.resume(done.run_id, store=store_path)
    with pytest.raises(gr.RunError, match="no run 'nope' in run store"):
        gr.resume("nope", store=store_path)
    short = agent_in(tmp_path, workspace=tmp_path / "short", max_iterations=5).run_sync(QUICKSTART)
    assert short.status == "budget_exhausted"
    with pytest.raises(
        gr.RunError, match=r"is budget_exhausted: its own limits and checks stopped it.*fork"
    ):
        gr.resume(short.run_id, store=store_path)
    run = interrupted(tmp_path / "b", turn=9)
    gr.resume(run.run_id, store=tmp_path / "b" / "store.sqlite")
    with pytest.raises(gr.RunError, match="was already resumed as run"):
        gr.resume(run.run_id, store=tmp_path / "b" / "store.sqlite")


def test_resume_needs_the_agent_in_a_new_process(tmp_path: Path) -> None:
    run = interrupted(tmp_path, turn=9)
    del started_by[run.run_id]  # as after a kernel restart
    with pytest.raises(gr.RunError, match=r"pass it: gr.resume\('.*', agent=my_agent\)"):
        gr.resume(run.run_id, store=tmp_path / "store.sqlite")
    resumed = gr.resume(run.run_id, agent=agent_in(tmp_path), store=tmp_path / "store.sqlite")
    assert resumed.status == "completed"


async def test_a_live_run_is_not_resumed(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, store=tmp_path / "s")
    agent.model = gr.SimulatedModel(latency=0.01)
    run = agent.start(QUICKSTART)
    try:
        while run.turns < 3:
            await asyncio.sleep(0.01)
        with pytest.raises(gr.RunError, match=r"is still live .*stop it first"):
            gr.resume(run.run_id, store=tmp_path / "s")
    finally:
        run.cancel()
        await run.wait()
    resumed = gr.resume(run.run_id, store=tmp_path / "s")  # a stopped run resumes, to its end
    assert resumed.status == "completed"


def test_an_old_store_without_checkpoints_says_so(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store_v0.sqlite", path)
    with gr.Store(path) as store:
        run_id = store.run_ids()[-1]
    with pytest.raises(gr.RunError, match="recorded by an earlier gr_notebook"):
        gr.fork(run_id, 1, agent_in(tmp_path), store=path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = ?", (run_id,))
    with pytest.raises(gr.RunError, match=r"recorded by an earlier gr_notebook.*run the job again"):
        gr.resume(run_id, agent_in(tmp_path), store=path)
    frame = gr.runs_df(path)
    assert not frame["resumable"].any() and (frame["checkpoints"] == 0).all()


def test_an_agent_without_checkpoints_says_so(tmp_path: Path) -> None:
    run = agent_in(tmp_path, checkpoints=False).run_sync(QUICKSTART)
    with pytest.raises(gr.RunError, match=r"has no checkpoints .*checkpoints=False"):
        run.fork(3)


# -- fork -----------------------------------------------------------------------------------------


def test_a_fork_under_the_same_agent_ends_as_its_parent(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    fork = parent.fork(turn=20, workspace=tmp_path / "fork")
    assert fork.status == "completed" and fork.turns == parent.turns
    assert fork.workspace.root == (tmp_path / "fork").resolve()
    assert files(fork.workspace.root) == files(parent.workspace.root) == reference
    comparison = gr.compare(parent, fork)
    assert comparison.diverged_at is None and comparison.turns["same"].all()


def test_a_fork_under_another_agent_keeps_the_turns_before(tmp_path: Path) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    strict = gr.Agent(
        gr.SimulatedModel("reckless"),
        store=False,  # the fork records into its parent's store all the same
        max_iterations=200,
        policies=[gr.ReadBeforeWritePolicy()],
        self_regulation=False,
        interventions=None,
    )
    fork = parent.fork(turn=24, agent=strict, workspace=tmp_path / "fork")
    assert fork.status != "running"

    def calls(run: gr.Run) -> list[tuple[str, str]]:
        return [
            (e.data["tool"], e.data["result"])
            for e in run.events
            if e.turn < 24 and e.kind == "tool_call"
        ]

    assert calls(fork) == calls(parent) != []
    frame = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id")
    assert frame.loc[fork.run_id, "parent_run_id"] == parent.run_id
    assert frame.loc[fork.run_id, "parent_turn"] == 24
    assert frame.loc[fork.run_id, "relation"] == "fork"
    assert frame.loc[fork.run_id, "checkpoints"] > 0
    comparison = gr.compare(parent, fork)
    assert comparison.diverged_at is not None and comparison.diverged_at >= 24
    assert comparison.turns.loc[comparison.turns["turn"] < 24, "same"].all()
    assert list(comparison.outcomes.columns) == [parent.run_id, fork.run_id]


def test_fork_refuses_a_turn_that_does_not_exist_and_a_busy_workspace(tmp_path: Path) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    with pytest.raises(gr.RunError, match="has no turn 99: its checkpoints are of turns 1–53"):
        parent.fork(turn=99)
    with pytest.raises(gr.RunError, match="turn takes a turn number"):
        parent.fork(turn="3")  # type: ignore[arg-type]
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x.md").write_text("mine\n")
    with pytest.raises(WorkspaceError, match="is not empty; a fork starts in a new workspace"):
        parent.fork(turn=3, workspace=busy)
    with pytest.raises(gr.RunError, match=r"agent takes a gr.Agent"):
        parent.fork(turn=3, agent="strict")


def test_fork_a_stored_run_by_id_in_a_new_process(tmp_path: Path) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    del started_by[parent.run_id]
    with pytest.raises(gr.RunError, match=r"pass it: gr.fork"):
        gr.fork(parent.run_id, 10, store=tmp_path / "store.sqlite")
    fork = gr.fork(parent.run_id, 10, agent_in(tmp_path), store=tmp_path / "store.sqlite")
    assert fork.status == "completed"
    assert fork.workspace.root.parent.name == "gr_runs"  # the default: gr_runs/<run id>
    shutil.rmtree(fork.workspace.root.parent)


# -- one behaviour, wherever it is called ------------------------------------------------------


def test_in_a_script_fork_and_resume_return_the_finished_run(tmp_path: Path) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    fork = parent.fork(turn=5, workspace=tmp_path / "fork")
    by_id = gr.fork(parent.run_id, 5, workspace=tmp_path / "by-id", store=parent.store)
    resumed = gr.resume(
        interrupted(tmp_path / "b", 12).run_id, store=tmp_path / "b" / "store.sqlite"
    )
    assert [r.status for r in (fork, by_id, resumed)] == ["completed"] * 3
    with pytest.raises(gr.RunError) as raised:
        parent.fork(turn=5, workspace=tmp_path / "live", wait=False)
    assert str(raised.value) == (
        "run.fork(..., wait=False) needs a running event loop (a Jupyter cell or async code); "
        "in a script use run.fork(...) without wait=False"
    )
    with pytest.raises(gr.RunError, match=r"^gr.resume\(\.\.\., wait=False\) needs a running"):
        gr.resume(parent.run_id, wait=False, store=parent.store)
    assert not (tmp_path / "live").exists()  # refused before anything started


async def test_in_a_running_loop_fork_and_resume_return_the_finished_run_too(
    tmp_path: Path,
) -> None:
    parent = await agent_in(tmp_path).run(QUICKSTART)
    fork = parent.fork(turn=5, workspace=tmp_path / "fork")
    by_id = gr.fork(parent.run_id, 5, workspace=tmp_path / "by-id", store=parent.store)
    assert [r.status for r in (fork, by_id)] == ["completed"] * 2
    assert fork.turns == by_id.turns == parent.turns
    live = parent.fork(turn=5, workspace=tmp_path / "live", wait=False)  # as agent.start
    assert not live.done and live.status == "running"
    assert (await live.wait()).status == "completed" and live.turns == parent.turns


def test_gr_fork_of_a_run_in_hand_is_run_fork(tmp_path: Path) -> None:
    parent = agent_in(tmp_path).run_sync(QUICKSTART)
    with pytest.raises(gr.RunError, match=r"agent takes a gr.Agent, not str"):
        gr.fork(parent, 3, agent="strict")  # type: ignore[arg-type]
    with pytest.raises(gr.RunError, match=r"wait takes True or False, got 'no'"):
        parent.fork(turn=3, wait="no")  # type: ignore[arg-type]
    fork = gr.fork(parent, 5, workspace=tmp_path / "fork")
    assert fork.status == "completed" and fork.turns == parent.turns


def test_the_job_is_the_parents(tmp_path: Path) -> None:
    job = quickstart_job()
    parent = agent_in(tmp_path).run_sync(job.instructions)
    fork = parent.fork(5, workspace=tmp_path / "f")
    assert fork.instructions == parent.instructions == job.instructions


def test_a_run_stopped_mid_turn_keeps_its_journal_and_resumes(tmp_path: Path) -> None:
    """Ctrl-C inside a tool, after the turn wrote a file: the journal stays, and the resume
    sets that file aside rather than calling it a change by hand."""
    ws = tmp_path / "ws"

    def note_then_stop(context: gr.tools.ToolContext, params: Any) -> str:
        context.workspace.write_text("late.md", "written in the stopped turn\n")
        raise KeyboardInterrupt

    stopper = gr.Tool(
        "stopper",
        "Writes late.md, then stops.",
        {"type": "object", "properties": {}},
        note_then_stop,
    )
    model = gr.ScriptedModel([gr.tool_call("list_files"), gr.tool_call("stopper")])
    agent = gr.Agent(model, workspace=ws, store=tmp_path / "s.sqlite", tools=[stopper])
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("Stop in turn 2.")
    run = gr.current_run()
    assert run is not None and run.status == "interrupted"
    assert writes_journal(ws, run.run_id).exists()
    again = gr.Agent(
        gr.ScriptedModel([gr.text("done")]), store=tmp_path / "s.sqlite", tools=[stopper]
    )
    resumed = gr.resume(run.run_id, again, store=tmp_path / "s.sqlite")
    assert resumed.status == "ended"
    (event,) = [e for e in resumed.events if e.kind == "run_resumed"]
    assert event.parent_turn == 2 and list(event.kept_aside) == ["late.md"]
    assert not (ws / "late.md").exists()
