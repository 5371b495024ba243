"""Orders a model that listens can follow: the ``literal`` profile finishes every job, the
guidance events record each order, and ``lint_guidance`` catches the contradictions."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.examples import QUICKSTART, ExampleJob, audit_job, coding_job, corpus_job
from gr_notebook.guidance import action_of_text
from gr_notebook.history.analysis import GUIDANCE_COLUMNS
from gr_notebook.messages import Message, ToolResultBlock, ToolUseBlock
from gr_notebook.review.lint import RULES
from gr_notebook.workflow import TodoList

QUITTER_JOB = "## Gather\n- a\n- b\n- c\n- d\n## Build\n- e\n- f\n- g\n- h\n## Ship\n- i\n- j\n"


def phased_job(phases: int, steps: int = 5) -> str:
    """A job of ``phases`` sections of ``steps`` bullets each."""
    sections = [
        f"## Part {p}\n" + "".join(f"- Step {s} of part {p}\n" for s in range(1, steps + 1))
        for p in range(1, phases + 1)
    ]
    return f"# A job in {phases} parts\n\nDo it part by part.\n\n" + "\n".join(sections)


def run_model(
    tmp_path: Path,
    model: Any,
    job: ExampleJob | str,
    name: str = "ws",
    **kwargs: Any,
) -> gr.Run:
    """One run on the default guardrails unless told otherwise, with nothing stored."""
    if isinstance(job, str):
        job = ExampleJob(job)
    if isinstance(model, str):
        model = gr.SimulatedModel(model)
    kwargs.setdefault("max_iterations", 600)
    agent = gr.Agent(
        model,
        workspace=job.prepare(tmp_path / name),
        store=False,
        tools=job.toolsets,
        **kwargs,
    )
    return agent.run_sync(job.instructions)


def fired(run: gr.Run) -> list[list[int]]:
    frame = run.interventions_df()
    return frame[frame.fired][["step", "tier"]].values.tolist()


def resource_reports(run: gr.Run) -> list[dict[str, Any]]:
    """Every successful check_resources result, parsed."""
    return [
        json.loads(str(e.data["result"]).split("\n\n", 1)[0])
        for e in run.events.of_kind("tool_call")
        if e.data["tool"] == "check_resources" and not e.data.get("is_error")
    ]


def assert_finished_everything(run: gr.Run) -> None:
    assert run.status == "completed"
    assert run.job is not None
    assert run.plan is not None and run.plan.phases
    assert [p.status for p in run.plan.phases] == ["complete"] * len(run.plan.phases)
    assert gr.lint_guidance(run) == []


# -- 1. a model that obeys every order still finishes every job ---------------------------------


@pytest.mark.parametrize(
    "job",
    [
        pytest.param(ExampleJob(QUICKSTART), id="quickstart"),
        pytest.param(ExampleJob(phased_job(8)), id="eight_phases"),
        pytest.param(audit_job(), id="audit"),
        pytest.param(coding_job(), id="coding"),
    ],
)
def test_literal_completes_the_job_under_default_guardrails(
    tmp_path: Path, job: ExampleJob
) -> None:
    run = run_model(tmp_path, "literal", job)
    assert_finished_everything(run)


def test_literal_completes_a_thirty_phase_job(tmp_path: Path) -> None:
    run = run_model(tmp_path, "literal", phased_job(30))
    assert_finished_everything(run)
    assert run.plan is not None and len(run.plan.phases) == 30


# -- 2./3. a healthy run hears no warning, no wrap-up and no refusal ----------------------------


@pytest.fixture(scope="module", params=["diligent", "literal"])
def healthy_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    return run_model(tmp_path_factory.mktemp(request.param), request.param, QUICKSTART)


def test_a_healthy_run_is_never_told_to_wrap_up(healthy_run: gr.Run) -> None:
    assert healthy_run.status == "completed" and healthy_run.job is not None
    reports = resource_reports(healthy_run)
    assert reports  # the regulated agent does check its resources
    assert not [r for r in reports if str(r["recommendation"]).startswith("WARNING")]
    guidance = healthy_run.guidance_df()
    checks = guidance[guidance.source == "check_resources"]
    assert len(checks) == len(reports)
    assert not checks.text.str.startswith("WARNING").any()
    assert "wrap_up" not in set(guidance.action.dropna())


def test_resource_percentages_stay_within_the_limits(healthy_run: gr.Run) -> None:
    reports = resource_reports(healthy_run)
    assert all(0 <= r["percentage_used"] <= 100 for r in reports)
    guidance = healthy_run.guidance_df()
    assert (guidance.limits_pct.dropna() <= 100).all()
    calls = healthy_run.events.of_kind("model_call")
    assert calls
    for event in calls:
        d = event.data
        if d.get("tokens_budget"):
            assert d["budget_tokens_used"] / d["tokens_budget"] <= 1
        assert d["iterations_max"]
        assert d["budget_iterations_used"] / d["iterations_max"] <= 1


def test_no_intervention_refusal_or_wrap_up_in_a_healthy_run(healthy_run: gr.Run) -> None:
    assert fired(healthy_run) == []
    refused = [e for e in healthy_run.events.of_kind("completion_check") if not e.data["complete"]]
    assert refused == []
    assert not healthy_run.completion_df().query("complete == False").shape[0]
    assert "wrap_up" not in set(healthy_run.guidance_df().action.dropna())
    assert gr.lint_guidance(healthy_run) == []


@pytest.mark.parametrize("profile", ["diligent", "literal"])
def test_budget_meters_stay_within_a_token_budget(tmp_path: Path, profile: str) -> None:
    budget = gr.Budget(max_tokens=2_000_000, max_iterations=600)
    run = run_model(tmp_path, profile, QUICKSTART, budget=budget, max_iterations=None)
    assert run.status == "completed" and run.job is not None
    calls = run.events.of_kind("model_call")
    assert calls and all(e.data["tokens_budget"] for e in calls)  # the run's or a phase's
    assert {e.data["tokens_budget"] for e in calls if e.data["budget_scope"] == "the run"} == {
        2_000_000
    }
    for event in calls:
        d = event.data
        assert d["budget_tokens_used"] / d["tokens_budget"] <= 1
        assert d["budget_iterations_used"] / d["iterations_max"] <= 1
    reports = resource_reports(run)
    assert reports and all(r["percentage_used"] <= 100 for r in reports)
    assert not [r for r in reports if str(r["recommendation"]).startswith("WARNING")]


# -- 4. a tight hard limit: the literal agent wraps up in time, the diligent one does not ------


def test_literal_wraps_up_before_a_tight_iteration_cap(tmp_path: Path) -> None:
    run = run_model(tmp_path, "literal", QUICKSTART, max_iterations=40)
    # it obeys and reports the job with work left: the cap ended the job, not a success
    assert run.status == "budget_exhausted"
    assert run.job is not None
    assert "told to wrap up" in str(run.reason) and "work left" in str(run.reason)
    assert len(run.turns_df()) < 40
    guidance = run.guidance_df()
    warned = guidance[guidance.action == "wrap_up"]
    assert len(warned) >= 1 and (warned.limits_pct > 80).all()
    # the order stands on the todo layer once the limits pass 80% (33 of 40 turns)
    first = warned.iloc[0]
    assert first.source == "todo_layer" and first.turn == 33
    assert gr.lint_guidance(run) == []


def test_a_tight_cap_is_announced_before_check_resources_is_due(tmp_path: Path) -> None:
    """Five turns in all: the run is told to wrap up at turn 4, and does."""
    run = run_model(tmp_path, "literal", QUICKSTART, max_iterations=5)
    orders = run.guidance_df()
    assert "wrap_up" in set(orders[orders.source == "todo_layer"].action)
    assert run.status == "budget_exhausted" and run.job is not None and run.turns <= 5


def test_diligent_ignores_the_warning_and_hits_the_cap(tmp_path: Path) -> None:
    run = run_model(tmp_path, "diligent", QUICKSTART, max_iterations=40)
    assert run.status == "budget_exhausted"
    assert run.job is None
    guidance = run.guidance_df()
    assert ((guidance.source == "check_resources") & (guidance.action == "wrap_up")).any()


# -- 5. planted conflicts, each caught by its rule ----------------------------------------------


class StopNow:
    """A feedback provider that tells the model to stop whatever the state of the job."""

    name = "StopNow"

    def should_run(self, *, context: gr.guardrails.FeedbackContext) -> bool:
        return True

    def provide(self, *, context: gr.guardrails.FeedbackContext) -> gr.Feedback:
        return gr.Feedback(provider_name=self.name, summary="Stop now, you are done.")


def stop_now() -> gr.FeedbackProviderConfig:
    return gr.FeedbackProviderConfig(
        provider=StopNow(), trigger=gr.FeedbackTrigger(every_n_calls=3)
    )


def test_action_of_text_reads_a_stop_order() -> None:
    assert action_of_text("Stop now, you are done.") == "wrap_up"
    assert action_of_text("Please narrow the scope to the core.") == "narrow_scope"
    assert action_of_text("The plan looks fine.") is None


def test_a_premature_stop_order_is_flagged_and_obeyed(tmp_path: Path) -> None:
    stopped = run_model(tmp_path, "literal", QUICKSTART, "stopped", feedback_providers=[stop_now()])
    conflicts = gr.lint_guidance(stopped)
    flagged = [c for c in conflicts if c.rule == "wrap_up_with_work_left"]
    assert flagged
    assert flagged[0].sources == ("feedback:StopNow",)
    assert "Stop now, you are done." in flagged[0].texts[0]
    guidance = stopped.guidance_df()
    orders = guidance[guidance.source == "feedback:StopNow"]
    assert len(orders) >= 1 and set(orders.action) == {"wrap_up"}
    # the literal agent obeys: it ends with work left
    assert stopped.plan is None or any(p.status != "complete" for p in stopped.plan.phases)
    assert len(stopped.turns_df()) < 20
    assert stopped.job is None or stopped.job.confidence < 0.5
    # without the provider the same agent finishes every phase
    free = run_model(tmp_path, "literal", QUICKSTART, "free")
    assert_finished_everything(free)


def event(seq: int, kind: str, turn: int, data: Mapping[str, Any]) -> gr.Event:
    """An event as the loop records it: an order's record sits under ``directive``."""
    if kind == "guidance":
        data = {"directive": dict(data)}
    return gr.Event(seq, kind, turn, 1, float(seq), dict(data))


