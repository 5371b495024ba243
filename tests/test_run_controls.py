"""Run controls a person uses while a job is live: pause, resume, stop, todo edits."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import gr_notebook as gr
from gr_notebook.errors import ModelSpecError
from gr_notebook.models import ModelRequest, ModelResponse
from tests.conftest import PHASE_1, bootstrap_script, complete_all

Factory = Callable[..., gr.Agent]


def slow_reader(turns: int = 200) -> gr.ScriptedModel:
    """A model that reads a file every turn and yields to the loop while it 'thinks'."""

    async def think(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.001)
        return gr.tool_call("read_file", path="instructions.md")

    return gr.ScriptedModel([think] * turns + [gr.text("done")])


def gated_after_phase_1(*tail: ModelResponse) -> tuple[gr.ScriptedModel, Gate]:
    """Bootstrap, phase 1's list, then a turn that waits for the test to open the gate."""
    gate = Gate(asyncio.Event(), asyncio.Event())

    async def wait_for_person(request: ModelRequest) -> ModelResponse:
        gate.entered.set()
        await gate.opened.wait()
        return gr.tool_call("read_file", path="instructions.md")

    script = [*bootstrap_script(), gr.tool_call("todo_write", todos=PHASE_1), wait_for_person]
    return gr.ScriptedModel([*script, *tail]), gate


@dataclass(frozen=True)
class Gate:
    entered: asyncio.Event
    opened: asyncio.Event


async def until(condition: Callable[[], bool], *, limit: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.001)


async def test_pause_holds_between_turns_and_resume_goes_on(make_agent: Factory) -> None:
    run = make_agent(slow_reader(30)).start("job")
    await until(lambda: run.turns >= 3)
    run.pause()
    assert run.status in ("pausing", "paused")
    await until(lambda: run.paused)
    held = run.turns
    await asyncio.sleep(0.05)
    assert run.turns == held and run.status == "paused"
    run.unpause()
    await run.wait()
    assert run.status == "ended" and not run.paused
    kinds = [e.kind for e in run.events]
    assert kinds.count("run_paused") == 1 and kinds.count("run_unpaused") == 1
    assert kinds.index("run_paused") < kinds.index("run_unpaused")
    assert "run_resumed" not in kinds  # resume is a restart from a checkpoint, not this


async def test_pause_before_the_first_turn_holds_the_run(make_agent: Factory) -> None:
    run = make_agent(slow_reader(5)).start("job")
    run.pause()
    await until(lambda: run.paused)
    assert run.turns == 0
    run.unpause()
    assert (await run.wait()).turns == 6


async def test_stop_while_paused_ends_the_run_cancelled(make_agent: Factory) -> None:
    run = make_agent(slow_reader()).start("job")
    run.pause()
    await until(lambda: run.paused)
    run.cancel("stopped by the person")
    await run.wait()
    assert run.status == "cancelled" and run.reason == "stopped by the person"
    assert "run_resumed" not in [e.kind for e in run.events]


async def test_controls_on_a_finished_run_say_so(make_agent: Factory) -> None:
    run = await make_agent(gr.ScriptedModel([gr.text("ok")])).run("job")
    for action in (run.pause, run.unpause, run.complete_todo, lambda: run.add_todo("x")):
        with pytest.raises(gr.RunError, match="has finished"):
            action()


async def test_person_todo_edits_are_events_with_the_person_as_source(
    make_agent: Factory,
) -> None:
    model, gate = gated_after_phase_1(*complete_all(6), gr.text("done"))
    run = make_agent(model).start("job")
    await asyncio.wait_for(gate.entered.wait(), 10)
    assert run.add_todo("  Check   the index ") == "Added task 6 'Check the index'."
    assert "Task 1 'Gather a' marked complete" in run.complete_todo()
    gate.opened.set()
    await run.wait()
    person = [e for e in run.events if e.data.get("source") == "person"]
    assert [e.kind for e in person] == ["todos_written", "todo_completed"]
    assert person[0].data["titles"][-1] == "Check the index"
    with pytest.raises(gr.RunError, match="say what the task is"):
        run.add_todo("   ")


async def test_state_tells_paused_from_running(make_agent: Factory) -> None:
    run = make_agent(slow_reader(50)).start("job")
    assert run.status == "running"
    run.pause()
    assert run.status == "pausing"
    await until(lambda: run.paused)
    assert run.status == "paused" and "paused" in repr(run)
    run.cancel()
    await run.wait()
    assert run.status == "cancelled"


async def test_start_runs_the_task_in_the_context_it_is_given(make_agent: Factory) -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="fresh")
    seen: list[str] = []

    async def look(request: ModelRequest) -> ModelResponse:
        seen.append(marker.get())
        return gr.text("done")

    marker.set("caller")
    await make_agent(gr.ScriptedModel([look])).start("job").wait()
    await make_agent(gr.ScriptedModel([look])).start("job", context=contextvars.Context()).wait()
    assert seen == ["caller", "fresh"]


async def test_current_run_is_the_latest_started(make_agent: Factory) -> None:
    first = make_agent(gr.ScriptedModel([gr.text("a")])).start("one")
    assert gr.current_run() is first
    await first.wait()
    second = make_agent(gr.ScriptedModel([gr.text("b")]), workspace=None).start("two")
    assert gr.current_run() is second
    await second.wait()


def test_simulated_latency_must_not_be_negative() -> None:
    with pytest.raises(ModelSpecError, match="latency"):
        gr.SimulatedModel(latency=-1)


async def test_a_stop_is_never_held_by_a_later_pause(make_agent: Factory) -> None:
    run = make_agent(slow_reader()).start("job")
    run.cancel("stopped by the person")
    with pytest.raises(gr.RunError, match="is stopping"):
        run.pause()
    assert run.status == "stopping"
    await asyncio.wait_for(run.wait(), 5)
    assert run.status == "cancelled" and "run_paused" not in [e.kind for e in run.events]
