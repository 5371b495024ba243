"""The intervention engine of seed 004: safeguards, tiers, and the seed's three timelines.

A trajectory is written as one token per step:
``E`` an edit, ``R`` a read, ``S`` start_over, ``T0``/``T5`` run_tests reporting that many
passes, ``C`` a completed todo.
"""

from __future__ import annotations

import logging

import pytest

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionConfig,
    InterventionEngine,
    ToolStep,
    pass_count_and_todos,
    pass_count_todos_and_first_reads,
    replay_steps,
)

_TOOLS = {
    "E": ("apply_code_edit", {"path": "cells.py"}, "Edited cells.py."),
    "R": ("read_file", {"path": "cells.py"}, "class InputCell: ..."),
    "S": ("start_over", {"strategy": "two-phase topological sort"}, "Started over."),
    "C": ("todo_complete", {}, "Task 1 'x' marked complete."),
}


def steps(trajectory: str) -> list[tuple[str, dict[str, object], str, bool]]:
    out = []
    for token in trajectory.split():
        if token.startswith("T"):
            passed = int(token[1:])
            out.append(("run_tests", {}, f"{passed} passed, {5 - passed} failed", False))
        else:
            tool, params, result = _TOOLS[token]
            out.append((tool, params, result, False))
    return out


def run(trajectory: str, config: InterventionConfig | None = None) -> dict[int, InterventionCheck]:
    checks = replay_steps(InterventionEngine(config), steps(trajectory))
    return {c.step: c for c in checks}


def fired(checks: dict[int, InterventionCheck]) -> list[tuple[int, int]]:
    return [(c.step, c.tier) for c in checks.values() if c.fired]


# Before the reset the agent edits busily and the tests fail: no check may fire there.
BUSY_19 = "E E E R T0 " * 3 + "E E E R"  # steps 1-19


class TestSeedTimelines:
    def test_scenario_1_implementer_after_reset_gets_no_intervention(self) -> None:
        trajectory = (
            BUSY_19
            + " S"  # step 20: start_over with the correct strategy
            + " E E E E T0"  # 21-25: four edits, tests 0 passed
            + " R E R R T0"  # 26-30: still implementing, one edit
            + " R R E R T0"  # 31-35
            + " T5"  # 36: all tests pass
        )
        checks = run(trajectory)
        assert fired(checks) == []
        assert [(s, checks[s].skip_reason, checks[s].steps_since_reset) for s in (25, 30, 35)] == [
            (25, "grace_period", 5),
            (30, "grace_period", 10),
            (35, "grace_period", 15),  # 15/15 is still inside, as the timeline shows
        ]

    def test_scenario_1_without_safeguards_abandons_the_correct_strategy(self) -> None:
        old = InterventionConfig(
            min_steps_before_intervention=0,
            grace_period_after_reset=0,
            active_edit_threshold=10**6,
            consecutive_stuck_tolerance=1,
        )
        trajectory = "C " * 19 + "S E E E E T0"  # steady progress, then the reset
        assert fired(run(trajectory, old)) == [(25, 1)]

    def test_scenario_2_truly_stuck_agent_gets_tier_1_after_the_grace_period(self) -> None:
        trajectory = (
            BUSY_19
            + " S"  # step 20
            + " R R R R T0" * 3  # 21-35: the grace period
            + " R R R R R"  # 36-40: get_file_content only, no edits
        )
        checks = run(trajectory)
        assert [checks[s].skip_reason for s in (25, 30, 35)] == ["grace_period"] * 3
        at_40 = checks[40]
        assert at_40.fired and at_40.tier == 1 and at_40.action == "replan"
        assert (at_40.steps_since_reset, at_40.recent_edits, at_40.stuck_counter) == (20, 0, 4)
        assert fired(checks) == [(40, 1)]

    SCENARIO_3 = (
        "R R R R T0 R R R R T0"  # 1-10: reading, tests failing
        + " E E E E E"  # 11-15: five edits
        + " E R E R T0"  # 16-20: two edits
        + " R R R R T0"  # 21-25: stopped coding, just reading
    )

    def test_scenario_3_reproduced_exactly_with_two_edits_counted_as_active(self) -> None:
        checks = run(self.SCENARIO_3, InterventionConfig.more_protective())
        assert (checks[15].skip_reason, checks[15].recent_edits) == ("actively_implementing", 5)
        assert (checks[20].skip_reason, checks[20].recent_edits) == ("actively_implementing", 2)
        at_25 = checks[25]
        assert at_25.fired and at_25.tier == 1
        assert (at_25.recent_edits, at_25.stuck_counter, at_25.steps_since_reset) == (0, 5, None)

    def test_scenario_3_under_the_default_threshold_fires_one_check_earlier(self) -> None:
        checks = run(self.SCENARIO_3)
        assert checks[15].skip_reason == "actively_implementing"
        assert (checks[20].fired, checks[20].recent_edits, checks[20].stuck_counter) == (
            True,
            2,
            4,
        )


