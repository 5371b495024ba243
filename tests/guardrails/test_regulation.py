"""Seed 003's self-regulation: the budget table, the three tools, pruning, redundancy
detection, confirmation, adaptive budgets and releasing idle runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, ToolError
from gr_notebook.guardrails.regulation import recommendation_for
from gr_notebook.messages import TextBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models import ModelResponse

Factory = Callable[..., gr.Agent]

AUDIT = {
    "task_type": "codebase_audit",
    "estimated_files": 8,
    "estimated_iterations": 15,
    "strategy": "Search for risky calls, then read the hits.",
}


def results_of(run: gr.Run, tool: str) -> list[str]:
    return [e.data["result"] for e in run.events.of_kind("tool_call") if e.data["tool"] == tool]


class TestBudgetTable:
    def test_the_seed_base_table(self) -> None:
        table = gr.BudgetTable()
        base = {t: (r.tokens, r.iterations) for t, r in table.budgets.items()}
        assert base == {
            "simple_query": (10_000, 3),
            "file_edit": (30_000, 8),
            "multi_file_refactor": (60_000, 15),
            "codebase_audit": (80_000, 20),
            "exploration": (40_000, 10),
        }

    @pytest.mark.parametrize(
        ("files", "tokens", "iterations"),
        [
            (0, 80_000, 20),
            (10, 80_000, 20),
            (15, 120_000, 30),
            (20, 160_000, 40),
            (500, 160_000, 40),
        ],
    )
    def test_file_count_scales_the_budget_up_to_twice(
        self, files: int, tokens: int, iterations: int
    ) -> None:
        a = gr.BudgetTable().assess("codebase_audit", files, 10)
        assert (a.token_budget, a.max_iterations) == (tokens, iterations)
        assert 1 <= a.multiplier <= 2

    def test_hard_limits_cap_the_allocation_and_say_so(self) -> None:
        a = gr.BudgetTable().assess("codebase_audit", 20, 50, max_tokens=50_000, max_iterations=30)
        # 50,000 tokens pay for 12 turns at the table's 4,000 a turn: the token cap binds
        assert (a.token_budget, a.max_iterations) == (50_000, 12)
        assert "capped at the 50,000 tokens the run's hard limits leave" in a.guidance
        assert "Your estimate of 50 iterations is over the 12 the run's hard limits" in a.guidance
        assert a.narrow
        loose = gr.BudgetTable().assess("codebase_audit", 20, 50, max_iterations=30)
        assert (loose.max_iterations, loose.narrow) == (30, True)

    def test_an_estimate_the_limits_fit_is_granted_with_a_reserve(self) -> None:
        a = gr.BudgetTable().assess("exploration", 3, 42, max_iterations=200, turn=12)
        assert a.max_iterations == 53  # ceil(1.25 x 42), over the base of 10
        assert a.token_budget == 212_000  # 53 turns at the table's 4,000 tokens a turn
        assert not a.narrow and "narrow" not in a.guidance
        assert "your estimate of 42 iterations" in a.guidance

    def test_the_runs_own_cost_per_turn_and_file_sizes_price_the_tokens(self) -> None:
        a = gr.BudgetTable().assess(
            "exploration", 4, 8, tokens_per_iteration=8_000, tokens_per_file=1_000
        )
        # 10 turns at 1.25 x 8,000, plus 4 files read at 1.25 x 1,000 for 2 turns
        assert (a.max_iterations, a.token_budget) == (10, 110_000)

    def test_unknown_task_type_names_the_known_ones(self) -> None:
        with pytest.raises(ToolError, match="unknown task_type 'novel'; use one of: simple_query"):
            gr.BudgetTable().assess("novel", 1, 1)

    def test_the_table_is_configurable(self) -> None:
        table = gr.BudgetTable().with_type("data_cleaning", tokens=50_000, iterations=12)
        assert table.assess("data_cleaning", 1, 1).token_budget == 50_000
        own = gr.BudgetTable({"tiny": (1_000, 2, 3)}, max_multiplier=3)
        assert own.task_types == ("tiny",)
        assert own.assess("tiny", 9, 1).max_iterations == 6

    @pytest.mark.parametrize(
        ("budgets", "multiplier", "match"),
        [
            ({}, 2.0, "at least one task type"),
            ({"x": (0, 1)}, 2.0, "tokens must be a whole number"),
            ({"x": "big"}, 2.0, "takes gr.guardrails.TaskBudget"),
            ({"x": (1, 1)}, 0.5, "max_multiplier must be a number >= 1"),
        ],
    )
    def test_bad_tables_are_refused(self, budgets: object, multiplier: float, match: str) -> None:
        with pytest.raises(ConfigError, match=match):
            gr.BudgetTable(budgets, multiplier)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("percentage", "word"),
    [
        (0, "Resources healthy"),
        (50, "Resources healthy"),
        (50.1, "CAUTION"),
        (80, "CAUTION"),
        (80.1, "WARNING: Low on resources. Summarize and wrap up."),
    ],
)
def test_recommendations_use_the_seed_thresholds(percentage: float, word: str) -> None:
    assert recommendation_for(percentage).startswith(word)


class TestTools:
    async def test_assess_then_check_resources(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel(
            [gr.tool_call("assess_task", **AUDIT), gr.tool_call("check_resources"), gr.text("ok")]
        )
        run = await make_agent(model).run("job")
        assessed = json.loads(results_of(run, "assess_task")[0])
        budget = assessed["token_budget"]
        assert budget >= 80_000 and assessed["max_iterations"] == 20
        assert (
            f"Budget for the bootstrap: {budget:,} tokens and 20 iterations"
            in (assessed["guidance"])
        )
        report = json.loads(results_of(run, "check_resources")[0])
        calls = run.turns_df()
        # usage counts from the assessment (after turn 1): the second turn only
        assert report["tokens_used"] == calls.input_tokens[1] + calls.output_tokens[1]
        assert report["job_tokens_used"] == calls.tokens_used[1]
        assert report["tokens_budget"] == budget
        assert report["tokens_remaining"] == budget - report["tokens_used"]
        assert (report["iterations_used"], report["iterations_max"]) == (1, 20)
        assert report["iterations_remaining"] == 19
        assert report["percentage_used"] == 5.0  # iterations (1 of 20) are the binding limit
        assert report["recommendation"] == "Resources healthy, continue."
        assert calls.tokens_budget.isna().tolist() == [True, False, False]
        assert calls.tokens_budget.iloc[1:].tolist() == [budget, budget]
        assert calls.iterations_used.tolist() == [1, 2, 3]
        assert calls.tokens_used.is_monotonic_increasing

    async def test_check_resources_without_an_assessment_uses_the_run_limits(
        self, make_agent: Factory
    ) -> None:
        model = gr.ScriptedModel([gr.tool_call("check_resources")] * 9 + [gr.text("ok")])
        budget = gr.Budget(max_tokens=1_000_000, max_iterations=10)
        run = await make_agent(model, budget=budget, max_iterations=None).run("job")
        last = json.loads(results_of(run, "check_resources")[-1])
        assert (last["iterations_max"], last["tokens_budget"]) == (10, 1_000_000)
        assert last["percentage_used"] == 90.0
        assert last["recommendation"].startswith("WARNING")

    async def test_an_unknown_task_type_is_an_error_the_model_can_act_on(
        self, make_agent: Factory
    ) -> None:
        model = gr.ScriptedModel(
            [gr.tool_call("assess_task", **{**AUDIT, "task_type": "poetry"}), gr.text("ok")]
        )
        run = await make_agent(model).run("job")
        call = run.events.of_kind("tool_call")[0].data
        assert call["is_error"] and "'codebase_audit'" in call["result"]

    async def test_self_regulation_off_removes_tools_and_prompt(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel([gr.text("ok")])
        await make_agent(model, self_regulation=False).run("job")
        request = model.requests[0]
        assert not {"assess_task", "check_resources", "summarize_progress"} & {
            t.name for t in request.tools
        }
        assert "RESOURCE MANAGEMENT" not in request.layer_text(1)
        on = gr.ScriptedModel([gr.text("ok")])
        await make_agent(on).run("job")
        layer1 = on.requests[0].layer_text(1)
        assert "Call assess_task when a phase transition or a rewind asks for it" in layer1
        assert "ALWAYS" not in layer1 and "YOUR ONLY JOB" not in layer1

    def test_regulation_options_are_checked(self) -> None:
        with pytest.raises(ConfigError, match="belong to self-regulation"):
            gr.Agent(self_regulation=False, budget_table=gr.BudgetTable(), store=False)
        with pytest.raises(ConfigError, match=r"budget_table takes gr\.BudgetTable"):
            gr.Agent(budget_table={"x": 1}, store=False)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="confirm takes a function"):
            gr.Agent(confirm="yes", store=False)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="release_after_s"):
            gr.Agent(release_after_s=0, store=False)


def _reads(n: int) -> list[ModelResponse]:
    return [gr.tool_call("write_file", path=f"f{i}.md", content="x " * 200) for i in range(n)]


SUMMARY = {
    "key_findings": ["f0-f7 hold filler"],
    "files_examined": ["f0.md", "f1.md", "f0.md"],
    "next_steps": ["write the report"],
}


class TestPruning:
    async def test_summarize_progress_keeps_summary_and_last_five_messages(
        self, make_agent: Factory
    ) -> None:
        model = gr.ScriptedModel(
            [*_reads(8), gr.tool_call("summarize_progress", **SUMMARY), gr.text("done")]
        )
        run = await make_agent(model).run("job")
        before, after = model.requests[-2], model.requests[-1]
        assert len(before.messages) > 10
        assert len(after.messages) <= 6  # the summary, then at most five kept messages
        assert after.messages[0].text.startswith("PROGRESS SUMMARY (you wrote it at turn 9")
        assert "- f0.md, f1.md" in after.messages[0].text  # duplicates dropped
        # layers 1-3 are untouched
        assert after.system == before.system[:1] + after.system[1:]
        assert after.layer_text(1) == before.layer_text(1) and after.tools == before.tools
        assert after.layer_tokens[4] < before.layer_tokens[4]
        pruned = run.events.of_kind("conversation_pruned")[0].data
        assert pruned["messages_removed"] > 0 and pruned["tokens_after"] < pruned["tokens_before"]
        assert pruned["key_findings"] == SUMMARY["key_findings"]

    async def test_no_tool_result_loses_its_tool_use(self, make_agent: Factory) -> None:
        for extra in range(4):  # every alignment of the window
            model = gr.ScriptedModel(
                [*_reads(6 + extra), gr.tool_call("summarize_progress", **SUMMARY), gr.text("ok")]
            )
            await make_agent(model, workspace=None).run("job")
            messages = model.requests[-1].messages
            uses = {b.id for m in messages for b in m.content if isinstance(b, ToolUseBlock)}
            results = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
            assert results and all(b.tool_use_id in uses for b in results)
            roles = [m.role for m in messages]
            assert roles == [("user", "assistant")[i % 2] for i in range(len(roles))]

    async def test_phase_recap_and_progress_summary_share_layer_4(self) -> None:
        from gr_notebook.engine.context import ContextManager
        from gr_notebook.messages import Message

        context = ContextManager()
        context.append(Message.user("hello"))
        context.compact("RECAP of phase 1")
        context.append(Message("assistant", (TextBlock("working"),)))
        stats = context.prune("PROGRESS SUMMARY x")
        assert context.summary == "RECAP of phase 1\n\nPROGRESS SUMMARY x"
        assert stats.messages_removed == 0
        context.compact("RECAP of phase 2")
        assert context.summary == "RECAP of phase 2"  # the old progress summary is done with


class TestRedundancy:
    async def test_rereading_an_unchanged_file_names_the_first_turn(
        self, make_agent: Factory
    ) -> None:
        read = gr.tool_call("read_file", path="instructions.md")
        model = gr.ScriptedModel([read, gr.tool_call("list_files"), read, gr.text("ok")])
        run = await make_agent(model).run("job")
        first, _ = results_of(run, "read_file")
        assert "<feedback" not in first
        last_result = model.requests[3].messages[-1].content[0]
        assert isinstance(last_result, ToolResultBlock)
        assert "<feedback provider='Redundancy'>" in last_result.content
        assert "You already read instructions.md on turn 1" in last_result.content
        assert run.feedback_df().provider.tolist() == ["Redundancy"]

    async def test_a_changed_file_or_a_pruned_read_is_not_redundant(
        self, make_agent: Factory
    ) -> None:
        read = gr.tool_call("read_file", path="notes.txt")
        model = gr.ScriptedModel(
            [
                gr.tool_call("write_file", path="notes.txt", content="one"),
                read,
                gr.tool_call("write_file", path="notes.txt", content="two, longer"),
                read,
                gr.tool_call("summarize_progress", **SUMMARY),
                read,
                gr.text("ok"),
            ]
        )
        run = await make_agent(model).run("job")
        assert run.feedback_df().empty

    async def test_no_redundancy_feedback_without_self_regulation(
        self, make_agent: Factory
    ) -> None:
        read = gr.tool_call("read_file", path="instructions.md")
        run = await make_agent(
            gr.ScriptedModel([read, read, gr.text("ok")]), self_regulation=False
        ).run("job")
        assert run.feedback_df().empty


BIG = {**AUDIT, "estimated_files": 20}  # at least 160K tokens: above the 100K threshold


class TestConfirmation:
    async def test_no_confirmer_and_no_threshold_asks_nobody(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel([gr.tool_call("assess_task", **BIG), gr.text("ok")])
        run = await make_agent(model).run("job")
        assert not run.events.of_kind("tool_call")[0].data["is_error"]
        assert not run.events.of_kind("confirmation")

    async def test_headless_without_a_confirmer_denies(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel([gr.tool_call("assess_task", **BIG), gr.text("ok")])
        run = await make_agent(model, confirm_above_tokens=100_000).run("job")
        call = run.events.of_kind("tool_call")[0].data
        confirmation = run.events.of_kind("confirmation")[0].data
        asked = confirmation["estimated_tokens"]
        assert call["is_error"] and call["result"].startswith(
            f"Not approved: a budget of {asked:,}"
        )
        assert confirmation["approved"] is False and asked >= 160_000
        assert "headless" in confirmation["by"]
        assert run.turns_df().tokens_budget.isna().all()

    @pytest.mark.parametrize("answer", [True, False])
    async def test_a_confirmer_decides(self, make_agent: Factory, answer: bool) -> None:
        seen: list[gr.guardrails.ConfirmationRequest] = []

        async def confirm(request: gr.guardrails.ConfirmationRequest) -> bool:
            seen.append(request)
            await asyncio.sleep(0)
            return answer

        model = gr.ScriptedModel([gr.tool_call("assess_task", **BIG), gr.text("ok")])
        run = await make_agent(model, confirm=confirm).run("job")
        assert seen[0].estimated_tokens >= 160_000 and seen[0].threshold == 100_000
        assert run.events.of_kind("tool_call")[0].data["is_error"] is not answer

    async def test_small_budgets_and_a_raising_confirmer(self, make_agent: Factory) -> None:
        def broken(request: gr.guardrails.ConfirmationRequest) -> bool:
            raise RuntimeError("no UI")

        model = gr.ScriptedModel(
            [
                gr.tool_call("assess_task", **AUDIT),
                gr.tool_call("assess_task", **BIG),
                gr.text("ok"),
            ]
        )
        run = await make_agent(model, confirm=broken, confirm_above_tokens=100_000).run("job")
        ok, denied = (e.data for e in run.events.of_kind("tool_call"))
        assert not ok["is_error"] and denied["is_error"]
        assert run.events.of_kind("confirmation")[0].data["by"].startswith("confirmer failed")
        # the approved assessment still stands
        approved = json.loads(results_of(run, "assess_task")[0])["token_budget"]
        assert run.turns_df().tokens_budget.tolist()[-1] == approved


class TestAdaptiveBudgets:
    async def test_suggestion_from_history_with_the_numbers(
        self, make_agent: Factory, tmp_path: Path
    ) -> None:
        store = gr.Store(tmp_path / "history.sqlite")
        for extra in range(5):
            script = [
                gr.tool_call("assess_task", **AUDIT),
                *[gr.tool_call("list_files")] * extra,
                gr.tool_call("job_complete", summary="Audited.", confidence=0.9),
            ]
            await make_agent(gr.ScriptedModel(script), store=store, workspace=None).run("audit")
        quit_early = [gr.tool_call("assess_task", **AUDIT), gr.text("done")]
        await make_agent(gr.ScriptedModel(quit_early), store=store, workspace=None).run("audit")
        await make_agent(
            gr.ScriptedModel([gr.tool_call("assess_task", **AUDIT)] * 5),
            store=store,
            workspace=None,
            max_iterations=3,
        ).run("audit")  # runs out of iterations: left out
        suggestion = gr.Budget.suggest("codebase_audit", store=store)
        assert suggestion.source == "history" and len(suggestion.tokens) == 5
        assert suggestion.skipped == 2  # the model that quit (ended) and the one capped
        assert sorted(suggestion.iterations) == [2, 3, 4, 5, 6]
        assert suggestion.budget.max_iterations == 6  # p90 of five runs is the largest
        assert suggestion.budget.max_tokens >= max(suggestion.tokens)
        assert suggestion.budget.max_tokens % 1000 == 0
        text = str(suggestion)
        assert "p90 of 5 completed runs; 2 unfinished runs left out" in text
        assert f"max {max(suggestion.tokens):,}" in text
        p50 = gr.Budget.suggest("codebase_audit", store=store, percentile=50)
        assert p50.budget.max_iterations == 4

    def test_no_history_falls_back_to_the_table(self, tmp_path: Path) -> None:
        suggestion = gr.Budget.suggest("file_edit", store=tmp_path / "empty.sqlite")
        assert suggestion.source == "table"
        assert (suggestion.budget.max_tokens, suggestion.budget.max_iterations) == (30_000, 8)
        assert "no completed runs" in str(suggestion)

    def test_bad_arguments(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="percentile"):
            gr.Budget.suggest("file_edit", store=tmp_path / "s.sqlite", percentile=0)
        with pytest.raises(ConfigError, match="no such row"):
            gr.Budget.suggest("novel", store=tmp_path / "s.sqlite")


class TestRelease:
    async def test_a_finished_run_releases_its_conversation(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel([gr.tool_call("list_files"), gr.text("done")])
        run = await make_agent(model, release_after_s=0.01).run("job")
        assert not run.conversation_released
        await asyncio.sleep(0.05)
        assert run.conversation_released
        assert run._loop is not None and run._loop.state.context.messages == ()
        released = run.events.of_kind("conversation_released")[0].data
        assert released["messages"] >= 3
        with gr.Store(run.workspace.root.parent / "store.sqlite") as store:
            kinds = [e.kind for e in store.events(run.run_id)]
        assert kinds[-1] == "conversation_released" and "tool_call" in kinds
        run.release_conversation()  # twice is harmless
        assert len(run.events.of_kind("conversation_released")) == 1

    async def test_a_live_run_cannot_be_released(self, make_agent: Factory) -> None:
        model = gr.ScriptedModel([gr.tool_call("list_files"), gr.text("done")])
        run = make_agent(model).start("job")
        with pytest.raises(gr.RunError, match="still running"):
            run.release_conversation()
        await run.wait()


def test_a_file_removed_while_counting_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gr_notebook.guardrails.regulation import typical_file_tokens

    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("a.md", "x" * 400)
    ws.write_text("b.md", "x" * 400)
    files = list(ws.files())

    def vanishing(rel: str = ".") -> Any:
        yield files[0]
        files[1].unlink()  # gone between the listing and the stat
        yield files[1]

    monkeypatch.setattr(ws, "files", vanishing)
    assert typical_file_tokens(ws) == 100.0
