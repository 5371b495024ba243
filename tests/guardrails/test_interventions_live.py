"""The intervention engine inside the loop, and replayed over recorded runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.guardrails import pass_count_todos_and_first_reads
from gr_notebook.models import ModelResponse
from tests.conftest import bootstrap_script

Factory = Callable[..., gr.Agent]


def looping_script(n: int = 80) -> list[ModelResponse]:
    return [gr.tool_call("read_file", path="instructions.md") for _ in range(n)]


async def test_a_looping_agent_is_replanned_rewound_then_stopped(make_agent: Factory) -> None:
    model = gr.ScriptedModel(looping_script())
    run = await make_agent(model, stuck_turns=None).run("job")
    assert run.status == "stuck"
    assert "intervention 3 of 3, after 50 tool calls" in (run.reason or "")
    fired = run.interventions_df().query("fired")
    assert fired[["step", "tier"]].values.tolist() == [[15, 1], [30, 2], [50, 3]]
    # tier 1 told the model to re-plan, in the request after the turn of step 15
    assert (
        "STRATEGY CHECK: no progress in the last 15 tool calls"
        in model.requests[15].messages[-1].text
    )
    # tier 2 rewound the todo list in the system's name
    rewinds = run.events.of_kind("rewind")
    assert [e.data["source"] for e in rewinds] == ["system"]
    assert "no progress in 30 tool calls" in rewinds[0].data["issue"]
    skipped = run.interventions_df().query("not fired")
    assert set(skipped.skip_reason) == {"min_steps", "not_stuck", "grace_period"}


async def test_interventions_none_turns_the_engine_off(make_agent: Factory) -> None:
    run = await make_agent(
        gr.ScriptedModel([*looping_script(60), gr.text("done")]),
        interventions=None,
        stuck_turns=None,
    ).run("job")
    assert run.status == "ended"
    assert run.interventions_df().empty
    assert list(run.interventions_df().columns) == [
        "step",
        "turn",
        "tier",
        "fired",
        "skip_reason",
        "why",
        "stuck_counter",
        "steps_since_reset",
        "recent_edits",
        "mode",
    ]


async def test_a_working_agent_sees_only_skipped_checks(make_agent: Factory) -> None:
    from tests.conftest import full_job_script

    run = await make_agent(gr.ScriptedModel(full_job_script())).run("job")
    assert run.status == "completed"
    frame = run.interventions_df()
    assert len(frame) == len(run.tool_calls_df()) // 5
    assert not frame.fired.any()


async def test_safeguards_hold_off_the_seed_000_progress_check(make_agent: Factory) -> None:
    # one edit after another on the same todo: actively implementing, never a progress check
    edits = [
        gr.tool_call("write_file", path=f"src/part_{i}.py", content=f"x = {i}\n") for i in range(30)
    ]
    run = await make_agent(
        gr.ScriptedModel([*bootstrap_script()[:2], *edits, gr.text("done")]), stuck_turns=5
    ).run("job")
    assert run.events.of_kind("progress_check") == []
    unprotected = await make_agent(
        gr.ScriptedModel([*bootstrap_script()[:2], *edits, gr.text("done")]),
        stuck_turns=5,
        interventions=None,
    ).run("job")
    assert unprotected.events.of_kind("progress_check")


async def test_a_person_rewind_starts_a_grace_period(make_agent: Factory) -> None:
    model = gr.ScriptedModel(looping_script(40))
    agent = make_agent(model, stuck_turns=None)
    run = agent.start("job")
    while run.turns < 12:
        await __import__("asyncio").sleep(0)
    run.rewind("try another way")
    await run.wait()
    frame = run.interventions_df()
    assert frame.loc[frame.step == 15, "skip_reason"].item() == "grace_period"


def test_agent_refuses_a_wrong_interventions_value() -> None:
    with pytest.raises(ConfigError, match=r"gr\.InterventionConfig"):
        gr.Agent(interventions={"check_every": 5})  # type: ignore[arg-type]


def test_config_records_the_intervention_numbers() -> None:
    agent = gr.Agent(interventions=gr.InterventionConfig.less_protective(), store=False)
    assert agent.config()["interventions"]["grace_period_after_reset"] == 10
    assert gr.Agent(interventions=None, store=False).config()["interventions"] is None


class TestReplay:
    async def test_replay_with_the_live_config_reproduces_the_live_checks(
        self, make_agent: Factory
    ) -> None:
        run = await make_agent(gr.ScriptedModel(looping_script()), stuck_turns=None).run("job")
        live = run.interventions_df()
        replay = gr.replay_guardrails(run, interventions=gr.InterventionConfig())
        replayed = replay.interventions_df()
        assert replayed.drop(columns=["run", "turn"]).equals(live.drop(columns="turn"))
        assert replayed.turn.tolist() == live.turn.tolist()
        fired = replayed.query("fired")
        assert fired[["step", "tier"]].values.tolist() == [[15, 1], [30, 2], [50, 3]]
        rows = replay.df.query("kind == 'intervention' and decision != 'skip'")
        assert rows.decision.tolist() == ["replan", "rewind", "stop"]

    async def test_replay_sees_first_reads_as_the_live_run_did(self, make_agent: Factory) -> None:
        config = gr.InterventionConfig(progress_signal=pass_count_todos_and_first_reads)
        reads = [gr.tool_call("write_file", path=f"f{i}.md", content="x") for i in range(12)]
        reads += [gr.tool_call("read_file", path=f"f{i % 12}.md") for i in range(60)]
        run = await make_agent(gr.ScriptedModel(reads), interventions=config, stuck_turns=None).run(
            "job"
        )
        live = run.interventions_df()
        assert live.query("fired").step.tolist() == [40, 55]  # 12 new files, then circles
        replayed = gr.replay_guardrails(run, interventions=config).interventions_df()
        assert replayed.drop(columns=["run", "turn"]).equals(live.drop(columns="turn"))

    async def test_replay_answers_what_other_settings_would_have_done(
        self, make_agent: Factory
    ) -> None:
        run = await make_agent(
            gr.ScriptedModel([*looping_script(40), gr.text("done")]),
            interventions=None,
            stuck_turns=None,
        ).run("job")
        assert run.status == "ended"
        eager = gr.replay_guardrails(run.events, interventions=gr.InterventionConfig())
        fired = eager.interventions_df().query("fired")
        assert fired[["step", "tier"]].values.tolist() == [[15, 1], [30, 2]]
        patient = gr.replay_guardrails(
            run, interventions=gr.InterventionConfig(consecutive_stuck_tolerance=9)
        )
        assert not patient.interventions_df().fired.any()

    async def test_sweep_is_tidy_over_the_grid(self, make_agent: Factory) -> None:
        loop_run = await make_agent(
            gr.ScriptedModel([*looping_script(40), gr.text("done")]), interventions=None
        ).run("job")
        from tests.conftest import full_job_script

        good_run = await make_agent(gr.ScriptedModel(full_job_script())).run("job")
        frame = gr.sweep_guardrails(
            {"looper": loop_run, "good": good_run},
            grid={"consecutive_stuck_tolerance": [2, 3, 9], "check_every": [5, 10]},
        )
        assert len(frame) == 2 * 3 * 2
        assert list(frame.columns[:4]) == [
            "run",
            "model",
            "consecutive_stuck_tolerance",
            "check_every",
        ]
        looper = frame[frame.run == "looper"].set_index(
            ["consecutive_stuck_tolerance", "check_every"]
        )
        assert looper.loc[(3, 5), "first_intervention_step"] == 15
        assert looper.loc[(2, 5), "first_intervention_step"] == 10
        assert looper.loc[(9, 5), "interventions"] == 0
        good = frame[(frame.run == "good") & (frame.consecutive_stuck_tolerance >= 3)]
        assert (good.interventions == 0).all()
        assert frame.decisions.gt(0).all()
        assert looper.loc[(2, 5), "max_tier"] >= 2 and not looper.loc[(9, 5), "stopped"]
        based = gr.sweep_guardrails(
            [loop_run],
            make=gr.InterventionConfig(consecutive_stuck_tolerance=9),
            grid={"check_every": [5]},
        )
        assert based.interventions.tolist() == [0]

    def test_bad_inputs_say_what_to_pass(self) -> None:
        with pytest.raises(ConfigError, match="runs takes a run"):
            gr.replay_guardrails(42, interventions=gr.InterventionConfig())
        with pytest.raises(ConfigError, match="'grace' is not one"):
            gr.sweep_guardrails([[]], grid={"grace": [1]})
        with pytest.raises(ConfigError, match="at least one value"):
            gr.sweep_guardrails([[]], grid={"check_every": []})
        with pytest.raises(ConfigError, match="check_every must be a whole number"):
            gr.sweep_guardrails([[]], grid={"check_every": [0]})