class TestSafeguards:
    def test_min_steps_holds_off_even_a_stuck_agent(self) -> None:
        config = InterventionConfig(consecutive_stuck_tolerance=1, min_steps_before_intervention=10)
        checks = run("R " * 10, config)
        assert checks[5].skip_reason == "min_steps"
        assert checks[10].fired

    def test_progress_resets_the_stuck_counter(self) -> None:
        checks = run("R R R R T0 R R R R T0 R R R R T2 R R R R T2")
        assert [checks[s].stuck_counter for s in (5, 10, 15, 20)] == [1, 2, 0, 1]
        assert checks[15].skip_reason == "not_stuck"
        assert checks[15].steps_since_progress == 0

    def test_equal_pass_count_is_not_progress(self) -> None:
        checks = run("T2 R R R R T2 R R R R T2 R R R R T2 R R R R")
        assert [checks[s].stuck_counter for s in (5, 10, 15, 20)] == [0, 1, 2, 3]

    def test_completed_todos_are_progress(self) -> None:
        checks = run("R R R R R R R R R R R R R R C R R R R R")
        assert checks[15].stuck_counter == 0 and checks[20].stuck_counter == 1

    def test_failed_edits_and_resets_do_not_count(self) -> None:
        engine = InterventionEngine()
        engine.observe("start_over", {}, "Error", is_error=True)
        for _ in range(3):
            engine.observe("edit_file", {}, "old_text was not found", is_error=True)
        assert engine.tracker.last_start_over_step is None
        assert engine.tracker.code_edit_count == 0

    def test_recent_tools_keeps_the_last_ten(self) -> None:
        engine = InterventionEngine()
        for tool, params, result, err in steps("E " * 5 + "R " * 7):
            engine.observe(tool, params, result, is_error=err)
        assert list(engine.tracker.recent_tools) == ["apply_code_edit"] * 3 + ["read_file"] * 7

    def test_protected_reports_grace_and_active_editing(self) -> None:
        engine = InterventionEngine()
        assert not engine.protected
        for tool, params, result, err in steps("S"):
            engine.observe(tool, params, result, is_error=err)
        assert engine.protected


class TestEscalation:
    def test_tiers_escalate_while_stuck_and_stop_at_tier_3(self) -> None:
        config = InterventionConfig(grace_period_after_reset=10)
        checks = run("R " * 200, config)
        assert fired(checks) == [(15, 1), (30, 2), (50, 3)]
        # the rewind at tier 2 starts a grace period of its own
        assert checks[35].skip_reason == "grace_period"
        assert max(checks) == 50  # nothing is checked after the stop

    def test_progress_de_escalates(self) -> None:
        config = InterventionConfig(grace_period_after_reset=10)
        checks = run("R " * 15 + "C " + "R " * 24, config)
        assert fired(checks) == [(15, 1), (35, 1)]

    def test_person_reset_starts_a_grace_period(self) -> None:
        engine = InterventionEngine()
        trajectory: list[tuple[str, dict[str, object], str, bool] | None] = list(steps("R " * 12))
        trajectory.append(None)
        trajectory += steps("R " * 8)
        checks = {c.step: c for c in replay_steps(engine, trajectory)}
        assert checks[15].skip_reason == "grace_period"
        assert checks[20].steps_since_reset == 8


