"""The seed's own test list: bootstrap → phase 1 → transition → phase 2, rewind recovery,
bounded context, and job completion detection."""

from __future__ import annotations

import json
from collections.abc import Callable

import gr_notebook as gr
from gr_notebook.history.store import Store
from gr_notebook.models import ModelResponse
from gr_notebook.workflow import JobResult
from tests.conftest import (
    PHASE_1,
    PHASE_2,
    PLAN_PHASE_1_DONE,
    PLAN_TWO_PHASES,
    bootstrap_script,
    complete_all,
    full_job_script,
)


def full_cycle_script() -> list[ModelResponse]:
    return [
        *bootstrap_script(),
        gr.tool_calls(
            [
                ("read_file", {"path": p})
                for p in ("main_plan.md", "instructions.md", "workspace_summary.md")
            ]
        ),
        gr.tool_call("todo_write", todos=PHASE_1),
        *complete_all(5),
        gr.tool_call("read_file", path="main_plan.md"),
        gr.tool_call("write_file", path="main_plan.md", content=PLAN_PHASE_1_DONE),
        gr.tool_call("todo_write", todos=PHASE_2),
        gr.tool_call("todo_complete"),
        gr.text("Stopping here."),
    ]


def test_full_bootstrap_phase1_transition_phase2_cycle(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel(full_cycle_script())
    run = make_agent(model).run_sync("Gather five things, then write five things.")

    assert run.status == "ended", run.reason
    first = model.requests[0]
    assert "Phase: Bootstrap" in first.layer_text(2)
    assert "Generate workspace summary using generate_workspace_summary()" in first.layer_text(2)
    # The last bootstrap todo triggers the transition prompt, with an empty, waiting list.
    after_bootstrap = model.requests[9]
    assert "PHASE TRANSITION: the bootstrap is complete" in after_bootstrap.messages[-1].text
    assert "todo_write" in after_bootstrap.layer_text(2)
    # Once phase 1's todos exist, the conversation is compacted to the recap (layer 4).
    phase_1_start = model.requests[11]
    assert phase_1_start.messages[0].text.startswith("PREVIOUS SUMMARY")
    assert len(phase_1_start.messages) == 1
    assert "Phase: Gather (1 of 2)" in phase_1_start.layer_text(2)
    assert "[ ] 1. Gather a      ← CURRENT" in phase_1_start.layer_text(2)
    # Phase 1's last todo_complete archives it and asks for the plan update.
    transition = model.requests[16]
    assert "PHASE TRANSITION: Phase 1 'Gather' is complete" in transition.messages[-1].text
    assert "archive/phase_01_complete.json" in transition.messages[-1].text
    phase_2_start = model.requests[19]
    assert "Phase: Write (2 of 2)" in phase_2_start.layer_text(2)
    assert "Phase 1 'Gather': complete, 5 tasks done" in phase_2_start.messages[0].text

    phases = run.phases_df()
    assert list(phases["phase"]) == [0, 1, 2]
    assert list(phases["outcome"][:2]) == ["complete", "complete"]
    assert phases["outcome"].isna().iloc[2]
    assert list(phases["done"]) == [5, 5, 1]
    kinds = [e.kind for e in run.events]
    assert kinds.count("compaction") == 2
    assert kinds.count("phase_transition") == 2
    assert run.workspace.exists("archive/phase_00_complete.json")
    assert run.workspace.exists("archive/phase_01_complete.json")
    assert run.plan is not None and run.plan.phase(1).status == "complete"


def test_transition_advances_plan_when_model_forgets(make_agent: Callable[..., gr.Agent]) -> None:
    script = [
        *bootstrap_script(),
        gr.tool_call("todo_write", todos=PHASE_1),
        *complete_all(5),
        gr.tool_call("todo_write", todos=PHASE_2),  # no plan update first
        gr.text("done"),
    ]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    plan = run.plan
    assert plan is not None
    assert plan.phase(1).status == "complete" and plan.phase(2).status == "current"
    result = run.tool_calls_df().iloc[-1]["result"]
    assert "marked it ✓ COMPLETE and Phase 2 ← CURRENT" in result
    assert run.todos.phase_number == 2


def test_rewind_recovery(make_agent: Callable[..., gr.Agent]) -> None:
    issue = "Gather b is impossible: the source is offline. Could use the cached copy instead."
    revised = PLAN_TWO_PHASES.replace("- [ ] Gather b", "- [ ] Gather b from the cache")
    script = [
        *bootstrap_script(),
        gr.tool_call("todo_write", todos=PHASE_1),
        gr.tool_call("todo_complete"),
        gr.tool_call("todo_rewind", issue=issue),
        gr.tool_calls([("read_file", {"path": "experiences.md"})]),
        gr.tool_call("write_file", path="main_plan.md", content=revised),
        gr.tool_call("todo_write", todos=["Gather b from the cache", *PHASE_1[2:]]),
        gr.text("ok"),
    ]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")

    archived = json.loads(run.workspace.read_text("archive/phase_01_rewound.json"))
    assert archived["note"] == issue
    assert archived["outcome"] == "rewound"
    assert [i["done"] for i in archived["items"]] == [True, False, False, False, False]
    assert issue in run.workspace.read_text("experiences.md")
    rewind_prompt = model.requests[12].messages[-1].text
    assert rewind_prompt.startswith("REWIND: You called todo_rewind()")
    assert issue in rewind_prompt
    assert "Blocking issue: " + issue in run.workspace.read_text("workspace_summary.md")
    # After the new todos, compaction keeps the failure note in layer 4.
    recap = model.requests[15].messages[0].text
    assert "rewound after 1 tasks" in recap
    assert "Failed approaches" in recap and "source is offline" in recap
    assert run.todos.items[0].title == "Gather b from the cache"
    phases = run.phases_df()
    assert list(phases["outcome"][:2]) == ["complete", "rewound"]
    assert phases["outcome"].isna().iloc[2]
    assert list(phases["phase"]) == [0, 1, 1]
    [rewind] = run.events.of_kind("rewind")
    assert rewind.data["source"] == "model"


def test_person_rewinds_a_running_job_at_a_safe_point(make_agent: Callable[..., gr.Agent]) -> None:
    agent = make_agent("simulated", max_iterations=400)

    async def main() -> gr.Run:
        run = agent.start("## Part A\n- a1\n- a2\n## Part B\n- b1\n- b2\n## Part C\n- c1\n")
        pressed = []

        def press(event: gr.Event) -> None:
            if event.kind == "todo_completed" and event.phase == 2 and not pressed:
                pressed.append(event.seq)
                run.rewind("Part B needs a different order")

        run.subscribe(press)
        return await run.wait()

    import asyncio

    run = asyncio.run(main())
    assert run.status == "completed"
    [rewind] = run.events.of_kind("rewind")
    assert rewind.data["source"] == "person"
    assert rewind.phase == 2
    injected = [e for e in run.events.of_kind("prompt_injected") if e.data["marker"] == "REWIND"]
    assert "A person pressed the rewind button" in injected[0].data["text"]
    assert "Part B needs a different order" in run.workspace.read_text("experiences.md")
    # The simulated agent revises the plan and still finishes the job.
    assert run.job is not None and run.plan is not None and run.plan.is_complete
    assert "Apply the lesson: Part B needs a different order" in run.workspace.read_text(
        "main_plan.md"
    )


def _instructions(phases: int) -> str:
    return "\n".join(
        f"## Section {k}\n" + "\n".join(f"- Item {k}.{i}" for i in range(1, 7))
        for k in range(1, phases + 1)
    )


def test_context_stays_bounded_across_many_phases(make_agent: Callable[..., gr.Agent]) -> None:
    run = make_agent("simulated", max_iterations=2000, store=False).run_sync(_instructions(12))
    assert run.status == "completed"
    turns = run.turns_df()
    early = turns[turns["phase"].between(2, 4)]["context_tokens"].max()
    late = turns[turns["phase"].between(10, 12)]["context_tokens"].max()
    assert late <= 1.25 * early, (early, late)
    assert turns["layer4_tokens"].max() < 600
    layers = turns[[f"layer{i}_tokens" for i in range(1, 6)]].sum(axis=1)
    assert (layers == turns["context_tokens"]).all()


def test_without_compaction_context_grows(make_agent: Callable[..., gr.Agent]) -> None:
    def total(compaction: bool) -> int:
        agent = make_agent(
            "simulated",
            max_iterations=2000,
            store=False,
            compaction=compaction,
            workspace=None,
            self_regulation=False,  # pruning would hide what compaction alone does
        )
        return int(agent.run_sync(_instructions(8)).turns_df()["input_tokens"].sum())

    assert total(False) > 3 * total(True)


def test_job_complete_ends_the_run_and_is_stored(
    make_agent: Callable[..., gr.Agent], tmp_path
) -> None:
    script = [
        gr.tool_call("write_file", path="out/report.md", content="# Report\n"),
        gr.tool_call(
            "job_complete",
            summary="Wrote the report",
            deliverables=["out/report.md"],
            confidence=0.92,
            notes="3 items flagged for review",
        ),
    ]
    run = make_agent(gr.ScriptedModel(script)).run_sync("Write a report")
    assert run.status == "completed"
    assert run.job == JobResult(
        "Wrote the report", ("out/report.md",), 0.92, "3 items flagged for review", "model"
    )
    with Store(tmp_path / "store.sqlite") as store:
        [row] = store.runs()
    assert row["status"] == "completed" and row["job_status"] == "completed"
    assert row["confidence"] == 0.92 and row["deliverables"] == ["out/report.md"]
    assert row["completed_at"] is not None


def test_last_phase_injects_job_completion_todos(make_agent: Callable[..., gr.Agent]) -> None:
    script = full_job_script()
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    finale = model.requests[22]
    display = finale.layer_text(2)
    assert "Phase: Job Completion" in display
    for title in ("Verify all deliverables", "Generate summary report", "Call job_complete()"):
        assert title in display
    [message] = finale.messages  # compacted: the recap, then the job-completion prompt
    assert message.text.startswith("PREVIOUS SUMMARY")
    assert "\nJOB COMPLETION: every phase in main_plan.md is complete" in message.text
    assert run.plan is not None and run.plan.is_complete  # the system marked the last phase
    assert run.status == "completed" and run.job is not None


def test_all_complete_plan_is_detected(make_agent: Callable[..., gr.Agent], tmp_path) -> None:
    all_done = PLAN_PHASE_1_DONE.replace("Write ← CURRENT", "Write ✓ COMPLETE")
    script = [
        *bootstrap_script(),
        gr.tool_call("write_file", path="main_plan.md", content=all_done),
        gr.text("Everything in the plan is complete."),
    ]
    model = gr.ScriptedModel(script)
    run = make_agent(model).run_sync("job")
    assert "Phase: Job Completion" in model.requests[-1].layer_text(2)
    assert run.job is not None and run.job.source == "detected"
    with Store(tmp_path / "store.sqlite") as store:
        assert store.runs()[0]["job_status"] == "completed"


def test_stopping_with_work_left_is_recorded_as_ended(
    make_agent: Callable[..., gr.Agent], tmp_path
) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("I give up")])).run_sync("job")
    assert run.status == "ended" and run.job is None
    with Store(tmp_path / "store.sqlite") as store:
        row = store.runs()[0]
    assert (row["status"], row["job_status"]) == ("ended", "ended")


def test_the_recap_states_where_the_job_stands(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel(full_cycle_script())
    make_agent(model).run_sync("job")
    recap = model.requests[19].messages[0].text
    assert "Current state:" in recap
    assert "- Working on Phase 2 of 2: Write" in recap
    assert "- 1 of 2 phases complete in main_plan.md" in recap
    assert "- 0 of 5 tasks complete in current phase" in recap
