"""One live run per workspace, across processes; a dead owner's run reads as interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.workflow.workspace_lock import LockOwner, WorkspaceLock, live_owner

HOLDER = textwrap.dedent(
    """
    import asyncio, sys, gr_notebook as gr

    async def hang(request):
        await asyncio.Event().wait()  # a model call that never returns

    async def main():
        agent = gr.Agent(hang, workspace=sys.argv[1], store=sys.argv[2])
        run = agent.start("Hold the workspace.")
        print(run.run_id, flush=True)
        await run.wait()

    asyncio.run(main())
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Another process with a live run in ``tmp_path / 'ws'``; yields it and its run id."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "ws"), str(tmp_path / "store.sqlite")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        assert run_id, "the holding process did not start its run"
        yield proc, run_id
    finally:
        proc.kill()
        proc.wait(10)


def test_a_workspace_in_use_by_another_process_refuses_a_second_run(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, run_id = holder
    agent = gr.Agent(gr.ScriptedModel([gr.text("done")]), workspace=tmp_path / "ws", store=False)
    with pytest.raises(gr.RunError, match=rf"in use by run {run_id} \(process {proc.pid} on "):
        agent.run_sync("Do it.")
    assert gr.runs_df(tmp_path / "store.sqlite").status.tolist() == ["running"]


def test_a_killed_owner_leaves_a_stale_lock_and_an_interrupted_run(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, run_id = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert live_owner(tmp_path / "ws") is None  # the dead owner's lock is stale
    frame = gr.runs_df(tmp_path / "store.sqlite")
    assert frame.set_index("run_id").status[run_id] == "interrupted"
    agent = gr.Agent(
        gr.ScriptedModel([gr.text("done")]),
        workspace=tmp_path / "ws",
        store=tmp_path / "store.sqlite",
    )
    assert agent.run_sync("Do it.").status == "ended"
    statuses = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id").status
    assert statuses[run_id] == "interrupted"  # still dead while the workspace has a new owner


def test_the_lock_records_its_owner_and_is_released(tmp_path: Path) -> None:
    owner = LockOwner(run_id="r1", pid=os.getpid(), host="here", started_at=1.0)
    lock = WorkspaceLock.acquire(tmp_path, owner)
    assert live_owner(tmp_path) == owner
    with pytest.raises(gr.RunError, match=r"in use by run r1 \(process \d+ on here"):
        WorkspaceLock.acquire(tmp_path, LockOwner("r2", os.getpid(), "here", 2.0))
    lock.release()
    lock.release()  # idempotent
    assert live_owner(tmp_path) is None
    WorkspaceLock.acquire(tmp_path, LockOwner("r2", os.getpid(), "here", 2.0)).release()


def test_a_finished_run_releases_its_workspace(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.ScriptedModel([gr.text("a"), gr.text("b")]), workspace=tmp_path, store=False
    )
    agent.run_sync("One.")
    assert live_owner(tmp_path) is None
    assert agent.run_sync("Two.").status == "ended"


async def test_the_model_cannot_reach_the_lock(make_agent: Any) -> None:
    """Overwriting .gr/run.lock would let a second process take the workspace."""
    model = gr.ScriptedModel(
        [
            gr.tool_call("write_file", path=".gr/run.lock", content="{}"),
            gr.tool_call("read_file", path="./.gr/run.lock"),
            gr.text("ok"),
        ]
    )
    run = await make_agent(model).run("job")
    calls = [e.data for e in run.events.of_kind("tool_call")]
    assert all(c["is_error"] and "keeps for itself" in c["result"] for c in calls)