def order(
    source: str,
    action: str | None,
    text: str = "",
    *,
    reads: Iterable[str] = (),
    avoid_reads: Iterable[str] = (),
    tasks_left: int = 3,
    phases_left: int = 2,
    job_done: bool = False,
    limits_pct: float | None = 10.0,
    from_limits: bool = False,
) -> dict[str, Any]:
    return {
        "source": source,
        "action": action,
        "text": text,
        "reads": list(reads),
        "avoid_reads": list(avoid_reads),
        "from_limits": from_limits,
        "phase_name": "Survey",
        "phase_kind": "phase",
        "tasks_left": tasks_left,
        "phases_left": phases_left,
        "job_done": job_done,
        "tokens_pct": None,
        "iterations_pct": limits_pct,
        "deadline_pct": None,
        "limits_pct": limits_pct,
    }


def read(path: str) -> dict[str, Any]:
    return {"tool": "read_file", "input": {"path": path}, "is_error": False, "result": "x"}


TRANSITION = order(
    "prompt:PHASE TRANSITION",
    "write_todos",
    "PHASE TRANSITION: 1. Read main_plan.md, instructions.md and workspace_summary.md.",
    reads=["main_plan.md", "instructions.md", "workspace_summary.md"],
)
REBUKE = order(
    "feedback:Redundancy",
    None,
    "<feedback provider='Redundancy'>You already read main_plan.md.</feedback>",
    avoid_reads=["main_plan.md"],
)


