"""What a reader sees, in a reader's words: timeline lines without internal codes, counts
that name what they count, symbols every font has, a todo layer that wraps between words,
and a layer that names the phase ahead between phases."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.display.render import TIMELINE_ICONS, render_dashboard, render_todos
from gr_notebook.display.state import RunTracker
from gr_notebook.display.timeline import describe, describe_held_off
from gr_notebook.events import (
    ApprovalAnsweredEvent,
    CompletionCheckEvent,
    ConfirmationEvent,
    ConversationPrunedEvent,
    EventLog,
    InterventionEvent,
    InterventionSkippedEvent,
    RunFinishedEvent,
    TaskAssessedEvent,
)
from gr_notebook.workflow.todos import TodoList
from tests.conftest import PHASE_1, bootstrap_script, complete_all

Factory = Callable[..., gr.Agent]
CODE = re.compile(r"\b[a-z]+_[a-z_]+\b")
"""A snake_case word: an internal code, where a reader expects words."""

#: Characters DejaVu Sans has, the font Debian's Chromium falls back on when no emoji font is
#: installed (checked against the installed font below, where there is one).
DEJAVU_SANS = frozenset("·–—•…←→↩↺⇊⇢⊘─═■▶◆○⚑⚖⚠✂✎✓✔✕✖❚")
DISPLAY = Path(__file__).parents[2] / "gr_notebook" / "display"
WIDGETS = Path(__file__).parents[2] / "gr_notebook" / "jupyter" / "widgets.py"


def held_off(reason: str, step: int = 20, **fields: object) -> InterventionSkippedEvent:
    values: dict[str, object] = {
        "step": step,
        "fired": False,
        "tier": 0,
        "action": None,
        "skip_reason": reason,
        "stuck_counter": 0,
        "steps_since_reset": None,
        "steps_since_progress": 0,
        "recent_edits": 0,
        "recent_tools": [],
    }
    values.update(fields)
    return InterventionSkippedEvent(**values)  # type: ignore[arg-type]


def answered(by: str, decision: str = "approve", waited_s: float = 0.8) -> str:
    return describe(
        ApprovalAnsweredEvent(
            request_id="approval-1",
            tool="write_file",
            tool_use_id=None,
            decision=decision,  # type: ignore[arg-type]
            by=by,
            waited_s=waited_s,
        )
    )


def test_an_approval_says_who_answered_in_words() -> None:
    assert answered("dashboard") == "write_file approved on the dashboard after 0.8 s"
    assert answered("code") == "write_file approved in code (run.approvals) after 0.8 s"
    assert answered("confirmer", "edit") == "write_file edited by confirm= after 0.8 s"
    assert answered("dashboard", "deny") == "write_file denied on the dashboard after 0.8 s"
    assert answered("timeout", "deny") == "write_file not approved (no answer in time) after 0.8 s"
    assert answered("stop", "deny", 0) == "write_file not approved (the run was stopped)"
    assert answered("desk") == "write_file approved on the dashboard or in code after 0.8 s"
    assert "desk" not in answered("dashboard") + answered("code")


def pruned(files: list[str]) -> str:
    return describe(
        ConversationPrunedEvent(
            messages_removed=12,
            tokens_before=9_000,
            tokens_after=2_000,
            key_findings=["a"],
            files_examined=files,
            next_steps=["b"],
            summary_turn=3,
        )
    )


def test_a_pruned_conversation_says_what_the_files_in_its_summary_are() -> None:
    assert pruned([]) == (
        "Pruned after summarize_progress: 12 messages removed, conversation 9,000 → 2,000 tokens"
    )
    assert pruned(["a.md", "b.md"]).endswith(
        "2,000 tokens; the model's summary lists 2 files it already read"
    )


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            held_off("min_steps", 5, threshold=10),
            "No intervention after 5 tool calls: too early (fewer than 10 tool calls so far)",
        ),
        (
            held_off("not_stuck", 10, threshold=3),
            "No intervention after 10 tool calls: the agent made progress since the previous check",
        ),
        (
            held_off("not_stuck", 25, stuck_counter=2, threshold=3),
            "No intervention after 25 tool calls: not stuck yet (2 checks in a row without "
            "progress; 3 count as stuck)",
        ),
        (
            held_off("grace_period", 40, steps_since_reset=4, threshold=15),
            "No intervention after 40 tool calls: grace period after a rewind or a start-over "
            "(4 of 15 tool calls since)",
        ),
        (
            held_off("actively_implementing", 35, recent_edits=4, threshold=3),
            "No intervention after 35 tool calls: the agent is busy editing (4 file edits "
            "since the previous check)",
        ),
        (  # an event recorded before the threshold was kept still reads well
            held_off("min_steps", 5),
            "No intervention after 5 tool calls: too early (5 tool calls so far)",
        ),
    ],
)
def test_a_held_off_check_says_why_in_words(event: InterventionSkippedEvent, line: str) -> None:
    assert describe(event) == line
    assert not CODE.search(line) and "step" not in line


def test_checks_held_off_in_a_row_name_the_tool_calls_they_span() -> None:
    event = held_off("not_stuck", 60, threshold=3)
    assert describe_held_off(event, first_step=15, count=10) == (
        "No intervention at 10 checks, from 15 to 60 tool calls: the agent made progress "
        "since the previous check"
    )


def test_an_intervention_says_what_it_does_and_counts_tool_calls() -> None:
    fired = InterventionEvent(
        step=60,
        fired=True,
        tier=2,
        action="rewind",
        skip_reason=None,
        stuck_counter=3,
        steps_since_reset=None,
        steps_since_progress=25,
        recent_edits=0,
        recent_tools=["read_file"],
        threshold=3,
    )
    assert describe(fired) == (
        "Intervention 2 of 3, after 60 tool calls with no progress in the last 25: the todo "
        "list is rewound"
    )
    assert fired.why == "no progress in the last 25 tool calls"


def test_an_assessment_says_what_the_task_type_is() -> None:
    assessed = TaskAssessedEvent(
        task_type="multi_file_refactor",
        estimated_files=6,
        estimated_iterations=12,
        strategy="one module at a time",
        multiplier=1.2,
        token_budget=72_000,
        max_iterations=18,
        guidance="",
        assessed_turn=12,
        narrow=False,
        assessed_phase=1,
        scope="Phase 1 'Survey'",
        tokens_at=0,
        iterations_at=0,
        approved=True,
    )
    line = describe(assessed)
    assert line == (
        "Model assessed Phase 1 'Survey' as 'multi file refactor' work (a task type of the "
        "budget table): 72,000 tokens and 18 turns allotted"
    )


def test_codes_in_statuses_and_operations_become_words() -> None:
    finished = RunFinishedEvent(
        status="budget_exhausted",
        reason="the token budget is spent",
        turns=40,
        input_tokens=1,
        output_tokens=1,
        tokens_used=2,
        limit=None,
    )
    asked = ConfirmationEvent(
        operation="assess_task",
        estimated_tokens=160_000,
        threshold=100_000,
        description="",
        approved=False,
        by="no confirmer (headless runs deny)",
    )
    for event in (finished, asked):
        assert not CODE.search(describe(event).split(":")[0]), describe(event)
    assert describe(finished).startswith("Run budget exhausted (the token budget is spent)")


def test_a_stuck_run_has_no_code_on_its_timeline(make_agent: Factory) -> None:
    read = gr.tool_call("read_file", path="instructions.md")
    run = make_agent(gr.ScriptedModel([read] * 60)).run_sync("job")
    tracker = RunTracker(timeline_size=1000)
    for event in run.events:
        tracker.add(event)
    lines = [e for e in tracker.timeline if e.kind.startswith("intervention")]
    assert len(lines) > 5
    for entry in lines:
        assert not CODE.search(entry.text) and " step " not in entry.text, entry.text
    assert "(intervention 3 of 3, after 50 tool calls)" in (run.reason or "")
    frame = run.interventions_df()  # the code to filter on, and the same in words beside it
    assert list(frame.columns).index("why") == list(frame.columns).index("skip_reason") + 1
    assert set(frame.skip_reason.dropna()) == {"min_steps", "not_stuck", "grace_period"}
    assert not any(CODE.search(why) for why in frame.why)


def test_a_persons_todo_edits_reach_the_timeline_and_the_models_do_not() -> None:
    log = EventLog(lambda: 0.0)
    tracker = RunTracker()
    log.subscribe(tracker.add)
    common = {"phase": 1, "name": "Survey", "kind": "phase"}
    log.append("todos_written", {**common, "source": "model", "titles": ["a", "b"]})
    log.append("todo_completed", {"index": 1, "title": "a", "remaining": 1, "source": "model"})
    log.append("todos_written", {**common, "source": "person", "titles": ["a", "b", "Check"]})
    log.append("todo_completed", {"index": 2, "title": "b", "remaining": 1, "source": "person"})
    assert [(e.kind, e.text) for e in tracker.timeline] == [
        ("todos_written", "A person added task 3 'Check' to Phase 1 'Survey'"),
        ("todo_completed", "Task 2 'b' done by a person, 1 left"),
    ]


def test_every_timeline_symbol_is_in_dejavu_sans() -> None:
    assert "⛔" not in TIMELINE_ICONS.values() and "✋" not in TIMELINE_ICONS.values()
    assert set("".join(TIMELINE_ICONS.values())) <= DEJAVU_SANS
    assert {"todos_written", "todo_completed"} <= TIMELINE_ICONS.keys()


def test_every_symbol_the_display_draws_is_in_dejavu_sans() -> None:
    used: set[str] = set()
    for path in [*DISPLAY.glob("*.py"), WIDGETS]:
        used |= {c for c in path.read_text() if ord(c) > 0x7F}
    assert used <= DEJAVU_SANS, sorted(used - DEJAVU_SANS)
    assert all(ord(c) <= 0xFFFF for c in used)  # nothing outside the Basic Multilingual Plane


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig is not installed")
def test_the_symbol_list_matches_the_installed_dejavu_sans() -> None:
    def files(pattern: str) -> str:
        return subprocess.run(
            ["fc-list", pattern, "file"], capture_output=True, text=True, check=True
        ).stdout

    if "DejaVuSans.ttf" not in files("DejaVu Sans"):
        pytest.skip("DejaVu Sans is not installed")
    for char in sorted(DEJAVU_SANS):
        found = files(f":charset={ord(char):x}")
        assert "DejaVuSans.ttf" in found, f"{char!r} (U+{ord(char):04X}) is not in DejaVu Sans"


def test_the_todo_layer_wraps_between_words_only() -> None:
    todos = TodoList.of(["Note the habitat each species prefers", "Describe each song"])
    html = render_todos(todos)
    assert "overflow-wrap:anywhere" not in html and "overflow-wrap:break-word" in html
    # the mark stays whole, and the rules stay on one line (cut at the panel's edge)
    assert "<span style='white-space:nowrap'>← CURRENT</span>" in html
    assert html.count("<span style='white-space:pre'>═") == 3
    assert "overflow-x:hidden" in html


def test_the_todo_box_is_no_wider_than_its_rules() -> None:
    """A long task and its "← CURRENT" wrap inside the box the rules draw, however wide
    the panel: the box is at most as many characters wide as a rule."""
    long = "Record the feeding habits of each species in the survey notes"
    html = render_todos(TodoList.of([long, "Describe each song"]))
    width = len(TodoList().render().splitlines()[0])  # a rule
    assert f"max-width:{width}ch" in html
    assert f"[ ] 1. {long}      " in html  # longer than a rule: it must wrap


def test_the_dashboards_todo_column_may_shrink_below_its_rules(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("job")
    html = render_dashboard(RunTracker().snapshot(run))
    assert "<div style='flex:1 1 480px;min-width:0'>" in html


def test_the_plans_current_phase_follows_the_todo_layer(make_agent: Factory) -> None:
    """The model marks Phase 1 current in the plan it writes while it still bootstraps:
    the dashboard shows no phase current until the todo layer works Phase 1."""

    def shown(script: list[gr.ModelResponse]) -> tuple[str, str]:
        run = make_agent(
            gr.ScriptedModel([*script, gr.text("Stopping here.")]), task_completion_checker=None
        ).run_sync("job")
        state = RunTracker().snapshot(run)
        current = re.findall(r"gr-phase-current[^>]*>▶ ([^<]*)<", render_dashboard(state))
        return state.todos.phase_label(), " ".join(c.strip() for c in current)

    bootstrap = bootstrap_script()
    assert shown(bootstrap[:8]) == ("Bootstrap", "")  # the plan is written, says Phase 1
    working = [*bootstrap, gr.tool_call("todo_write", todos=PHASE_1)]
    assert shown(working) == ("Gather (1 of 2)", "Phase 1: Gather")


def test_between_phases_the_layer_names_the_phase_ahead(make_agent: Factory) -> None:
    script = [
        *bootstrap_script(),
        gr.tool_call("todo_write", todos=PHASE_1),
        *complete_all(5),
        gr.text("stop"),
    ]
    model = gr.ScriptedModel(script)
    make_agent(model).run_sync("job")
    after_bootstrap = model.requests[9].layer_text(2)
    assert "Phase: Gather (1 of 2)\n\n(no tasks)" in after_bootstrap
    assert "Bootstrap" not in after_bootstrap
    assert "INSTRUCTION: Follow the phase transition instructions" in after_bootstrap
    # after phase 1, before the model marks phase 2 current in the plan: phase 2 is next
    after_phase_1 = model.requests[15].layer_text(2)
    assert "Phase: Write (2 of 2)\n\n(no tasks)" in after_phase_1


def test_a_refused_stop_keeps_the_checkers_sentences_apart() -> None:
    refused = CompletionCheckEvent(
        stop="end_turn",
        checker="FileOutputChecker",
        complete=False,
        bypassed=None,
        feedback="1 of 1 required output file is missing: RELEASE.md\nCreate it before you stop.",
        refusals=1,
    )
    assert describe(refused) == (
        "Stop by a final reply refused (1 in a row): 1 of 1 required output file is missing: "
        "RELEASE.md. Create it before you stop."
    )
