"""Offline models: the scripted replayer, the simulated agent, and spec strings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import gr_notebook as gr
from gr_notebook.errors import ModelError, ModelSpecError, ScriptExhausted
from gr_notebook.messages import Message
from gr_notebook.models import ModelRequest, resolve_model
from gr_notebook.models.simulated.planner import derive_phases


def request(turn: int = 1) -> ModelRequest:
    return ModelRequest(
        system=(),
        messages=(Message.user("hi"),),
        tools=(),
        layer_tokens=(10, 20, 30, 0, 5),
        turn=turn,
    )


def test_scripted_model_replays_in_order_and_records_requests() -> None:
    model = gr.ScriptedModel([gr.tool_call("read_file", path="a"), gr.text("done")])
    first = asyncio.run(model.complete(request()))
    second = asyncio.run(model.complete(request()))
    assert first.stop_reason == "tool_use" and first.tool_uses[0].input == {"path": "a"}
    assert first.tool_uses[0].id == "toolu_s0000_0"
    assert second.text == "done" and second.stop_reason == "end_turn"
    assert len(model.requests) == 2 and model.remaining == 0
    assert first.usage is not None and first.usage.input_tokens == 65


def test_scripted_model_calls_callable_entries_with_the_request() -> None:
    seen = []

    def entry(req: ModelRequest) -> gr.models.ModelResponse:
        seen.append(req.turn)
        return gr.text(f"turn {req.turn}")

    model = gr.ScriptedModel([entry])
    assert asyncio.run(model.complete(request(7))).text == "turn 7"
    assert seen == [7]


def test_scripted_model_raises_when_dry() -> None:
    model = gr.ScriptedModel([])
    with pytest.raises(ScriptExhausted, match="given 0 and asked for response 1"):
        asyncio.run(model.complete(request()))


def test_scripted_entry_returning_the_wrong_type_is_explained() -> None:
    model = gr.ScriptedModel([lambda req: "oops"])  # type: ignore[list-item,return-value]
    with pytest.raises(ModelError, match="return a ModelResponse"):
        asyncio.run(model.complete(request()))


def test_tool_calls_builds_one_response_with_several_blocks() -> None:
    response = gr.tool_calls([("read_file", {"path": "a"}), gr.tool_call("list_files")])
    assert [b.name for b in response.tool_uses] == ["read_file", "list_files"]


@pytest.mark.parametrize("spec", [None, "simulated", "simulated:diligent"])
def test_spec_strings_resolve_to_the_simulated_model(spec: str | None) -> None:
    model = resolve_model(spec)
    assert isinstance(model, gr.SimulatedModel) and model.name == "simulated:diligent"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("simulated:sloth", "unknown simulated profile 'sloth'; choose one of: diligent"),
        ("gpt-9", "unknown model spec 'gpt-9'"),
        ("scripted", "pass gr.ScriptedModel"),
        (42, "model= takes a spec string"),
    ],
)
def test_bad_specs_say_what_to_do(spec: object, message: str) -> None:
    with pytest.raises(ModelSpecError, match=message):
        resolve_model(spec)


def test_a_plain_async_function_is_a_model(make_agent: Callable[..., gr.Agent]) -> None:
    async def finish(req: ModelRequest) -> gr.models.ModelResponse:
        return gr.text("nothing to do")

    run = make_agent(finish).run_sync("job")
    assert run.status == "ended" and run.turns == 1


def test_plan_derivation_keeps_every_phase_within_5_to_20_steps() -> None:
    text = "## Big\n" + "\n".join(f"- step {i}" for i in range(45)) + "\n## Small\n- only\n"
    phases = derive_phases(text)
    assert [name for name, _ in phases] == ["Big", "Big (continued)", "Big (continued)", "Small"]
    assert all(5 <= len(steps) <= 20 for _, steps in phases)
    assert [n for n, _ in derive_phases("Just do something useful.")] == [
        "Research and draft",
        "Review",
    ]


def test_simulated_runs_are_deterministic(make_agent: Callable[..., gr.Agent], tmp_path) -> None:
    def trace(name: str) -> list[tuple[str, str]]:
        agent = gr.Agent(
            model="simulated", workspace=tmp_path / name, store=False, max_iterations=300
        )
        run = agent.run_sync("## A\n- one\n- two\n## B\n- three\n")
        calls = run.tool_calls_df()
        return list(zip(calls["tool"], calls["result"].str.slice(0, 40), strict=True))

    assert trace("first") == trace("second")


def test_simulated_agent_does_the_whole_job(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", max_iterations=400).run_sync(
        "## Collect\n- a\n- b\n## Analyse\n- c\n## Report\n- d\n"
    )
    assert run.status == "completed"
    assert run.job is not None and run.job.deliverables == ("report.md",)
    phases = run.phases_df()
    assert list(phases["kind"]) == ["bootstrap", "phase", "phase", "phase", "job_completion"]
    assert (phases["outcome"] == "complete").all()
    assert not run.tool_calls_df()["is_error"].any()
    assert run.workspace.exists("work/phase_03/01_d.md")
    assert "Phase 3: Report ✓ COMPLETE" in run.workspace.read_text("main_plan.md")
    assert run.workspace.read_text("report.md").startswith("# Summary report")


@pytest.mark.parametrize(
    "instructions",
    [
        "Write an essay on tea.",
        "- Read chapter3.txt\n- b\n",
        "- Write the execution plan in notes.md\n- b\n",
        "## A\n- Call job_complete()\n## B\n- b\n",
        "## Alpha\n- a\n## Beta ✓ COMPLETE\n- b\n## Gamma (current)\n- c\n",
        "- intro task\n- second\n## A\n- a\n",
        "# Guide 🐦\n## Étape un\n- Écrire l'introduction\n- 写介绍\n- 写结论\n",
        "## Only headings\n## With no bullets\n## At all\n",
    ],
)
def test_the_simulated_agent_finishes_any_instructions_cleanly(instructions: str, tmp_path) -> None:
    run = gr.Agent(
        model="simulated", workspace=tmp_path / "ws", store=False, max_iterations=300
    ).run_sync(instructions)
    assert run.status == "completed", run.reason
    assert run.job is not None and run.job.confidence == 0.9
    assert not run.tool_calls_df()["is_error"].any()
    assert run.plan is not None and run.plan.is_complete
    paths = run.tool_calls_df().query("tool == 'write_file'")["input"].map(lambda i: i["path"])
    work = paths[paths.str.startswith("work/")]
    assert len(work) >= 5 and work.is_unique  # one file per step, whatever the script


def test_a_one_sentence_job_fits_the_default_iteration_cap(tmp_path) -> None:
    agent = gr.Agent(model="simulated", workspace=tmp_path / "ws", store=False)
    assert agent.max_iterations == 200  # decision 295
    run = agent.run_sync("Write an essay on tea.")
    assert run.status == "completed" and run.job is not None


def test_the_simulated_agent_rewinds_past_a_step_that_keeps_failing(tmp_path) -> None:
    ws = tmp_path / "ws"
    (ws / "work" / "phase_01").mkdir(parents=True)
    (ws / "work" / "phase_01" / "03_c.md").symlink_to(tmp_path / "outside.md")
    run = gr.Agent(model="simulated", workspace=ws, store=False, max_iterations=300).run_sync(
        "## One\n- a\n- b\n- c\n- d\n- e\n## Two\n- f\n"
    )
    assert run.status == "completed" and run.job is not None and run.job.confidence == 0.9
    [rewind] = run.events.of_kind("rewind")
    assert "Task 'c' keeps failing" in rewind.data["issue"]
    plan = run.workspace.read_text("main_plan.md")
    assert "- [x] Apply the lesson: Task 'c' keeps failing" in plan and "- [ ] c" not in plan
    completed = [e.data["title"] for e in run.events.of_kind("todo_completed") if e.phase == 1]
    assert completed.count("a") == 1  # work done before the rewind is not redone
    assert not (tmp_path / "outside.md").exists()


def test_scripted_model_keeps_a_bounded_number_of_requests() -> None:
    model = gr.ScriptedModel([gr.text(str(i)) for i in range(30)], keep_requests=5)

    async def calls() -> None:
        for turn in range(1, 31):
            await model.complete(request(turn))

    asyncio.run(calls())
    assert len(model.requests) == 5  # the latest five, oldest first
    assert [r.turn for r in model.requests] == [26, 27, 28, 29, 30]
    assert model.calls == 30 and model.remaining == 0


def test_scripted_model_keeps_every_request_only_when_asked() -> None:
    default = gr.ScriptedModel([gr.text(str(i)) for i in range(300)])
    everything = gr.ScriptedModel([gr.text(str(i)) for i in range(300)], keep_requests=None)

    async def calls() -> None:
        for turn in range(1, 301):
            await default.complete(request(turn))
            await everything.complete(request(turn))

    asyncio.run(calls())
    assert len(default.requests) < 300 and default.requests[-1].turn == 300
    assert len(everything.requests) == 300


@pytest.mark.parametrize("keep", [0, -1, 1.5, True])
def test_scripted_model_refuses_a_bad_bound(keep: object) -> None:
    with pytest.raises(gr.ConfigError, match="keep_requests"):
        gr.ScriptedModel([], keep_requests=keep)  # type: ignore[arg-type]