def rules(events: Iterable[gr.Event]) -> list[str]:
    return [c.rule for c in gr.lint_guidance(events)]


def test_a_rebuke_for_the_requested_read_is_caught() -> None:
    events = [
        event(1, "guidance", 1, TRANSITION),
        event(2, "tool_call", 2, read("main_plan.md")),
        event(3, "guidance", 2, REBUKE),
    ]
    [conflict] = gr.lint_guidance(events)
    assert conflict.rule == "rebuke_for_requested_read" and conflict.turn == 2
    assert conflict.sources == ("feedback:Redundancy",)
    assert "main_plan.md" in conflict.message


def test_a_rebuke_for_a_second_read_is_fair() -> None:
    events = [
        event(1, "guidance", 1, TRANSITION),
        event(2, "tool_call", 2, read("main_plan.md")),
        event(3, "tool_call", 3, read("./main_plan.md")),
        event(4, "guidance", 3, REBUKE),
    ]
    assert rules(events) == []


def test_a_rebuke_for_an_unrequested_file_is_fair() -> None:
    rebuke = {**REBUKE, "avoid_reads": ["data/notes.md"]}
    events = [
        event(1, "guidance", 1, TRANSITION),
        event(2, "tool_call", 2, read("data/notes.md")),
        event(3, "guidance", 2, rebuke),
    ]
    assert rules(events) == []


