"""The misbehaving profiles of seeds 003/004, each making its mechanism act; and the tools
and example jobs they work with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.examples import ExampleJob, audit_job, coding_job, corpus_job
from gr_notebook.tools.coding_tools import CodeTest, CodingTask, coding_tools

Factory = Callable[..., gr.Agent]


def run_job(
    tmp_path: Path, profile: str, job: ExampleJob, name: str = "ws", **kwargs: Any
) -> gr.Run:
    agent = gr.Agent(
        gr.SimulatedModel(profile),
        workspace=job.prepare(tmp_path / name),
        tools=job.toolsets,
        store=False,
        max_iterations=kwargs.pop("max_iterations", 300),
        **kwargs,
    )
    return agent.run_sync(job.instructions)


def fired(run: gr.Run) -> list[list[int]]:
    frame = run.interventions_df()
    return frame[frame.fired][["step", "tier"]].values.tolist()


class TestInterventionProfiles:
    def test_implementer_is_left_alone_and_finishes(self, tmp_path: Path) -> None:
        run = run_job(tmp_path, "implementer", coding_job())
        assert run.status == "completed" and run.job is not None and run.job.confidence == 0.9
        assert fired(run) == []
        reasons = set(run.interventions_df().skip_reason)
        assert {"grace_period", "actively_implementing"} <= reasons
        results = [
            e.data["result"]
            for e in run.events.of_kind("tool_call")
            if e.data["tool"] == "run_tests"
        ]
        assert all(r.startswith("0 passed") for r in results[:-1])
        assert results[-1].startswith("4 passed, 0 failed")

    def test_less_protective_settings_make_the_implementer_abandon_its_work(
        self, tmp_path: Path
    ) -> None:
        run = run_job(
            tmp_path,
            "implementer",
            coding_job(),
            interventions=gr.InterventionConfig.less_protective(),
        )
        assert fired(run)[:2] == [[35, 1], [55, 2]]
        starts = [e for e in run.events.of_kind("tool_call") if e.data["tool"] == "start_over"]
        assert len(starts) >= 2  # told to re-plan, it threw its work away
        assert run.job is not None and run.job.confidence < 0.9

    def test_stuck_reader_escalates_to_a_stop(self, tmp_path: Path) -> None:
        run = run_job(tmp_path, "stuck_reader", coding_job())
        assert run.status == "stuck"
        assert [tier for _, tier in fired(run)] == [1, 2, 3]
        assert [e.data["source"] for e in run.events.of_kind("rewind")] == ["system"]

    def test_looper_is_cured_by_the_rewind(self, tmp_path: Path) -> None:
        run = run_job(tmp_path, "looper", coding_job())
        assert run.status == "completed"
        assert [tier for _, tier in fired(run)] == [1, 2]
        reads = [
            e.data["input"].get("path")
            for e in run.events.of_kind("tool_call")
            if e.data["tool"] == "read_file"
        ]
        assert reads.count("instructions.md") > 10

    def test_drifter_returns_to_work_after_a_strategy_check(self, tmp_path: Path) -> None:
        run = run_job(tmp_path, "drifter", coding_job())
        assert run.status == "completed"
        assert fired(run) == [[30, 1]]
        notes = [e for e in run.events.of_kind("tool_call") if e.data["tool"] == "add_note"]
        assert notes

    def test_without_interventions_the_stuck_reader_burns_its_budget(self, tmp_path: Path) -> None:
        run = run_job(tmp_path, "stuck_reader", coding_job(), interventions=None, max_iterations=80)
        assert run.status == "budget_exhausted"


class TestTokenHog:
    def test_regulation_reins_in_the_hog(self, tmp_path: Path) -> None:
        job = corpus_job()
        hog = run_job(tmp_path, "token_hog", job, "free", self_regulation=False)
        reined = run_job(tmp_path, "token_hog", job, "reined")
        assert hog.status == reined.status == "completed"
        free_tokens = hog.turns_df().tokens_used.max()
        reined_tokens = reined.turns_df().tokens_used.max()
        assert free_tokens > 2 * reined_tokens
        assert "Redundancy" in set(reined.feedback_df().provider)
        assert reined.events.of_kind("conversation_pruned")  # it summarized when warned

    def test_a_token_budget_stops_the_unregulated_hog(self, tmp_path: Path) -> None:
        budget = gr.Budget(max_tokens=700_000, max_iterations=300)
        hog = run_job(
            tmp_path,
            "token_hog",
            corpus_job(),
            "a",
            self_regulation=False,
            budget=budget,
            max_iterations=None,
        )
        reined = run_job(
            tmp_path, "token_hog", corpus_job(), "b", budget=budget, max_iterations=None
        )
        assert hog.status == "budget_exhausted" and reined.status == "completed"


def test_audit_gives_the_same_report_for_fewer_tokens(tmp_path: Path) -> None:
    job = audit_job(files_per_module=4, lines_per_file=60)
    free = run_job(tmp_path, "diligent", job, "free", self_regulation=False, interventions=None)
    regulated = run_job(tmp_path, "diligent", job, "regulated")
    assert free.status == regulated.status == "completed"
    report = free.workspace.read_text("audit.md")
    assert report == regulated.workspace.read_text("audit.md")
    assert report.count("\n- src/") >= 3
    assert free.turns_df().tokens_used.max() > 2 * regulated.turns_df().tokens_used.max()
    tools = set(regulated.tool_calls_df().tool)
    assert {"assess_task", "check_resources", "summarize_progress", "search"} <= tools
    assert "search" not in set(free.tool_calls_df().tool)


class TestTools:
    async def test_search_finds_lines_and_explains_bad_patterns(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel(
            [
                gr.tool_call("write_file", path="src/a.py", content="x = 1\neval(y)\n"),
                gr.tool_call("search", pattern=r"eval\(", path="src"),
                gr.tool_call("search", pattern="nothing-here"),
                gr.tool_call("search", pattern="(unclosed"),
                gr.text("ok"),
            ]
        )
        run = await make_agent(model).run("job")
        hit, miss, bad = (
            e.data for e in run.events.of_kind("tool_call") if e.data["tool"] == "search"
        )
        assert hit["result"] == "1 file match:\nsrc/a.py:2: eval(y)"
        assert miss["result"].startswith("No lines under . match")
        assert bad["is_error"] and "not a valid regular expression" in bad["result"]

    async def test_run_tests_and_start_over(self, make_agent: Factory) -> None:
        task = CodingTask(
            (CodeTest("t1", "m.py", ("def f",)), CodeTest("t2", "m.py", ("def g", "def h"))),
            {"m.py": "# stub\n"},
        )
        model = gr.ScriptedModel(
            [
                gr.tool_call("run_tests"),
                gr.tool_call("write_file", path="m.py", content="def f\ndef g\n"),
                gr.tool_call("run_tests"),
                gr.tool_call("start_over", strategy="again"),
                gr.tool_call("read_file", path="m.py"),
                gr.text("ok"),
            ]
        )
        run = await make_agent(model, tools=[coding_tools(task)]).run("job")
        results = [e.data["result"] for e in run.events.of_kind("tool_call")]
        assert results[0].splitlines() == [
            "0 passed, 2 failed",
            "FAILED t1: m.py does not exist",
            "FAILED t2: m.py does not exist",
        ]
        assert results[2].splitlines() == ["1 passed, 1 failed", "FAILED t2: m.py lacks 'def h'"]
        assert "1 files are back" in results[3] and results[4] == "# stub\n"

    def test_coding_task_validation(self) -> None:
        with pytest.raises(ConfigError, match="wrap a single one"):
            CodeTest("t", "m.py", "def f")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="at least one"):
            CodingTask(())


def test_example_jobs_are_deterministic() -> None:
    assert audit_job().files == audit_job().files
    assert audit_job(seed=1).files != audit_job().files
    assert len(audit_job(files_per_module=3).files) == 18
    assert corpus_job().files == corpus_job().files
