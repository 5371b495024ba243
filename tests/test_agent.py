"""Agent and Run: running styles, the store, DataFrames and misuse."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, WorkspaceError
from gr_notebook.messages import TextBlock
from gr_notebook.models import ModelResponse


def test_workspace_none_means_a_fresh_directory_under_gr_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = gr.Agent(model=gr.ScriptedModel([gr.text("ok")])).run_sync("job")
    assert run.workspace.root == (tmp_path / "gr_runs" / run.run_id).resolve()
    assert run.workspace.read_text("instructions.md") == "job\n"
    assert (tmp_path / "gr_runs" / "store.sqlite").exists()
    runs = gr.runs_df()
    assert list(runs["run_id"]) == [run.run_id]
    assert runs["n_events"].iloc[0] == len(run.events)


def test_a_store_path_in_a_missing_folder_is_refused_where_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nonexistent" / "dir"
    with pytest.raises(ConfigError, match=f"folder {missing} does not exist"):
        gr.Agent(store=missing / "s.sqlite")
    with pytest.raises(ConfigError, match="does not exist"):
        gr.Experiment({"a": gr.Agent()}, {"x": "job"}, store=str(missing / "s.sqlite"))
    assert list(tmp_path.iterdir()) == []  # no folder made, and no default store either


def test_a_run_id_says_when_the_run_started_even_on_a_fake_clock(tmp_path: Path) -> None:
    before = time.strftime("%Y%m%d-%H%M%S")
    agent = gr.Agent(
        gr.ScriptedModel([gr.text("ok")]), clock=gr.FakeClock(), workspace=tmp_path, store=False
    )
    run = agent.run_sync("job")
    assert before <= run.run_id[:15] <= time.strftime("%Y%m%d-%H%M%S")  # not 20231114-…
    assert run.events[0].time == 1_700_000_000.0  # the run's own times stay the fake clock's


def test_runs_df_lists_every_run_newest_first(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    ids = [
        make_agent(gr.ScriptedModel([gr.text("ok")]), workspace=None).run_sync("job").run_id
        for _ in range(3)
    ]
    frame = gr.runs_df(tmp_path / "store.sqlite")
    assert set(frame["run_id"]) == set(ids)
    assert list(frame["status"]) == ["ended"] * 3


def test_tool_docs_are_written_for_layer_3(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel([gr.text("ok")])
    run = make_agent(model).run_sync("job")
    spec = {t.name: t for t in model.requests[0].tools}["todo_rewind"]
    assert spec.description.endswith("Full docs: tools/todo_rewind.md")
    assert "# todo_rewind" in run.workspace.read_text("tools/todo_rewind.md")


def test_start_returns_a_live_run(make_agent: Callable[..., gr.Agent]) -> None:
    agent = make_agent(gr.ScriptedModel([gr.tool_call("list_files"), gr.text("ok")]))

    async def main() -> tuple[str, gr.Run]:
        run = agent.start("job")
        status = run.status
        return status, await run.wait()

    status, run = asyncio.run(main())
    assert status == "running" and run.status == "ended" and run.done


def test_start_without_a_running_loop_says_what_to_do(make_agent: Callable[..., gr.Agent]) -> None:
    with pytest.raises(gr.RunError, match=r"use agent\.run_sync"):
        make_agent().start("job")


def test_empty_instructions_are_refused(make_agent: Callable[..., gr.Agent]) -> None:
    with pytest.raises(gr.RunError, match="instructions are empty"):
        make_agent().run_sync("   ")


@pytest.mark.parametrize(
    "plan_file", ["../plan.md", "/tmp/plan.md", "", "..\\plan.md", "a/../../plan.md", "C:plan.md"]
)
def test_plan_file_must_stay_inside_the_workspace(plan_file: str) -> None:
    with pytest.raises(WorkspaceError, match="inside the workspace"):
        gr.Agent(plan_file=plan_file, store=False)


def test_a_plan_file_behind_an_escaping_symlink_is_refused_at_start(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "plans").symlink_to(outside)
    agent = gr.Agent(
        gr.ScriptedModel([gr.text("done")]),
        workspace=tmp_path / "ws",
        plan_file="plans/main.md",
        store=False,
    )
    with pytest.raises(WorkspaceError, match=r"plan_file 'plans/main\.md'.*symlink"):
        agent.run_sync("Do it.")


def test_plan_file_name_is_configurable(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", plan_file="plan.md", max_iterations=400).run_sync(
        "## One\n- a\n## Two\n- b\n"
    )
    assert run.status == "completed"
    assert run.workspace.exists("plan.md") and not run.workspace.exists("main_plan.md")
    assert run.plan is not None and run.plan.is_complete


def test_rewind_after_the_run_finished_is_refused(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("ok")])).run_sync("job")
    with pytest.raises(gr.RunError, match="has finished"):
        run.rewind("too late")


def test_run_sync_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def cell() -> str:
        agent = gr.Agent(gr.ScriptedModel([gr.text("ok")]), workspace=tmp_path / "ws", store=False)
        run = agent.run_sync("job")
        await run.wait()  # its loop has closed; the finished run still answers
        return run.status

    assert asyncio.run(cell()) == "ended"


def test_dataframes_have_the_contract_columns(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", max_iterations=400).run_sync("## One\n- a\n## Two\n- b\n")
    events = run.events_df()
    assert list(events.columns[:5]) == ["seq", "kind", "turn", "phase", "time"]
    assert "input_tokens" in events.columns and "tool" in events.columns
    assert len(events) == len(run.events)
    turns = run.turns_df()
    for column in [
        "turn",
        "phase",
        "input_tokens",
        "output_tokens",
        "context_tokens",
        *(f"layer{i}_tokens" for i in range(1, 6)),
    ]:
        assert column in turns.columns
    assert list(turns["turn"]) == list(range(1, run.turns + 1))
    assert list(run.phases_df().columns) == [
        "phase",
        "name",
        "kind",
        "started_turn",
        "ended_turn",
        "tasks",
        "done",
        "input_tokens",
        "outcome",
    ]
    assert run.phases_df()["input_tokens"].sum() == turns["input_tokens"].sum()
    calls = run.tool_calls_df()
    assert list(calls.columns) == [
        "turn",
        "phase",
        "tool",
        "input",
        "is_error",
        "result",
        "duration_s",
        "effect",
        "key",
        "recovery",
        "unverified",
        "parent_made",
    ]
    assert (calls["duration_s"] >= 0).all()


def test_event_kinds_cover_the_contract(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", max_iterations=400).run_sync("## One\n- a\n## Two\n- b\n")
    kinds = {e.kind for e in run.events}
    for kind in (
        "run_started",
        "model_call",
        "tool_call",
        "todo_completed",
        "phase_transition",
        "compaction",
        "workspace_summary",
        "job_complete",
        "run_finished",
    ):
        assert kind in kinds
    assert [e.seq for e in run.events] == list(range(len(run.events)))


def test_run_repr_shows_the_final_state(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", max_iterations=400).run_sync("## One\n- a\n")
    assert repr(run).startswith(f"<Run {run.run_id} completed: ")
    assert repr(run).endswith("1 phase complete, job complete, confidence 0.90>")
    stopped = make_agent(gr.ScriptedModel([gr.text("bye")]), workspace=None).run_sync("job")
    assert repr(stopped) == (
        f"<Run {stopped.run_id} ended (the model ended its turn): 1 turn, "
        "0 phases complete, 'Bootstrap' 0/5 tasks>"
    )
    card = run._repr_html_()
    assert ">completed</span>" in card and f"{run.turns} turns" in card and "job complete" in card


def test_two_live_runs_cannot_share_a_workspace(make_agent: Callable[..., gr.Agent]) -> None:
    agent = make_agent(gr.SimulatedModel(), max_iterations=400)

    async def main() -> gr.Run:
        first = agent.start("## One\n- a\n")
        with pytest.raises(gr.RunError, match="is in use by run"):
            agent.start("## Two\n- b\n")
        return await first.wait()

    assert asyncio.run(main()).status == "completed"
    assert agent.run_sync("## Again\n- c\n").status == "completed"  # free once finished


def test_cancel_straight_after_start_finishes_the_run(
    make_agent: Callable[..., gr.Agent], tmp_path: Path
) -> None:
    agent = make_agent(gr.SimulatedModel())

    async def main() -> gr.Run:
        run = agent.start("job")
        run.cancel()
        return await asyncio.wait_for(run.wait(), 5)

    run = asyncio.run(main())
    assert run.status == "cancelled" and run.events[-1].kind == "run_finished"
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert list(runs["status"]) == ["cancelled"] and list(runs["job_status"]) == ["cancelled"]


def test_async_tool_handlers_are_awaited(make_agent: Callable[..., gr.Agent]) -> None:
    async def fetch(ctx: gr.tools.ToolContext, params: Any) -> str:
        await asyncio.sleep(0)
        return f"fetched {params['key']}"

    tool = gr.Tool(
        "fetch",
        "Fetch a value.",
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        fetch,
    )
    run = make_agent(
        gr.ScriptedModel([gr.tool_call("fetch", key="k"), gr.text("ok")]), tools=[tool]
    ).run_sync("job")
    [call] = run.tool_calls_df().to_dict("records")
    assert call["result"] == "fetched k" and not call["is_error"]


@pytest.mark.parametrize(
    "response",
    [ModelResponse(()), ModelResponse((TextBlock("I can't help with that."),), "refusal")],
)
def test_an_empty_or_refused_response_fails_the_run(
    make_agent: Callable[..., gr.Agent], response: ModelResponse
) -> None:
    run = make_agent(gr.ScriptedModel([response])).run_sync("job")
    assert run.status == "failed"
    assert run.events.of_kind("error")[-1].data["source"] == "model"


class TestOnRun:
    def test_each_run_is_handed_over_before_its_first_event(self, tmp_path: Path) -> None:
        agent = gr.Agent(
            gr.ScriptedModel([gr.text("One."), gr.text("Two.")]), workspace=tmp_path, store=False
        )
        seen: list[tuple[str, int]] = []
        kinds: list[str] = []
        stop = agent.on_run(lambda run: seen.append((run.run_id, len(run.events))))
        agent.on_run(lambda run: run.subscribe(lambda e: kinds.append(e.kind)))
        first = agent.run_sync("First job.")
        assert seen == [(first.run_id, 0)]
        assert kinds[0] == "run_started" and len(kinds) == len(first.events)
        stop()
        stop()  # twice is harmless
        agent.run_sync("Second job.")
        assert len(seen) == 1 and len(agent.run_watchers) == 1
        assert agent.replace(name="other").run_watchers == ()

    def test_a_callback_that_raises_stops_the_run_from_starting(self, tmp_path: Path) -> None:
        agent = gr.Agent(gr.ScriptedModel([gr.text("Done.")]), workspace=tmp_path, store=False)

        def broken(run: gr.Run) -> None:
            raise RuntimeError("no tracer")

        stop = agent.on_run(broken)
        with pytest.raises(RuntimeError, match="no tracer"):
            agent.run_sync("A job.")
        stop()  # the workspace lock was let go: the next run starts
        assert agent.run_sync("A job.").status == "ended"