def test_two_orders_in_one_turn_that_clash_are_caught() -> None:
    work = order("todo_layer", "work_on_task", "Complete task 2, then call todo_complete()")
    stop = order("feedback:StopNow", "wrap_up", "Stop now, you are done.", limits_pct=90.0)
    events = [event(1, "guidance", 4, work), event(2, "guidance", 4, stop)]
    conflicts = gr.lint_guidance(events)
    assert [c.rule for c in conflicts] == ["conflicting_orders"]
    assert set(conflicts[0].sources) == {"todo_layer", "feedback:StopNow"}
    assert conflicts[0].turn == 4
    # orders that are not standing ones clash only when given in the same turn
    rethink = order("intervention", "change_approach", "STRATEGY CHECK: re-read the plan.")
    apart = [event(1, "guidance", 4, stop), event(2, "guidance", 5, rethink)]
    assert "conflicting_orders" not in rules(apart)
    together = [event(1, "guidance", 5, stop), event(2, "guidance", 5, rethink)]
    assert rules(together) == ["conflicting_orders"]


def test_the_standing_todo_order_clashes_with_a_later_wrap_up() -> None:
    work = order("todo_layer", "work_on_task", "Complete task 2, then call todo_complete()")
    stop = order("check_resources", "wrap_up", "WARNING: Low on resources.", limits_pct=90.0)
    events = [event(1, "guidance", 3, work), event(2, "guidance", 6, stop)]
    assert rules(events) == ["conflicting_orders"]


def test_a_refused_stop_after_the_job_was_done_is_caught() -> None:
    refused = order(
        "stop_refused", "work_on_task", "STOP REFUSED", job_done=True, tasks_left=0, phases_left=0
    )
    assert rules([event(1, "guidance", 9, refused)]) == ["stop_refused_after_completion"]
    still_working = order("stop_refused", "work_on_task", "STOP REFUSED")
    assert rules([event(1, "guidance", 9, still_working)]) == []


def test_a_refused_stop_after_a_wrap_up_order_is_caught() -> None:
    warn = order("check_resources", "wrap_up", "WARNING: Low on resources.", limits_pct=90.0)
    refused = order("prompt:STOP REFUSED", "work_on_task", "STOP REFUSED", limits_pct=92.0)
    events = [event(1, "guidance", 5, warn), event(2, "guidance", 7, refused)]
    assert rules(events) == ["stop_refused_after_wrap_up"]


def test_narrowing_the_scope_far_from_the_limits_is_caught() -> None:
    narrow = order("assess_task", "narrow_scope", "Narrow the scope to the core.", limits_pct=10)
    assert rules([event(1, "guidance", 2, narrow)]) == ["narrow_scope_within_limits"]
    called_for = order(
        "assess_task",
        "narrow_scope",
        "Narrow the scope: the hard limits leave 12 iterations.",
        limits_pct=10,
        from_limits=True,
    )
    assert rules([event(1, "guidance", 2, called_for)]) == []
    near = order("assess_task", "narrow_scope", "Narrow the scope.", limits_pct=85)
    assert rules([event(1, "guidance", 2, near)]) == []


