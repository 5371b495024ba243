"""Tests for the plan file (main_plan.md): parsing, round-trips, warnings and edits."""

from __future__ import annotations

import pytest

from gr_notebook.workflow.plan import MAX_PHASE_STEPS, MIN_PHASE_STEPS, Phase, Plan, Step

# Copied verbatim from seed 001, "### Strategic Layer: `main_plan.md`".
SEED_PLAN = """\
# Execution Plan

## Overview
[Brief description of the task and approach]

## Phase 1: Document Analysis ✓ COMPLETE
- [x] Extract document structure
- [x] Identify key sections
- [x] Categorize content types

## Phase 2: Requirement Extraction ← CURRENT
- [ ] Process section 1-3
- [ ] Process section 4-6
- [ ] Consolidate findings

## Phase 3: Validation & Integration
- [ ] Validate against schema
- [ ] Check for duplicates
- [ ] Integrate into graph

## Phase 4: Final Review
- [ ] Generate summary report
- [ ] Call job_complete()
"""


def plan_with_steps(*counts: int, current: int = 1) -> str:
    lines = ["# Execution Plan", ""]
    for number, count in enumerate(counts, start=1):
        marker = " ← CURRENT" if number == current else ""
        lines.append(f"## Phase {number}: P{number}{marker}")
        lines += [f"- [ ] step {number}.{i}" for i in range(1, count + 1)]
        lines.append("")
    return "\n".join(lines)


def step_warnings(plan: Plan) -> list[str]:
    return [w for w in plan.warnings if "step" in w and "Phase" in w]


# ── the seed's example ───────────────────────────────────────────────────────


def test_seed_plan_has_four_phases_with_statuses() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert [p.number for p in plan.phases] == [1, 2, 3, 4]
    assert [p.status for p in plan.phases] == ["complete", "current", "pending", "pending"]


def test_seed_plan_phase_names_drop_the_markers() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert [p.name for p in plan.phases] == [
        "Document Analysis",
        "Requirement Extraction",
        "Validation & Integration",
        "Final Review",
    ]


def test_seed_plan_steps_and_done_flags() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert plan.phase(1).steps == (
        Step("Extract document structure", True),
        Step("Identify key sections", True),
        Step("Categorize content types", True),
    )
    assert plan.phase(2).steps == (
        Step("Process section 1-3"),
        Step("Process section 4-6"),
        Step("Consolidate findings"),
    )
    assert [s.text for s in plan.phase(4).steps] == [
        "Generate summary report",
        "Call job_complete()",
    ]
    assert not any(s.done for s in plan.phase(3).steps)


def test_seed_plan_head_keeps_overview() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert plan.head == (
        "# Execution Plan",
        "",
        "## Overview",
        "[Brief description of the task and approach]",
        "",
    )


def test_seed_plan_round_trips_exactly() -> None:
    assert Plan.parse(SEED_PLAN).render() == SEED_PLAN


def test_seed_plan_current_and_active() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert plan.current is not None and plan.current.number == 2
    assert plan.active is plan.current
    assert not plan.is_complete


def test_seed_plan_has_no_parse_warnings() -> None:
    assert Plan.parse(SEED_PLAN).parse_warnings == ()


def test_str_is_render() -> None:
    plan = Plan.parse(SEED_PLAN)
    assert str(plan) == SEED_PLAN


# ── round-trips of unknown content ───────────────────────────────────────────


def test_free_text_notes_and_sub_bullets_survive_round_trip() -> None:
    text = """\
# Execution Plan

Some free text written by a person.
> a quote

## Phase 1: Setup ← CURRENT
Objective: get going.
- [ ] First step
  - detail about the first step
  * another detail
- [x] Second step
Note: remember the API limits.

### Notes
- a note bullet without a checkbox
1. numbered item

## Phase 2: Later
- [ ] Something

Trailing paragraph.
"""
    plan = Plan.parse(text)
    assert plan.render() == text
    assert [s.text for s in plan.phase(1).steps] == ["First step", "Second step"]
    assert "### Notes" in plan.phase(1).lines


def test_nested_checkbox_sub_bullet_survives_round_trip() -> None:
    text = """\
# Execution Plan

## Phase 1: Setup ← CURRENT
- [ ] First step
  - [ ] sub-task of the first step
- [ ] Second step
"""
    assert Plan.parse(text).render() == text


def test_text_without_trailing_newline_round_trips() -> None:
    text = SEED_PLAN.rstrip("\n")
    assert Plan.parse(text).render() == text


def test_empty_text_round_trips() -> None:
    assert Plan.parse("").render() == ""


# ── broken headings ──────────────────────────────────────────────────────────


@pytest.mark.parametrize("heading", ["## Phase two - Foo", "## Phase: Foo", "## phase X Foo"])
def test_broken_heading_is_kept_verbatim_and_warned(heading: str) -> None:
    text = f"# Execution Plan\n\n## Phase 1: Good ← CURRENT\n- [ ] a\n\n{heading}\n- [ ] b\n"
    plan = Plan.parse(text)
    assert plan.render() == text
    assert len(plan.phases) == 1
    assert heading in plan.phase(1).lines
    matching = [w for w in plan.warnings if heading in w]
    assert len(matching) == 1
    assert "line 6" in matching[0]


