"""A phase's allotment under the default cap: the README's and the notebooks' jobs finish, an
allotment a phase outgrows while the limits are far is extended with a line saying so, and
no meter or report of a healthy run goes past 100% (decisions 295-297)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.state import RunTracker
from gr_notebook.display.timeline import describe
from gr_notebook.events import AllotmentExtendedEvent
from gr_notebook.examples import QUICKSTART
from gr_notebook.guardrails.budget import DEFAULT_MAX_ITERATIONS, Budget
from gr_notebook.guardrails.budget_table import TaskAssessment
from gr_notebook.guardrails.regulation import RegulationSettings, SelfRegulation
from gr_notebook.guardrails.resources import ResourceReport, allotment_in_force
from gr_notebook.guidance import action_of_text
from gr_notebook.jupyter.magics import status_line
from gr_notebook.workflow.workspace import Workspace

README_JOB = """
# A field guide to garden birds
## Survey
- List the common species
- Note their habitats
## Writing
- Draft the species pages
- Write the introduction
"""
EIGHT_PARTS = "# Guide\n\n" + "".join(
    f"## Part {k}\n" + "".join(f"- Write section {k}.{j}\n" for j in range(1, 6)) + "\n"
    for k in range(1, 9)
)
EXTENDED = "ALLOTMENT EXTENDED: "


def allotment(**changes: Any) -> TaskAssessment:
    """18 iterations and 75,000 tokens for phase 2, assessed at turn 20 with 60,000 used."""
    base = TaskAssessment(
        task_type="exploration",
        estimated_files=5,
        estimated_iterations=14,
        strategy="one task at a time",
        multiplier=1.0,
        token_budget=75_000,
        max_iterations=18,
        guidance="Budget for Phase 2 'Part 2': 75,000 tokens and 18 iterations.",
        phase=2,
        scope="Phase 2 'Part 2'",
        tokens_at=60_000,
        iterations_at=20,
    )
    return replace(base, **changes)


def usage(tokens: int, iterations: int, budget: Budget | None = None) -> gr.BudgetUsage:
    return (budget or Budget()).usage(tokens=tokens, iterations=iterations, elapsed_s=0.0)


_FIGURE = re.compile(r'"(\w+)": (-?[0-9.]+)')


def reports(run: gr.Run) -> list[dict[str, float]]:
    """The figures of every check_resources answer (the event clips a long one's text)."""
    return [
        {key: float(value) for key, value in _FIGURE.findall(str(e.data["result"]))}
        for e in run.events.of_kind("tool_call")
        if e.data["tool"] == "check_resources" and not e.data.get("is_error")
    ]


def watched(
    agent: gr.Agent,
    job: str,
    *,
    add_todos: int = 0,
) -> tuple[gr.Run, list[Any]]:
    """The run, and every meter and status line the dashboard would have shown after each
    model call, assessment and extension. ``add_todos``: a person adds that many tasks to
    each phase once its first task is done, so the phase outgrows its allotment."""
    tracker, shown = RunTracker(), []

    async def go() -> gr.Run:
        run = agent.start(job)

        def on(event: gr.Event) -> None:
            tracker.add(event)
            if event.kind in ("model_call", "task_assessed", "allotment_extended"):
                shown.append((event.turn, tracker.meters(run), status_line(run)))
            if first_written(event):
                for n in range(add_todos):
                    run.add_todo(f"Cross-check section {event.phase}.{n + 1} with the sources")

        run.subscribe(on)
        return await run.wait()

    return asyncio.run(go()), shown


def first_written(event: gr.Event) -> bool:
    """The model finished the first of a phase's own tasks (a "Write ..." bullet)."""
    data = event.data
    return (
        event.kind == "todo_completed"
        and event.phase >= 1
        and data["index"] == 1
        and data["source"] == "model"
        and str(data["title"]).startswith("Write")
    )


def assert_within_100(shown: list[Any]) -> None:
    for turn, meters, line in shown:
        for meter in meters:
            assert meter.fraction is None or meter.fraction <= 1, (turn, meter.describe())
        for used, allotted in re.findall(r"\((\d+)/(\d+) assessed", line):
            assert int(used) <= int(allotted), (turn, line)


# -- (a) the default cap ------------------------------------------------------------------------


def test_the_default_cap_has_room_for_the_quickstart_below_the_wrap_up_mark() -> None:
    assert Budget().max_iterations == DEFAULT_MAX_ITERATIONS == 200
    assert gr.Agent("simulated", store=False).max_iterations == DEFAULT_MAX_ITERATIONS
    # the quickstart needs 53 turns: the cap leaves it more than twice that before 80%
    assert DEFAULT_MAX_ITERATIONS * 0.8 > 2 * 53


@pytest.mark.parametrize("model", ["simulated", "simulated:literal"])
@pytest.mark.parametrize("job", [QUICKSTART, README_JOB], ids=["quickstart", "readme"])
def test_the_readme_and_quickstart_jobs_finish_under_a_plain_agent(
    tmp_path: Path, model: str, job: str
) -> None:
    run = gr.Agent(model, workspace=tmp_path / "ws", store=False).run_sync(job)
    assert run.status == "completed" and run.job is not None, run.reason
    assert run.plan is not None and all(p.status == "complete" for p in run.plan.phases)
    assert gr.lint_guidance(run) == []
    assert run.guidance_df().limits_pct.max() < 50


# -- (c) an outgrown allotment grows while the limits are far -----------------------------------


def test_an_allotment_covers_its_usage_as_it_is() -> None:
    a = allotment()
    assert a.covering(75_000, 18, max_tokens=None, max_iterations=140) is a


def test_an_outgrown_allotment_grows_by_half_as_often_as_it_takes() -> None:
    a = allotment()
    once = a.covering(70_000, 19, max_tokens=None, max_iterations=140)
    assert once is not None and (once.max_iterations, once.token_budget) == (27, 113_000)
    assert (once.tokens_at, once.iterations_at, once.guidance) == (60_000, 20, a.guidance)
    twice = a.covering(120_000, 20, max_tokens=None, max_iterations=140)
    assert twice is not None and (twice.max_iterations, twice.token_budget) == (41, 170_000)


def test_an_allotment_grows_only_to_what_the_limits_leave() -> None:
    a = allotment()
    capped = a.covering(70_000, 19, max_tokens=100_000, max_iterations=22)
    assert capped is not None and (capped.max_iterations, capped.token_budget) == (22, 100_000)
    assert a.covering(70_000, 23, max_tokens=100_000, max_iterations=22) is None
    # an outgrown dimension at its cap ends the growth, whatever room the other has
    assert a.covering(70_000, 19, max_tokens=None, max_iterations=18) is None
    assert a.covering(101_000, 10, max_tokens=100_000, max_iterations=140) is None


@pytest.mark.parametrize("iterations", range(20, 160, 7))
@pytest.mark.parametrize("per_turn", [1_000, 4_000, 12_000])
def test_a_report_never_says_more_than_100_percent_while_the_limits_hold(
    iterations: int, per_turn: int
) -> None:
    budget = Budget(max_iterations=200, max_tokens=5_000_000)
    now = usage(60_000 + per_turn * (iterations - 20), iterations, budget)
    report = ResourceReport.of(now, allotment())
    assert report.percentage_used <= 100
    assert report.iterations_used <= report.iterations_max
    in_force = allotment_in_force(now, allotment())
    assert in_force is not None and report.budget_source == "assessment"
    assert report.scope == "Phase 2 'Part 2'"


def test_past_what_the_limits_leave_the_report_measures_the_limits() -> None:
    """The quickstart under a cap of 50: phase 3 assessed at turn 38 gets the 2 iterations
    the limits leave before 80%; past them, the run's own limits are what is measured."""
    capped = allotment(max_iterations=2, iterations_at=38, tokens_at=100_000)
    within = ResourceReport.of(usage(110_000, 40, Budget(max_iterations=50)), capped)
    assert (within.budget_source, within.iterations_used, within.iterations_max) == (
        "assessment",
        2,
        2,
    )
    past = ResourceReport.of(usage(115_000, 41, Budget(max_iterations=50)), capped)
    assert (past.budget_source, past.scope) == ("limits", "the run")
    assert (past.iterations_used, past.iterations_max) == (41, 50)
    assert past.percentage_used == past.limits_percentage_used == 82.0
    assert past.wrap_up


def test_an_obedient_agent_whose_phases_outgrow_their_allotments_is_told_so(
    tmp_path: Path,
) -> None:
    """A person adds five tasks to each of eight phases: every phase needs more than it was
    allotted, while the hard limits stay far. The literal agent, which obeys every order,
    is never told more than 100%, reads a plain line each time, and finishes the job."""
    agent = gr.Agent(
        "simulated:literal", workspace=tmp_path / "ws", store=False, max_iterations=400
    )
    run, shown = watched(agent, EIGHT_PARTS, add_todos=5)
    assert run.status == "completed" and run.job is not None, run.reason
    assert run.plan is not None and all(p.status == "complete" for p in run.plan.phases)
    assert gr.lint_guidance(run) == []
    told = reports(run)
    assert told and max(r["percentage_used"] for r in told) <= 100
    assert run.guidance_df().limits_pct.max() < 80  # the limits stayed far throughout
    assert_within_100(shown)

    extended = run.events.of_kind("allotment_extended")
    assert len(extended) >= 6
    lines = [
        e for e in run.events.of_kind("prompt_injected") if e.data["text"].startswith(EXTENDED)
    ]
    assert len(lines) == len(extended)
    first, line = extended[0].data, lines[0]
    assert (first["previous_max_iterations"], first["max_iterations"]) == (18, 27)
    assert first["limits_percentage_used"] < 20
    text = line.data["text"]
    assert text.startswith(f"{EXTENDED}{first['scope']} has needed more than the 18 iterations")
    assert f"now 27 iterations and {first['token_budget']:,} tokens" in text
    assert text.endswith("Carry on with your todo list.")
    assert line.data["directive"]["action"] == "continue"
    assert line.data["directive"]["source"] == "allotment"
    # the reader sees it on the timeline
    assert describe(extended[0]).startswith(f"Allotment for {first['scope']} extended from 18")
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    assert "allotment_extended" in {entry.kind for entry in tracker.timeline}
    # what check_resources says after the extension is measured against it
    after = [r for r in told if r["iterations_max"] == 27]
    assert after and all(r["percentage_used"] <= 100 for r in after)


class View:
    """The run as self-regulation reads it, with usage set by the test."""

    run_id = "r1"

    def __init__(self, root: Path, now: gr.BudgetUsage) -> None:
        self.workspace = Workspace(root)
        self.now = now
        self.events: list[gr.Event] = []

    def usage(self) -> gr.BudgetUsage:
        return self.now

    def emit(self, event: gr.Event) -> None:
        self.events.append(event)

    def phase_ahead(self) -> tuple[int, str]:
        return 2, "Phase 2 'Part 2'"


def test_the_extension_becomes_the_allotment_in_force(tmp_path: Path) -> None:
    view = View(tmp_path, usage(100_000, 38))
    regulation = SelfRegulation(RegulationSettings(), view)  # type: ignore[arg-type]
    regulation.assessment, regulation.answer = allotment(), allotment().guidance
    assert regulation.extend() is None  # 18 of 18: covered
    view.now = usage(130_000, 39)
    order = regulation.extend()
    assert order is not None and (order.source, order.action) == ("allotment", "continue")
    assert order.text == (
        "ALLOTMENT EXTENDED: Phase 2 'Part 2' has needed more than the 18 iterations assessed "
        "for it. The run's hard limits are 20% used, so its allotment is now 27 iterations and "
        "113,000 tokens, counted from the assessment. Carry on with your todo list."
    )
    assert action_of_text(order.text) is None  # nothing in it reads as another order
    [event] = view.events
    assert isinstance(event, AllotmentExtendedEvent)
    assert (event.previous_max_iterations, event.max_iterations) == (18, 27)
    assert (event.iterations_used, event.tokens_used, event.assessed_phase) == (19, 70_000, 2)
    saved = regulation.to_json()
    assert saved["assessment"]["max_iterations"] == 27
    assert saved["answer"] == allotment().guidance  # the assessment's own answer stands
    assert regulation.extend() is None  # once told, the extension is the allotment
    fresh = SelfRegulation(RegulationSettings(), view)  # type: ignore[arg-type]
    fresh.load_json(saved)()
    assert fresh.assessment == regulation.assessment
    # the next phase starts with no allotment: the extension lapses with its phase
    regulation.on_phase_started(3)
    assert regulation.assessment is None and regulation.answer is None


def test_no_extension_once_a_wrap_up_was_ordered_or_past_the_limits(tmp_path: Path) -> None:
    view = View(tmp_path, usage(130_000, 39))
    regulation = SelfRegulation(RegulationSettings(), view)  # type: ignore[arg-type]
    regulation.assessment = allotment()
    regulation.wrap_up = "WARNING: Low on resources. Summarize and wrap up."
    assert regulation.extend() is None and regulation.assessment == allotment()
    regulation.wrap_up = None
    view.now = usage(130_000, 39, Budget(max_iterations=45))  # 80% of 45 is 36: no room
    assert regulation.extend() is None and regulation.assessment == allotment()
    assert view.events == []


# -- (b)/(d) the meters -------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["simulated", "simulated:literal"])
def test_a_healthy_run_is_never_shown_over_100_percent(tmp_path: Path, model: str) -> None:
    run, shown = watched(gr.Agent(model, workspace=tmp_path / "ws", store=False), QUICKSTART)
    assert run.status == "completed"
    assert shown
    assert_within_100(shown)
    peak = max(m.fraction or 0 for _, meters, _ in shown for m in meters)
    assert 0.5 < peak <= 1  # the allotment meters do move


def test_a_meter_shows_the_hard_limit_once_it_caps_the_allotment(tmp_path: Path) -> None:
    """The quickstart under a cap of 50: phase 3's allotment is the 2 turns the limit
    leaves before 80%. Past them the meter shows the run's 50 turns, not 250% of 2."""
    agent = gr.Agent("simulated:literal", workspace=tmp_path / "ws", store=False, max_iterations=50)
    run, shown = watched(agent, QUICKSTART)
    assert run.status == "budget_exhausted"  # the cap is too small for the job
    assert_within_100(shown)
    capped = [e for e in run.events.of_kind("task_assessed") if e.data["max_iterations"] == 2]
    assert capped, "phase 3 is assessed at what the limits leave"
    at = capped[0].turn
    later = [meters for turn, meters, _ in shown if turn > at + 2]
    assert later
    for meters in later:
        iterations = next(m for m in meters if m.label.startswith("Iterations"))
        assert (iterations.label, iterations.limit) == ("Iterations", 50)
        assert iterations.level == "high"
    assert run.events.of_kind("allotment_extended") == []
    assert "assessed" not in status_line(run)