def test_every_rule_is_documented() -> None:
    assert set(RULES) == {
        "wrap_up_with_work_left",
        "rebuke_for_requested_read",
        "conflicting_orders",
        "stop_refused_after_completion",
        "stop_refused_after_wrap_up",
        "narrow_scope_within_limits",
    }
    assert gr.review.lint.RULES is RULES
    assert gr.lint_guidance([]) == []


# -- 6. guidance_df ------------------------------------------------------------------------------


def test_guidance_df_records_every_kind_of_order(tmp_path: Path) -> None:
    run = run_model(tmp_path, "literal", QUICKSTART)
    guidance = run.guidance_df()
    assert list(guidance.columns) == GUIDANCE_COLUMNS
    # what the issue asks of each row: the turn, the source, the text, and the state then
    assert {"turn", "source", "text", "phase", "tasks_left", "limits_pct"} <= set(guidance)
    assert {"tokens_pct", "iterations_pct", "deadline_pct"} <= set(guidance)
    assert {
        "todo_layer",
        "prompt:PHASE TRANSITION",
        "check_resources",
        "assess_task",
        "prompt:JOB COMPLETION",
    } <= set(guidance.source)
    transitions = guidance[guidance.source == "prompt:PHASE TRANSITION"]
    assert len(transitions) == 3  # after the bootstrap and after two of three phases
    for reads in transitions.reads:
        assert {"main_plan.md", "instructions.md"} <= set(reads)
    assert set(transitions.action) == {"write_todos"}
    assert "feedback:Redundancy" not in set(guidance.source)  # requested re-reads are fine
    assert list(guidance.seq) == sorted(guidance.seq)
    assert not guidance.job_done.iloc[:-1].astype(bool).any()
    # one row per order, each recorded on the event that delivered it
    assert len(guidance) == sum("directive" in e.data for e in run.events)
    carriers = {run.events[int(seq)].kind for seq in guidance.seq}
    assert carriers == {"guidance", "prompt_injected", "tool_call"}


# -- 7. the misbehaving profiles still meet their guardrails ------------------------------------


def test_looper_is_rewound(tmp_path: Path) -> None:
    job = coding_job()
    run = run_model(tmp_path, "looper", job, max_iterations=300)
    assert run.status == "completed" and run.job is not None
    assert run.events.of_kind("rewind") or run.events.of_kind("progress_check")
    assert fired(run)
    assert "prompt:REWIND" in set(run.guidance_df().source)


def test_drifter_gets_a_strategy_check(tmp_path: Path) -> None:
    job = coding_job()
    run = run_model(tmp_path, "drifter", job, max_iterations=300)
    assert run.status == "completed" and run.job is not None
    assert [tier for _, tier in fired(run)] == [1]
    assert "intervention" in set(run.guidance_df().source)


def test_token_hog_is_told_of_redundant_reads_and_prunes(tmp_path: Path) -> None:
    run = run_model(tmp_path, "token_hog", corpus_job(), max_iterations=300)
    assert run.status == "completed" and run.job is not None
    assert "Redundancy" in set(run.feedback_df().provider)
    assert run.events.of_kind("conversation_pruned")
    guidance = run.guidance_df()
    rebukes = guidance[guidance.source == "feedback:Redundancy"]
    assert len(rebukes) >= 1 and all(len(a) >= 1 for a in rebukes.avoid_reads)


def test_quitter_is_refused_until_the_work_is_done(tmp_path: Path) -> None:
    run = run_model(
        tmp_path,
        "quitter",
        QUITTER_JOB,
        max_iterations=400,
        task_completion_checker=gr.PlanBasedChecker(),
    )
    assert run.job is not None
    refused = [e for e in run.events.of_kind("completion_check") if not e.data["complete"]]
    assert len(refused) >= 1
    guidance = run.guidance_df()
    assert guidance.source.isin(["stop_refused", "prompt:STOP REFUSED"]).any()
    assert gr.lint_guidance(run) == []


# -- 8. the prompts name no absolute order ------------------------------------------------------


def system_text(tmp_path: Path, **kwargs: Any) -> str:
    model = gr.ScriptedModel([gr.text("done")])
    run_model(tmp_path, model, "# Job\n\n## Part\n- a\n", **kwargs)
    assert model.requests
    return model.requests[0].layer_text(1)


