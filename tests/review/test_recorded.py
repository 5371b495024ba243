"""A recorded run read back from its store: the state it ended in, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.examples import QUICKSTART
from gr_notebook.review.recorded import recorded_run, todos_from_events
from tests.test_run_controls import until


@pytest.mark.parametrize(
    "profile", ["diligent", "reckless", "quitter", "drifter", "token_hog", "looper"]
)
def test_its_todo_list_is_the_one_it_ended_with(tmp_path: Path, profile: str) -> None:
    agent = gr.Agent(f"simulated:{profile}", workspace=tmp_path / "ws", max_iterations=120)
    run = agent.run_sync(QUICKSTART)
    assert todos_from_events(run.events) == run.todos


async def test_a_persons_task_and_a_rewind_are_in_its_todo_list(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.SimulatedModel(latency=0.002),
        workspace=tmp_path / "ws",
        store=tmp_path / "store.sqlite",
        max_iterations=200,
    )
    run = agent.start(QUICKSTART)
    await until(lambda: run.todos.kind == "phase" and run.todos.done_count >= 2, limit=20)
    run.pause()
    await until(lambda: run.paused, limit=20)
    run.add_todo("Check the spelling")
    run.unpause()
    await until(lambda: run.todos.phase_number >= 2 and run.todos.done_count >= 1, limit=20)
    run.rewind("The order is wrong")
    await run.wait()
    assert [e.data.get("source") for e in run.events if e.kind == "rewind"] == ["person"]
    assert todos_from_events(run.events) == run.todos
    read = recorded_run(run.run_id, tmp_path / "store.sqlite")
    assert read.todos == run.todos and read.status == run.status == "completed"
    assert read.reason == run.reason and read.job == run.job


def test_a_run_whose_process_died_reads_interrupted(tmp_path: Path) -> None:
    from tests.review.test_timetravel import Interrupt

    agent = gr.Agent(
        Interrupt(17), workspace=tmp_path / "ws", store=tmp_path / "s.sqlite", max_iterations=200
    )
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync(QUICKSTART)
    read = recorded_run(gr.current_run().run_id, tmp_path / "s.sqlite")  # type: ignore[union-attr]
    assert read.status == "interrupted" and read.turns == read.summary()["turns"] == 16