def test_broken_heading_before_any_phase_stays_in_head() -> None:
    text = "# Execution Plan\n## Phase: Foo\n"
    plan = Plan.parse(text)
    assert plan.head == ("# Execution Plan", "## Phase: Foo")
    assert any("line 2" in w and "## Phase: Foo" in w for w in plan.warnings)


def test_lower_level_phase_like_heading_is_not_warned() -> None:
    text = plan_with_steps(5) + "### Phase notes\n"
    assert not any("could not read" in w for w in Plan.parse(text).warnings)


# ── heading variants ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("heading", "name", "status"),
    [
        ("## Phase 1: Foo <- CURRENT", "Foo", "current"),
        ("## Phase 1: Foo <-- CURRENT", "Foo", "current"),
        ("## Phase 1: Foo (CURRENT)", "Foo", "current"),
        ("## Phase 1: Foo [CURRENT]", "Foo", "current"),
        ("## Phase 1: Foo (COMPLETE)", "Foo", "complete"),
        ("## Phase 1: Foo ✓ COMPLETED", "Foo", "complete"),
        ("## Phase 1: Foo [COMPLETE]", "Foo", "complete"),
        ("## Phase 1: Foo ✓ complete", "Foo", "complete"),
        ("## Phase 1 - Foo", "Foo", "pending"),
        ("## Phase 1. Foo", "Foo", "pending"),
        ("##  phase 1:  Foo Bar  ", "Foo Bar", "pending"),
    ],
)
def test_heading_variants_parse(heading: str, name: str, status: str) -> None:
    plan = Plan.parse(f"{heading}\n- [ ] x\n")
    assert len(plan.phases) == 1
    assert plan.phases[0].name == name
    assert plan.phases[0].status == status
    assert plan.parse_warnings == ()


def test_heading_variant_renders_canonical_marker() -> None:
    plan = Plan.parse("## Phase 1: Foo (COMPLETE)\n- [x] x\n")
    assert plan.render() == "## Phase 1: Foo ✓ COMPLETE\n- [x] x\n"


def test_heading_without_name_gets_a_default_name() -> None:
    plan = Plan.parse("## Phase 3:\n- [ ] x\n")
    assert plan.phases[0].name == "Phase 3"


def test_star_and_uppercase_x_steps_parse() -> None:
    plan = Plan.parse("## Phase 1: Foo\n* [X] done\n- [ ] open\n")
    assert plan.phases[0].steps == (Step("done", True), Step("open", False))


# ── warnings ─────────────────────────────────────────────────────────────────


def test_empty_text_warns_no_phases() -> None:
    warnings = Plan.parse("").warnings
    assert any("no phases" in w for w in warnings)


def test_text_without_phases_warns() -> None:
    warnings = Plan.parse("# Execution Plan\n\nJust some prose.\n").warnings
    assert any("no phases" in w and "## Phase 1: Name" in w for w in warnings)


@pytest.mark.parametrize("count", [0, 1, MIN_PHASE_STEPS - 1])
def test_phase_with_too_few_steps_warns(count: int) -> None:
    plan = Plan.parse(plan_with_steps(count))
    (warning,) = step_warnings(plan)
    assert f"Phase 1 'P1' has {count} step(s)" in warning
    assert "combine" in warning


def test_phase_with_too_many_steps_warns() -> None:
    plan = Plan.parse(plan_with_steps(MAX_PHASE_STEPS + 1))
    (warning,) = step_warnings(plan)
    assert f"Phase 1 'P1' has {MAX_PHASE_STEPS + 1} steps" in warning
    assert "split" in warning


@pytest.mark.parametrize("count", [MIN_PHASE_STEPS, MAX_PHASE_STEPS])
def test_phase_at_step_bounds_does_not_warn(count: int) -> None:
    assert Plan.parse(plan_with_steps(count)).warnings == ()


def test_step_bounds_are_the_seeds_5_to_20() -> None:
    assert (MIN_PHASE_STEPS, MAX_PHASE_STEPS) == (5, 20)


def test_completed_small_phase_does_not_warn() -> None:
    text = plan_with_steps(2, 5, current=2).replace("## Phase 1: P1", "## Phase 1: P1 ✓ COMPLETE")
    plan = Plan.parse(text)
    assert plan.phase(1).status == "complete"
    assert step_warnings(plan) == []


def test_only_the_offending_phase_is_warned() -> None:
    plan = Plan.parse(plan_with_steps(5, 3, 21))
    warnings = step_warnings(plan)
    assert len(warnings) == 2
    assert any(w.startswith("Phase 2 'P2' has 3 step(s)") for w in warnings)
    assert any(w.startswith("Phase 3 'P3' has 21 steps") for w in warnings)


def test_two_current_markers_warn() -> None:
    text = plan_with_steps(5, 5).replace("## Phase 2: P2", "## Phase 2: P2 ← CURRENT")
    plan = Plan.parse(text)
    assert [p.status for p in plan.phases] == ["current", "current"]
    assert any("[1, 2]" in w and "CURRENT" in w for w in plan.warnings)