def test_the_regulated_system_prompt_has_no_absolute_order(tmp_path: Path) -> None:
    text = system_text(tmp_path)
    assert text
    assert "ONLY JOB" not in text
    assert "ALWAYS call assess_task FIRST" not in text
    assert "RESOURCE MANAGEMENT" in text


def test_the_unregulated_system_prompt_keeps_the_only_job(tmp_path: Path) -> None:
    text = system_text(tmp_path, self_regulation=False)
    assert "YOUR ONLY JOB" in text
    assert "RESOURCE MANAGEMENT" not in text


@pytest.mark.parametrize("regulated", [True, False])
def test_the_transition_prompt_asks_for_an_assessment_only_when_regulated(
    tmp_path: Path, regulated: bool
) -> None:
    run = run_model(tmp_path, "diligent", QUICKSTART, self_regulation=regulated)
    assert run.status == "completed"
    guidance = run.guidance_df()
    transitions = list(guidance[guidance.source == "prompt:PHASE TRANSITION"].text)
    assert transitions
    assert all(("Call assess_task" in t) is regulated for t in transitions)


# -- 9. the literal agent obeys each kind of order ---------------------------------------------


def test_told_to_narrow_the_scope_the_literal_agent_narrows_it(tmp_path: Path) -> None:
    """A 20-step phase under a 50-turn cap: the limits cannot fit the estimate."""
    job = "# One big phase\n\n## Everything\n" + "".join(
        f"- Write section {i}\n" for i in range(1, 21)
    )
    run = run_model(tmp_path, "literal", job, max_iterations=50)
    guidance = run.guidance_df()
    narrow = guidance[guidance.action == "narrow_scope"]
    assert list(narrow.source) == ["assess_task"] and narrow.from_limits.all()
    assert "narrow the scope" in narrow.text.iloc[0] or narrow.text.iloc[0].endswith("…")
    written = [len(e.data["titles"]) for e in run.events.of_kind("todos_written")]
    assert written[:3] == [5, 20, 12]  # bootstrap, the phase, the phase narrowed to fit
    assert run.status == "completed" and run.job is not None
    assert gr.lint_guidance(run) == []
    diligent = run_model(tmp_path, "diligent", job, name="deaf", max_iterations=50)
    assert diligent.status == "budget_exhausted"  # it kept all 20 and ran out


def test_a_wrap_up_order_stands_over_the_next_phase(tmp_path: Path) -> None:
    """Warned in the turn that finishes a phase, the model gets no transition prompt that
    orders the next phase: the two orders would contradict each other."""
    run = run_model(tmp_path, "diligent", QUICKSTART, max_iterations=40)
    guidance = run.guidance_df()
    first = int(guidance[guidance.action == "wrap_up"].seq.min())
    later = guidance[guidance.seq >= first]
    assert "prompt:PHASE TRANSITION" not in set(later.source)
    assert set(later[later.source == "todo_layer"].action) == {"wrap_up"}
    assert {"prompt:REWIND", "prompt:JOB COMPLETION"}.isdisjoint(later.source)
    assert gr.lint_guidance(run) == []


def _situation(*messages: Message) -> Any:
    from gr_notebook.models.base import ModelRequest
    from gr_notebook.models.simulated.situation import Situation

    return Situation.read(ModelRequest(system=(), messages=tuple(messages), tools=()))


def test_told_a_read_is_redundant_the_literal_agent_skips_it() -> None:
    from gr_notebook.models.simulated.diligent import respond
    from gr_notebook.models.simulated.literal import without_rebuked_reads

    rebuked = ToolResultBlock(
        "t1", "# notes\n\n<feedback provider='Redundancy'>\nYou already read notes.md\n</feedback>"
    )
    s = _situation(
        Message("assistant", (ToolUseBlock("t1", "read_file", {"path": "notes.md"}),)),
        Message("user", (rebuked,)),
    )
    plan = respond(
        "Reading and writing.",
        [("read_file", {"path": "notes.md"}), ("write_file", {"path": "a.md", "content": "x"})],
    )
    kept = without_rebuked_reads(s, plan)
    assert [(u.name, u.input.get("path")) for u in kept.tool_uses] == [("write_file", "a.md")]
    other = respond("Reading.", [("read_file", {"path": "plan.md"})])
    assert without_rebuked_reads(s, other) is other


