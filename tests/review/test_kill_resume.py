"""A run SIGKILLed at many points of a multi-phase job resumes to the same deliverables.

Each child process runs the quickstart job (three phases) on the simulated agent with a
store, and kills itself with SIGKILL when the event of a chosen seq is recorded: between
turns, right after a model call, right after a file was written and before the next
checkpoint. This process then resumes the run with the same agent definition, and the
workspace must end byte for byte as the uninterrupted run's (the workspace summary aside,
which holds the time it was written).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import writes_journal
from gr_notebook.examples import QUICKSTART, quickstart_job
from gr_notebook.workflow.workspace_files import hash_files

CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    import gr_notebook as gr
    from gr_notebook.examples import quickstart_job

    root, kill_at = sys.argv[1], int(sys.argv[2])
    job = quickstart_job()
    agent = gr.Agent(
        gr.SimulatedModel(), workspace=job.prepare(os.path.join(root, "ws")),
        store=os.path.join(root, "store.sqlite"), max_iterations=200,
    )

    def die(event):  # kill_at -1: the first event after start(), before any checkpoint
        if event.seq == kill_at or kill_at < 0:
            os.kill(os.getpid(), signal.SIGKILL)

    async def main():
        run = agent.start(job.instructions)
        print(run.run_id, flush=True)
        run.subscribe(die)
        await run.wait()

    asyncio.run(main())
    """
)
# Event seqs across the job's 230 events: the bootstrap, each phase, the job's completion.
KILL_AT = [6, 9, 24, 41, 58, 77, 96, 118, 141, 163, 187, 204, 221]


def files(root: Path) -> dict[str, str]:
    return {p: d for p, d in hash_files(root).items() if p != "workspace_summary.md"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("reference")
    job = quickstart_job()
    agent = gr.Agent(gr.SimulatedModel(), workspace=root / "ws", store=False, max_iterations=200)
    run = agent.run_sync(job.instructions)
    assert run.status == "completed" and run.job is not None
    assert len(run.events) > max(KILL_AT) + 5
    return files(root / "ws")


def killed(root: Path, kill_at: int) -> str:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    return child.stdout.strip()


def test_a_run_killed_before_its_first_turn_has_nothing_to_resume(tmp_path: Path) -> None:
    run_id = killed(tmp_path, -1)
    agent = gr.Agent(gr.SimulatedModel(), store=tmp_path / "store.sqlite")
    with pytest.raises(gr.RunError, match=r"has no checkpoints .*before its first turn"):
        gr.resume(run_id, agent, store=tmp_path / "store.sqlite")


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", KILL_AT)
def test_a_killed_run_resumes_to_the_same_deliverables(
    tmp_path: Path, reference: dict[str, str], kill_at: int
) -> None:
    run_id = killed(tmp_path, kill_at)
    frame = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id")
    assert frame.loc[run_id, "status"] == "interrupted" and frame.loc[run_id, "resumable"]
    agent = gr.Agent(gr.SimulatedModel(), store=tmp_path / "store.sqlite", max_iterations=200)
    resumed = gr.resume(run_id, agent, store=tmp_path / "store.sqlite")
    assert resumed.status == "completed" and resumed.job is not None
    assert resumed.job.deliverables == ("report.md",)
    assert files(tmp_path / "ws") == reference
    frame = gr.runs_df(tmp_path / "store.sqlite").set_index("run_id")
    assert frame.loc[run_id, "status"] == "interrupted" and not frame.loc[run_id, "resumable"]
    assert frame.loc[resumed.run_id, "parent_run_id"] == run_id
    assert not writes_journal(tmp_path / "ws", resumed.run_id).exists()  # it finished
    assert quickstart_job().instructions == QUICKSTART