def test_misnumbered_phases_warn() -> None:
    text = plan_with_steps(5, 5).replace("## Phase 2: P2", "## Phase 3: P2")
    assert any("numbered [1, 3]" in w for w in Plan.parse(text).warnings)


# ── queries ──────────────────────────────────────────────────────────────────


def test_phase_lookup_unknown_raises_key_error() -> None:
    with pytest.raises(KeyError):
        Plan.parse(SEED_PLAN).phase(9)


def test_active_without_current_is_first_unfinished() -> None:
    plan = Plan.parse(SEED_PLAN.replace(" ← CURRENT", ""))
    assert plan.current is None
    assert plan.active is not None and plan.active.number == 2


def test_is_complete_requires_phases() -> None:
    assert not Plan.parse("").is_complete
    assert Plan.parse("## Phase 1: A ✓ COMPLETE\n- [x] a\n").is_complete


def test_repr_names_current_phase() -> None:
    assert repr(Plan.parse(SEED_PLAN)) == (
        "<Plan 4 phases, 1 complete, current: Phase 2 'Requirement Extraction'>"
    )


# ── edits ────────────────────────────────────────────────────────────────────


def test_advance_completes_current_and_makes_next_current() -> None:
    plan = Plan.parse(SEED_PLAN).advance()
    assert [p.status for p in plan.phases] == ["complete", "complete", "current", "pending"]
    assert all(s.done for s in plan.phase(2).steps)
    assert not any(s.done for s in plan.phase(3).steps)


def test_advance_renders_updated_markers_and_ticks() -> None:
    text = Plan.parse(SEED_PLAN).advance().render()
    assert "## Phase 2: Requirement Extraction ✓ COMPLETE\n- [x] Process section 1-3\n" in text
    assert "## Phase 3: Validation & Integration ← CURRENT\n" in text
    assert "## Phase 4: Final Review\n" in text


def test_advance_does_not_mutate_original() -> None:
    plan = Plan.parse(SEED_PLAN)
    plan.advance()
    assert plan.render() == SEED_PLAN


def test_advance_on_last_phase_completes_plan() -> None:
    plan = Plan.parse(SEED_PLAN).advance().advance().advance()
    assert plan.is_complete
    assert plan.current is None
    assert plan.advance() == plan


def test_advance_keeps_unknown_lines() -> None:
    text = "## Phase 1: A ← CURRENT\n- [ ] a\n  - detail\n## Phase 2: B\n- [ ] b\n"
    rendered = Plan.parse(text).advance().render()
    assert rendered == (
        "## Phase 1: A ✓ COMPLETE\n- [x] a\n  - detail\n## Phase 2: B ← CURRENT\n- [ ] b\n"
    )


def test_with_status_unknown_phase_raises_key_error() -> None:
    with pytest.raises(KeyError):
        Plan.parse(SEED_PLAN).with_status(7, "complete")


def test_with_status_pending_keeps_step_flags() -> None:
    plan = Plan.parse(SEED_PLAN).with_status(1, "pending")
    assert plan.phase(1).status == "pending"
    assert all(s.done for s in plan.phase(1).steps)


def test_phase_with_status_complete_ticks_steps_only() -> None:
    phase = Phase(1, "A", "current", (Step("a"), "free text", Step("b", True)))
    done = phase.with_status("complete")
    assert done.lines == (Step("a", True), "free text", Step("b", True))


def test_from_phases_makes_first_phase_current() -> None:
    plan = Plan.from_phases([("Alpha", ["a1", "a2"]), ("Beta", ["b1"])], overview="Do it.")
    assert [p.status for p in plan.phases] == ["current", "pending"]
    assert plan.render() == (
        "# Execution Plan\n"
        "\n"
        "## Overview\n"
        "Do it.\n"
        "\n"
        "## Phase 1: Alpha ← CURRENT\n"
        "- [ ] a1\n"
        "- [ ] a2\n"
        "\n"
        "## Phase 2: Beta\n"
        "- [ ] b1\n"
        "\n"
    )


def test_from_phases_render_parses_back_to_same_plan() -> None:
    plan = Plan.from_phases([("Alpha", ["a1"]), ("Beta", ["b1", "b2"])])
    again = Plan.parse(plan.render())
    assert again == plan
    assert again.render() == plan.render()


# ── hostile input (issue 14) ─────────────────────────────────────────────────


def test_phase_number_too_long_for_int_is_a_warning_not_a_crash() -> None:
    digits = "9" * 5000
    heading = f"## Phase {digits}: Huge"
    plan = Plan.parse(f"# Execution Plan\n\n{heading}\n- [ ] a step\n")
    assert plan.phases == ()
    assert heading in plan.render()  # kept verbatim, nothing lost
    (warning,) = [w for w in plan.warnings if "number" in w and "line 3" in w]
    assert "too long" in warning and "'## Phase 3: Name'" in warning
    assert len(warning) < 300  # the 5,000 digits are not echoed back to the model