def test_a_strategy_check_makes_the_literal_agent_reread_the_plan(tmp_path: Path) -> None:
    def detector(turn: int, todos: TodoList) -> str | None:
        if turn == 20:
            return "STRATEGY CHECK: no progress lately. Re-read the plan and change approach."
        return None

    run = run_model(
        tmp_path,
        "literal",
        QUICKSTART,
        max_iterations=200,
        stuck_detector=detector,
        interventions=None,  # no safeguard holds the detector off while the agent edits
    )
    after = [e.data for e in run.events.of_kind("tool_call") if e.turn == 21]
    assert {"tool": "read_file", "path": "main_plan.md"} in [
        {"tool": d["tool"], "path": d["input"].get("path")} for d in after
    ]
    assert_finished_everything(run)


def test_a_progress_check_leads_the_literal_agent_on_to_the_end(tmp_path: Path) -> None:
    """Seed 000's progress check, both ways it is worded: the order names the next action,
    an empty list is written, and the job is finished with no order contradicting another."""
    run = run_model(tmp_path, "literal", audit_job(), stuck_turns=2)
    checks = run.events.of_kind("progress_check")
    empty = [e.turn for e in checks if "has been empty" in e["prompt"]]
    assert empty and len(checks) > len(empty)
    assert all(e["prompt"].startswith("PROGRESS CHECK: your todo list has") for e in checks)
    guidance = run.guidance_df()
    orders = guidance[guidance.source == "prompt:PROGRESS CHECK"]
    assert len(orders) == len(checks)
    assert set(orders.action) == {"change_approach", "write_todos"}
    turns = [e.turn for e in checks] + [run.turns + 1]
    written = [e.turn for e in run.events.of_kind("todos_written")]
    for turn in empty:  # the list is written before the next check
        after = turns[turns.index(turn) + 1]
        assert any(turn < w < after for w in written), turn
    assert_finished_everything(run)


def test_the_literal_agent_checks_resources_as_often_as_asked(tmp_path: Path) -> None:
    """The prompt says every 3-5 tool calls: the literal agent keeps to the low end."""

    def gaps(run: gr.Run) -> list[int]:
        at = [i for i, t in enumerate(run.tool_calls_df().tool) if t == "check_resources"]
        return [b - a for a, b in itertools.pairwise(at)]

    literal = gaps(run_model(tmp_path, "literal", QUICKSTART))
    diligent = gaps(run_model(tmp_path, "diligent", QUICKSTART, name="diligent"))
    assert len(literal) > len(diligent)
    assert sorted(literal)[len(literal) // 2] <= 5  # the median: 4 calls or fewer between


def test_a_system_rewind_says_who_rewound(tmp_path: Path) -> None:
    """Tier 2 rewinds for the agent: the prompt must not claim a person pressed the button."""
    run = run_model(
        tmp_path,
        "stuck_reader",
        coding_job(),
        max_iterations=300,
        interventions=gr.InterventionConfig.more_protective(),
    )
    guidance = run.guidance_df()
    rewinds = guidance[guidance.source == "prompt:REWIND"].text
    assert len(rewinds) >= 1
    assert all(t.startswith("REWIND: The system rewound your todo list") for t in rewinds)


# -- 10. regressions from the review: each order must fit the others -------------------------


def test_a_token_cap_narrows_like_an_iteration_cap(tmp_path: Path) -> None:
    run = run_model(
        tmp_path,
        "literal",
        QUICKSTART,
        budget=gr.Budget(max_tokens=60_000, max_iterations=200),
        max_iterations=None,
    )
    assessed = run.guidance_df().query("source == 'assess_task'")
    assert assessed.action.iloc[0] == "narrow_scope" and assessed.from_limits.iloc[0]
    written = [len(e.data["titles"]) for e in run.events.of_kind("todos_written")]
    assert written[1:3] == [5, 1]  # phase 1 written, then cut to what the tokens pay for
    assert gr.lint_guidance(run) == []


def test_past_the_wrap_up_mark_an_assessment_repeats_the_order() -> None:
    usage = gr.Budget(max_tokens=40_000, max_iterations=200).usage(
        tokens=33_000, iterations=12, elapsed_s=0
    )
    from gr_notebook.guardrails.regulation import ResourceReport

    report = ResourceReport.of(usage, None)
    assert report.wrap_up and report.limits_percentage_used == 82.5


async def test_no_allotment_is_made_past_the_wrap_up_mark(make_agent: Any) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("read_file", path="instructions.md")] * 5
        + [
            gr.tool_call(
                "assess_task",
                task_type="exploration",
                estimated_files=1,
                estimated_iterations=3,
                strategy="s",
            ),
            gr.text("ok"),
        ]
    )
    run = await make_agent(model, max_iterations=6).run("job")
    [assessed] = [e for e in run.events.of_kind("tool_call") if e.data["tool"] == "assess_task"]
    assert assessed.data["result"].startswith("No budget for the phase ahead")
    assert assessed.data["directive"]["action"] == "wrap_up"
    assert not run.events.of_kind("task_assessed")


