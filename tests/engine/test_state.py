"""The run state: one object a run's parts read, and its snapshot/restore round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.state import STATE_VERSION, RunState
from gr_notebook.guardrails import TaskCompletionContext, TaskCompletionResult
from gr_notebook.guardrails.runtime import SNAPSHOT_VERSION
from tests.conftest import PHASE_1, agent_at, bootstrap_script

BUSY_SCRIPT = [
    *bootstrap_script(),
    gr.tool_call("todo_write", todos=PHASE_1),
    gr.tool_call(
        "assess_task",
        task_type="exploration",
        estimated_files=2,
        estimated_iterations=6,
        strategy="Read, then write.",
    ),
    gr.tool_call("read_file", path="instructions.md"),
    gr.tool_call("read_file", path="instructions.md"),  # redundant: feedback
    gr.tool_call(
        "summarize_progress",
        key_findings=["a finding"],
        files_examined=["instructions.md"],
        next_steps=["write"],
    ),
    gr.tool_call("write_file", path="notes/a.md", content="# A\n"),
    gr.tool_call("todo_complete"),
    gr.tool_call("check_resources"),
    gr.tool_call("todo_rewind", issue="try another way", reset_policies=True),
    gr.tool_call("list_files"),
]


def busy_agent(
    root: Path, clock: gr.FakeClock, *, script: list[Any] | None = None, **options: Any
) -> gr.Agent:
    """Every part of the state has something in it: workflow, conversation, policies,
    feedback cadence, refusals, an assessment, a summary, reads, interventions."""
    options.setdefault("max_iterations", len(BUSY_SCRIPT))
    return agent_at(
        root,
        gr.ScriptedModel(script or BUSY_SCRIPT),
        clock=clock,
        store=False,
        policies=[gr.ReadBeforeWritePolicy()],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("keep going", name="Nudge"),
                gr.FeedbackTrigger(every_n_calls=3),
            )
        ],
        task_completion_checker=gr.PlanBasedChecker(),
        interventions=gr.InterventionConfig(check_every=2, min_steps_before_intervention=0),
        **options,
    )


def json_round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.fixture
def finished(tmp_path: Path) -> tuple[gr.Agent, gr.Run, RunState]:
    clock = gr.FakeClock(1_000.0)
    agent = busy_agent(tmp_path, clock)
    run = agent.run_sync("job")
    assert run.status == "budget_exhausted"  # the cap: the run stopped mid-job
    assert run._loop is not None
    return agent, run, run._loop.state


def fresh_state(agent: gr.Agent, run: gr.Run, run_id: str = "fork") -> RunState:
    return RunState(agent.definition(), workspace=run.workspace, clock=agent.clock, run_id=run_id)


def test_every_part_of_the_state_is_in_the_snapshot(
    finished: tuple[gr.Agent, gr.Run, RunState],
) -> None:
    _, run, state = finished
    snap = state.snapshot()
    assert snap == json_round_trip(snap)  # JSON values only
    assert snap["version"] == STATE_VERSION
    assert snap["guardrails"]["version"] == SNAPSHOT_VERSION  # the guardrails' own, reused
    assert snap["guardrails"] == state.guards.snapshot() == run.guardrail_state()
    assert snap["run"] == {
        "run_id": run.run_id,
        "name": "agent",
        "workspace": str(run.workspace.root),
        "plan_file": "main_plan.md",
    }
    assert snap["counters"]["turn"] == run.turns == len(BUSY_SCRIPT)
    assert snap["counters"]["tokens"] == state.tokens > 0
    assert len(snap["events"]) == len(run.events)
    phases = snap["phases"]
    assert [s["outcome"] for s in phases["segments"]] == ["complete", "rewound"]
    assert phases["pending"] == "rewind" and phases["plan_written"] is True
    assert snap["context"]["progress"] and snap["context"]["messages"]
    regulation = snap["regulation"]
    assert regulation["summaries"][0]["key_findings"] == ["a finding"]
    assert regulation["explored"] and regulation["generation"] >= 1
    assert snap["interventions"]["step"] > 10 and snap["interventions"]["seen"]
    assert snap["stuck_detector"] is not None


def test_a_snapshot_restored_into_a_fresh_state_gives_the_same_snapshot(
    finished: tuple[gr.Agent, gr.Run, RunState],
) -> None:
    agent, run, state = finished
    saved = json_round_trip(state.snapshot())
    fork = fresh_state(agent, run)
    fork.restore(saved)
    again = json_round_trip(fork.snapshot())
    assert again["run"]["run_id"] == "fork"  # the identity is the receiving run's
    again["run"]["run_id"] = run.run_id
    assert again == saved


def test_a_restored_state_reads_as_the_original(
    finished: tuple[gr.Agent, gr.Run, RunState],
) -> None:
    agent, run, state = finished
    fork = fresh_state(agent, run)
    fork.restore(json_round_trip(state.snapshot()))
    assert fork.usage() == state.usage()
    assert fork.todos == state.todos and fork.todos.instruction == state.todos.instruction
    assert fork.phases.segments == state.phases.segments
    assert fork.phases.phase_ahead() == state.phases.phase_ahead()
    assert [(e.seq, e.kind, dict(e.data)) for e in fork.events] == [
        (e.seq, e.kind, json_round_trip(dict(e.data))) for e in state.events
    ]
    assert [type(e) for e in fork.events] == [type(e) for e in state.events]  # typed again
    specs = agent.registry.specs()
    prompt = agent.definition().system_prompt
    assert fork.context.assemble(prompt, fork.todos, specs, turn=9) == state.context.assemble(
        prompt, state.todos, specs, turn=9
    )
    assert fork.guards.policy_state("read_before_write") == state.guards.policy_state(
        "read_before_write"
    )
    assert fork.guards.feedback.calls == state.guards.feedback.calls
    assert fork.regulation is not None and state.regulation is not None
    assert fork.regulation.summaries == state.regulation.summaries
    assert fork.regulation.report() == state.regulation.report()
    assert fork.interventions is not None and state.interventions is not None
    assert fork.interventions.tracker == state.interventions.tracker
    assert fork.interventions.protected == state.interventions.protected


def test_a_restored_state_goes_on_as_the_original_would(
    finished: tuple[gr.Agent, gr.Run, RunState],
) -> None:
    """The same next step on both gives the same answer: a repeated read is redundant on
    both, and the intervention tracker counts on from the same step."""
    agent, run, state = finished
    fork = fresh_state(agent, run)
    fork.restore(json_round_trip(state.snapshot()))
    for each in (state, fork):
        assert each.regulation is not None and each.interventions is not None
        path = "notes/a.md"
        assert each.regulation.on_read(path, turn=20, call_index=1) is None  # first read
        assert each.regulation.on_read(path, turn=21, call_index=2) is not None
        each.interventions.observe("list_files", {}, "", is_error=False)
    assert fork.interventions is not None and state.interventions is not None
    assert fork.interventions.tracker == state.interventions.tracker


def test_restore_refuses_a_snapshot_that_does_not_fit(
    tmp_path: Path, finished: tuple[gr.Agent, gr.Run, RunState]
) -> None:
    agent, run, state = finished
    saved = json_round_trip(state.snapshot())
    unregulated = busy_agent(tmp_path / "other", agent.clock, self_regulation=False)  # type: ignore[arg-type]
    fork = fresh_state(unregulated, run)
    before = fork.snapshot()
    with pytest.raises(gr.RunError, match="self-regulation"):
        fork.restore(saved)
    assert fork.snapshot() == before  # refused whole
    with pytest.raises(gr.RunError, match="version"):
        fresh_state(agent, run).restore({**saved, "version": 99})
    with pytest.raises(gr.RunError, match="not a run state snapshot"):
        fresh_state(agent, run).restore({**saved, "counters": {}})
    with pytest.raises(gr.RunError, match="fresh run state"):
        state.restore(saved)  # it has events: restoring over them would lose them
    for damaged in (
        {**saved, "pending": {"rewinds": []}},  # a part read last is missing
        {key: value for key, value in saved.items() if key != "guardrails"},
    ):
        fresh = fresh_state(agent, run)
        untouched = fresh.snapshot()
        with pytest.raises(gr.RunError, match="not a run state snapshot"):
            fresh.restore(damaged)
        assert fresh.snapshot() == untouched and len(fresh.events) == 0  # nothing applied


def test_the_guardrails_read_the_run_state(tmp_path: Path) -> None:
    """Completion checkers see the run's identity, todos and usage through the one state."""
    seen: list[TaskCompletionContext] = []

    def checker(context: TaskCompletionContext) -> TaskCompletionResult:
        seen.append(context)
        return TaskCompletionResult.ok()

    run = agent_at(
        tmp_path, gr.ScriptedModel([gr.text("done")]), task_completion_checker=checker
    ).run_sync("job")
    [context] = seen
    assert context.run_id == run.run_id
    assert context.budget.iterations == 1 and context.budget.tokens == run.summary()["tokens_used"]
    assert context.todos == run.todos and context.workspace is run.workspace