class TestConfig:
    def test_presets_carry_the_seed_numbers(self) -> None:
        assert InterventionConfig.default() == InterventionConfig()
        more, less = InterventionConfig.more_protective(), InterventionConfig.less_protective()
        assert (more.grace_period_after_reset, more.active_edit_threshold) == (20, 2)
        assert (less.grace_period_after_reset, less.active_edit_threshold) == (10, 5)
        d = InterventionConfig()
        assert (d.check_every, d.min_steps_before_intervention, d.grace_period_after_reset) == (
            5,
            10,
            15,
        )
        assert d.reset_tools == ("todo_rewind", "start_over")
        assert d.edit_tools == ("write_file", "edit_file", "apply_code_edit")

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("check_every", 0),
            ("check_every", 2.5),
            ("active_edit_threshold", True),
            ("consecutive_stuck_tolerance", -1),
            ("grace_period_after_reset", -1),
            ("min_steps_before_intervention", "10"),
            ("reset_tools", "start_over"),
            ("edit_tools", (1,)),
            ("progress_signal", 3),
        ],
    )
    def test_bad_numbers_and_names_are_refused(self, field: str, value: object) -> None:
        with pytest.raises(ConfigError, match=field):
            InterventionConfig(**{field: value})  # type: ignore[arg-type]

    def test_with_changes_fields_and_refuses_unknown_ones(self) -> None:
        assert InterventionConfig().with_(check_every=3).check_every == 3
        with pytest.raises(ConfigError, match="no field 'grace'"):
            InterventionConfig().with_(grace=3)

    def test_describe_is_json_ready(self) -> None:
        described = InterventionConfig().describe()
        assert described["progress_signal"] == "pass_count_and_todos"
        assert described["edit_tools"] == ["write_file", "edit_file", "apply_code_edit"]

    def test_a_custom_signal_decides_progress(self) -> None:
        def commits(step: ToolStep) -> bool | None:
            return step.tool == "git_commit" or None

        engine = InterventionEngine(InterventionConfig(progress_signal=commits))
        for _ in range(4):
            engine.observe("read_file", {}, "", is_error=False)
        engine.observe("git_commit", {}, "", is_error=False)
        assert engine.tracker.last_progress_step == 5

    def test_a_failing_signal_is_logged_not_raised(self, caplog: pytest.LogCaptureFixture) -> None:
        def broken(step: ToolStep) -> float:
            raise ValueError("boom")

        engine = InterventionEngine(InterventionConfig(progress_signal=broken))
        with caplog.at_level(logging.WARNING, logger="gr_notebook"):
            engine.observe("run_tests", {}, "1 passed", is_error=False)
        assert "progress_signal failed on step 1: boom" in caplog.text


def test_default_signal_reads_both_pass_count_formats() -> None:
    def signal(result: str, tool: str = "run_tests", err: bool = False) -> object:
        return pass_count_and_todos(ToolStep(1, tool, {}, result, err))

    assert signal("3 passed, 2 failed") == 3.0
    assert signal("Progress check: 0p_1f") == 0.0
    assert signal("no tests ran") is None
    assert signal("3 passed", err=True) is None
    assert signal("", tool="todo_complete") is True


class TestFirstReads:
    def test_a_step_is_novel_on_its_first_successful_call_with_that_input(self) -> None:
        seen: list[bool] = []

        def spy(step: ToolStep) -> None:
            seen.append(step.novel)

        engine = InterventionEngine(InterventionConfig(progress_signal=spy))
        for path, err in [("a", False), ("a", False), ("b", True), ("b", False), ("b", False)]:
            engine.observe("read_file", {"path": path}, "text", is_error=err)
        engine.observe("list_files", {"path": "a"}, "a", is_error=False)
        assert seen == [True, False, False, True, False, True]

    def test_novelty_is_keyed_as_events_record_the_input(self) -> None:
        engine = InterventionEngine()
        long = "x" * 5000
        engine.observe("write_file", {"path": "f", "content": long}, "ok", is_error=False)
        # Same first 400 characters: the event log cannot tell the two apart, so neither can
        # the engine, and a replay from events decides exactly as the live run did.
        engine.observe("write_file", {"path": "f", "content": long + "y"}, "ok", is_error=False)
        assert len(engine.tracker.seen) == 1

    def test_reading_new_files_is_progress_rereading_is_not(self) -> None:
        config = InterventionConfig(progress_signal=pass_count_todos_and_first_reads)
        auditor = [("read_file", {"path": f"src/f{i}.py"}, "...", False) for i in range(40)]
        assert not any(c.fired for c in replay_steps(InterventionEngine(config), auditor))
        assert [c.step for c in replay_steps(InterventionEngine(), auditor) if c.fired] == [15, 30]
        circling = [("read_file", {"path": f"src/f{i % 3}.py"}, "...", False) for i in range(40)]
        checks = replay_steps(InterventionEngine(config), circling)
        assert [(c.step, c.tier) for c in checks if c.fired] == [(20, 1), (35, 2)]

    def test_the_reading_signal_still_counts_passes_and_todos(self) -> None:
        def signal(tool: str, result: str, novel: bool) -> object:
            return pass_count_todos_and_first_reads(ToolStep(1, tool, {}, result, False, novel))

        assert signal("run_tests", "4 passed", novel=False) == 4.0
        assert signal("todo_complete", "", novel=False) is True
        assert signal("read_file", "", novel=True) is True
        assert signal("read_file", "", novel=False) is None
        assert signal("list_files", "", novel=True) is None


def test_log_lines_use_the_seed_wording(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gr_notebook"):
        run(BUSY_19 + " S" + " R R R R T0" * 3 + " R R R R R")
    text = caplog.text
    assert "In grace period after start_over (5/15 steps) - skipping intervention" in text
    assert "Agent actively implementing (3 recent edits) - skipping intervention" in text
    assert "No progress: 4 consecutive checks, 40 steps since last progress" in text
    assert "TIER 1 INTERVENTION at step 40" in text
    assert "forcing strategy re-plan" in text