async def rewound_when(
    tmp_path: Path, profile: str, max_iterations: int, ready: Callable[[gr.Run], bool]
) -> gr.Run:
    """The quickstart job, rewound by a person once ``ready`` holds, run to its end."""
    job = ExampleJob(QUICKSTART)
    agent = gr.Agent(
        gr.SimulatedModel(profile),
        workspace=job.prepare(tmp_path / "ws"),
        store=False,
        max_iterations=max_iterations,
    )
    run = agent.start(job.instructions)
    while not run.done and not ready(run):
        await asyncio.sleep(0)
    run.rewind("the work so far went wrong")
    return await run.wait()


def wrap_up_ordered(run: gr.Run) -> bool:
    return any((e.data.get("directive") or {}).get("action") == "wrap_up" for e in run.events)


async def test_a_persons_rewind_after_a_wrap_up_asks_for_no_new_list(tmp_path: Path) -> None:
    run = await rewound_when(tmp_path, "diligent", 40, wrap_up_ordered)
    orders = run.guidance_df()
    first = int(orders[orders.action == "wrap_up"].seq.min())
    assert "prompt:REWIND" not in set(orders[orders.seq > first].source)
    assert run.events.of_kind("rewind")  # the rewind itself is recorded
    assert gr.lint_guidance(run) == []


async def test_an_assessment_after_a_bootstrap_rewind_covers_phase_1(tmp_path: Path) -> None:
    run = await rewound_when(tmp_path, "literal", 200, lambda r: r.turns >= 3)
    first = run.events.of_kind("task_assessed")[0].data
    assert (first["phase"], first["scope"]) == (1, "Phase 1 'Survey'")
    assert_finished_everything(run)


def test_a_persons_denial_is_theirs_and_the_literal_agent_narrows(tmp_path: Path) -> None:
    run = run_model(
        tmp_path,
        "literal",
        QUICKSTART,
        max_iterations=200,
        confirm=lambda request: request.estimated_tokens <= 50_000,
        confirm_above_tokens=50_000,
    )
    orders = run.guidance_df()
    assert set(orders[orders.source == "confirmation"].action) == {"narrow_scope"}
    asked = [e.data for e in run.events.of_kind("tool_call") if e.data["tool"] == "assess_task"]
    halves = [a["input"]["estimated_iterations"] for a in asked if not a["is_error"]]
    assert halves and all(h == 7 for h in halves)  # asked again for half of 14
    written = [len(e.data["titles"]) for e in run.events.of_kind("todos_written")]
    assert 2 in written  # a phase cut to half its tasks
    assert "Left out to fit the budget" in run.workspace.read_text("notes.md")
    assert gr.lint_guidance(run) == []


@pytest.mark.parametrize(
    "text",
    [
        "Do not call job_complete yet",
        "Never stop now, keep going",
        "Don't wrap up until the tests pass",
        "You're done with the survey; start the next phase",
        "Wrap up later, after the review.",
    ],
)
def test_a_negated_or_deferred_stop_is_not_an_order_to_stop(text: str) -> None:
    assert action_of_text(text) is None
