"""The cost limit, ``gr.Budget(max_cost_usd=...)``: what it counts, the check before each
request, the wrap-up order at 80%, the meters and ``%agent status``, resume and fork, and the
errors that say what to pass."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_meters, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.display.timeline import describe
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError
from gr_notebook.events import RunFinishedEvent, decode
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.record import record_of
from gr_notebook.guardrails.budget import Budget, SpentLimit
from gr_notebook.guardrails.resources import WARNING, ResourceReport
from gr_notebook.history.checkpoint_store import load_checkpoint
from gr_notebook.history.store import Store
from gr_notebook.jupyter.magics import status_line
from gr_notebook.messages import Usage
from gr_notebook.models import ModelRequest, ModelResponse
from tests.conftest import agent_at

PRICE = gr.Price.standard(3.0, 15.0)
JOB = "Audit the files and write report.md"

# -- the value -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-0.01, math.nan, math.inf, -math.inf, "2.50", True, [1.0]])
def test_a_cost_limit_that_is_no_amount_of_dollars_is_refused_saying_what_to_pass(
    bad: Any,
) -> None:
    with pytest.raises(ConfigError) as caught:
        Budget(max_cost_usd=bad)
    message = str(caught.value)
    assert "max_cost_usd" in message and "US dollars" in message
    assert "finite number >= 0" in message and "gr.Budget(max_cost_usd=2.50)" in message
    assert repr(bad) in message


def test_zero_and_whole_dollars_are_limits() -> None:
    assert Budget(max_cost_usd=0).max_cost_usd == 0
    assert Budget(max_cost_usd=5).max_cost_usd == 5
    assert Budget().max_cost_usd is None
    assert repr(Budget()) == "Budget(max_tokens=None, max_iterations=200, deadline_s=None)"
    assert repr(Budget(max_cost_usd=2.5)).endswith("deadline_s=None, max_cost_usd=2.5)")


def test_the_spent_cost_limit_is_a_value_that_reads_as_the_sentence() -> None:
    budget = Budget(max_cost_usd=1.0)
    assert budget.usage(tokens=0, iterations=1, elapsed_s=0, cost_usd=0.99).spent is None
    usage = budget.usage(tokens=0, iterations=1, elapsed_s=0, cost_usd=1.0234)
    assert usage.spent == SpentLimit("cost", 1.0234, 1.0)
    assert usage.exhausted == "the cost limit of $1.00 was reached ($1.0234 spent)"
    finished = RunFinishedEvent(
        status="budget_exhausted",
        reason=usage.exhausted,
        turns=1,
        input_tokens=0,
        output_tokens=0,
        tokens_used=0,
        limit=usage.spent,
    )
    again = decode("run_finished", json.loads(json.dumps(finished.to_data())))
    assert isinstance(again, RunFinishedEvent) and again.limit == usage.spent


def test_the_cost_limit_is_nearest_when_its_share_is_the_largest() -> None:
    budget = Budget(max_tokens=1_000, max_iterations=10, max_cost_usd=0.50)
    usage = budget.usage(tokens=500, iterations=5, elapsed_s=0, cost_usd=0.45)
    assert usage.nearest() == SpentLimit("cost", 0.45, 0.50)
    assert Budget(max_cost_usd=0).usage(tokens=0, iterations=1, elapsed_s=0).nearest().kind == (
        "cost"
    )  # a zero limit is spent at once, not a division by zero


def test_a_request_is_admitted_only_if_what_it_could_cost_fits_what_is_left() -> None:
    usage = Budget(max_cost_usd=1.0).usage(tokens=0, iterations=1, elapsed_s=0, cost_usd=0.9)
    assert usage.admits(5_000, request_cost_usd=0.05) is None
    over = usage.admits(5_000, request_cost_usd=0.1234)
    assert over == SpentLimit("cost", 0.9, 1.0, 5_000, request_cost_usd=0.1234)
    assert over.reason == (
        "the next request could cost up to $0.1234 and $0.10 remain of the cost limit of "
        "$1.00; it was not sent"
    )
    assert usage.admits(None) is None  # nothing known about the request: nothing checked


@pytest.mark.parametrize("field", ["input", "output", "cache_write", "cache_read"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0, True, "3.0", None])
def test_a_price_that_is_no_amount_of_dollars_is_refused(field: str, bad: Any) -> None:
    values = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3, field: bad}
    with pytest.raises(ConfigError) as caught:
        gr.Price(**values)
    message = str(caught.value)
    assert f"Price.{field}" in message and "finite number >= 0" in message
    assert repr(bad) in message


def test_a_nan_cost_is_never_under_the_cap() -> None:
    usage = Budget(max_cost_usd=1.0).usage(tokens=0, iterations=1, elapsed_s=0, cost_usd=math.nan)
    assert usage.spent is not None and usage.spent.kind == "cost"
    fresh = Budget(max_cost_usd=1.0).usage(tokens=0, iterations=1, elapsed_s=0)
    over = fresh.admits(100, request_cost_usd=math.nan)
    assert over is not None and over.kind == "cost"


def test_the_most_a_request_could_cost_counts_its_input_all_its_output_and_the_cache() -> None:
    price = gr.Price(3.0, 15.0, 3.75, 0.30)
    assert price.request_cost(1_000_000, 0) == pytest.approx(3.0)
    assert price.request_cost(0, 1_000_000) == pytest.approx(15.0)
    cached = Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=600_000)
    # what the last call cached is read back; the rest of the prompt is written to the cache
    assert price.request_cost(1_000_000, 0, cached) == pytest.approx(0.6 * 0.30 + 0.4 * 3.75)
    plain = Usage(input_tokens=600_000, output_tokens=5)
    assert price.request_cost(1_000_000, 0, plain) == pytest.approx(3.0)


# -- prices: the agent's price= and the error when there is none ---------------------------------


@pytest.mark.parametrize(
    "model", ["simulated:literal", gr.ScriptedModel([gr.text("x")]), gr.SimulatedModel()]
)
def test_a_cost_limit_on_a_model_with_no_price_is_refused_when_the_agent_is_built(
    tmp_path: Path, model: Any
) -> None:
    with pytest.raises(ConfigError) as caught:
        agent_at(tmp_path, model, budget=Budget(max_cost_usd=1.0), max_iterations=None)
    message = str(caught.value)
    assert "max_cost_usd=1.0" in message and "has no price" in message
    assert "price=gr.Price(input, output, cache_write, cache_read)" in message
    assert "to gr.Agent(...)" in message


def test_an_adapter_whose_table_lacks_the_model_says_both_ways_to_price_it(tmp_path: Path) -> None:
    model = gr.AnthropicModel("my-proxy-model", api_key="sk-ant-test")
    assert model.price() is None
    with pytest.raises(ConfigError, match=r"prices=\{'my-proxy-model': gr.Price\(...\)\}"):
        agent_at(tmp_path, model, budget=Budget(max_cost_usd=1.0), max_iterations=None)
    known = gr.AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test")
    assert known.price() == gr.Price(3.0, 15.0, 3.75, 0.30)
    agent_at(tmp_path, known, budget=Budget(max_cost_usd=1.0), max_iterations=None)  # priced
    agent_at(tmp_path, model, budget=Budget(max_cost_usd=1.0), price=PRICE, max_iterations=None)


def test_the_default_model_is_checked_when_a_run_starts(tmp_path: Path) -> None:
    """With no model given the agent may only lend its guardrails to a Claude Agent SDK
    session, whose calls are priced as they come: the check waits for a run of its own."""
    agent = agent_at(tmp_path, budget=Budget(max_cost_usd=1.0), max_iterations=None)
    with pytest.raises(ConfigError, match="'simulated:diligent' has no price"):
        agent.run_sync(JOB)


def test_price_takes_a_price(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"price takes gr.Price\(input, output"):
        agent_at(tmp_path, "simulated", price={"simulated": PRICE})


def test_price_prices_every_call_and_fills_the_cost_column(tmp_path: Path) -> None:
    run = agent_at(tmp_path, "simulated:literal", price=PRICE).run_sync(JOB)
    calls = run.turns_df()
    assert calls["cost_usd"].notna().all()
    usage = run.events.of_kind("model_call")[0].data
    first = PRICE.cost(Usage(usage["input_tokens"], usage["output_tokens"]))
    assert calls["cost_usd"].iloc[0] == pytest.approx(first)
    assert run.summary()["cost_usd"] == pytest.approx(calls["cost_usd"].sum())
    plain = agent_at(tmp_path / "plain", "simulated:literal").run_sync(JOB)
    assert plain.summary()["cost_usd"] is None  # no price, no cost: as before


# -- the limit in a run -------------------------------------------------------------------------


def test_a_spent_cost_limit_ends_the_run_as_a_value(tmp_path: Path) -> None:
    """A call that costs more than its estimate (here it reports far more input than the
    request held) spends the limit; the run ends before the next request."""
    cheap = dataclasses.replace(gr.tool_call("list_files"), usage=Usage(100, 10))
    dear = dataclasses.replace(gr.tool_call("list_files"), usage=Usage(20_000, 10))
    model = gr.ScriptedModel([cheap, cheap, dear, cheap, cheap])
    agent = agent_at(
        tmp_path,
        model,
        budget=Budget(max_cost_usd=0.05),
        price=PRICE,
        self_regulation=False,
        stuck_turns=None,
    )
    run = agent.run_sync(JOB)
    assert run.status == "budget_exhausted" and run.outcome is not None and model.calls == 3
    limit = run.outcome.limit
    assert limit is not None and limit.kind == "cost" and limit.limit == 0.05
    costs = run.turns_df()["cost_usd"].tolist()
    assert costs == pytest.approx([450 / 1e6, 450 / 1e6, 60_150 / 1e6])
    assert limit.used == pytest.approx(run.summary()["cost_usd"]) == pytest.approx(sum(costs))
    assert (
        run.reason
        == limit.reason
        == (f"the cost limit of $0.05 was reached (${limit.used:.4f} spent)")
    )
    runs = gr.runs_df(tmp_path / "store.sqlite")
    row = runs.loc[runs.run_id == run.run_id].iloc[0]
    assert row["status"] == "budget_exhausted" and row["error"] == limit.reason
    record = record_of(
        RunSpec("capped", "job", 0, 0), run, wall_s=0, attempts=1, worker="", store=None
    )
    assert (record.status, record.reason) == ("budget_exhausted", limit.reason)
    assert record.cost_usd == pytest.approx(limit.used)


class PricedCountingModel:
    """A priced model that counts its requests and says its output limit."""

    max_tokens = 4_000

    def __init__(self, count: int) -> None:
        self.count, self.sent = count, 0

    @property
    def name(self) -> str:
        return "priced-counting"

    def price(self) -> gr.Price:
        return PRICE

    async def count_input_tokens(self, request: ModelRequest) -> int:
        return self.count

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.sent += 1
        response = gr.tool_call("list_files")
        return dataclasses.replace(response, usage=Usage(self.count, 100))


class ReportsItsCost(PricedCountingModel):
    """A priced model that reports each call's cost itself, as ``reported``."""

    def __init__(self, reported: float) -> None:
        super().__init__(count=100)
        self.reported = reported

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        return dataclasses.replace(response, extra={"cost_usd": self.reported})


@pytest.mark.parametrize("reported", [math.nan, math.inf, -0.5])
def test_a_call_whose_reported_cost_is_no_amount_fails_a_capped_run(
    tmp_path: Path, reported: float
) -> None:
    """The cap cannot count it: the run ends at once, failed, saying what the model said."""
    model = ReportsItsCost(reported)
    agent = agent_at(
        tmp_path, model, budget=Budget(max_cost_usd=1.0), self_regulation=False, stuck_turns=None
    )
    run = agent.run_sync(JOB)
    assert run.status == "failed" and model.sent == 1
    assert run.reason is not None and f"cost as {reported!r}" in run.reason
    assert "max_cost_usd" in run.reason
    assert run.turns_df()["cost_usd"].isna().all() and run.summary()["cost_usd"] is None


def test_without_a_cap_a_reported_cost_that_is_no_amount_is_unknown(tmp_path: Path) -> None:
    model = ReportsItsCost(math.nan)
    agent = agent_at(tmp_path, model, max_iterations=2, self_regulation=False, stuck_turns=None)
    run = agent.run_sync(JOB)
    assert run.status == "budget_exhausted" and model.sent == 2
    assert run.summary()["cost_usd"] is None  # blank, as an unpriced call's


def test_a_request_that_could_cost_more_than_is_left_is_never_sent(tmp_path: Path) -> None:
    # each request: 10,000 input tokens ($0.03) and up to 4,000 output tokens ($0.06)
    model = PricedCountingModel(count=10_000)
    agent = agent_at(
        tmp_path,
        model,
        budget=Budget(max_cost_usd=0.20),
        self_regulation=False,
        stuck_turns=None,
        max_iterations=None,
    )
    run = agent.run_sync(JOB)
    spent = 0.03 + 100 * 15 / 1e6
    # 4 sent ($0.126): the 4th could cost $0.09 with $0.1055 left; a 5th, not with $0.074
    assert model.sent == 4
    assert run.status == "budget_exhausted" and run.outcome is not None
    limit = run.outcome.limit
    assert limit is not None and limit.kind == "cost"
    assert limit.request_cost_usd == pytest.approx(0.09)
    assert limit.used == pytest.approx(model.sent * spent)
    assert limit.remaining < 0.09
    [event] = run.events.of_kind("request_over_budget")
    assert event.data["needed"] == 10_000 and event.data["limit"]["kind"] == "cost"
    assert describe(event) == f"Request not sent: {limit.reason}"  # the timeline's line
    assert "it was not sent" in str(run.reason)
    assert run.summary()["cost_usd"] <= 0.20


def test_the_wrap_up_order_names_the_cost_limit_and_the_literal_agent_follows_it(
    tmp_path: Path,
) -> None:
    """Past 80% of the cost limit the run is told to wrap up in words that name it; the
    agent that obeys every order summarizes and calls job_complete, the completion checker
    lets the stop through, and the orders contradict nothing."""
    agent = agent_at(
        tmp_path,
        "simulated:literal",
        price=PRICE,
        budget=Budget(max_cost_usd=0.25),
        task_completion_checker=gr.PlanBasedChecker(),
    )
    run = agent.run_sync(JOB)
    told = [
        e.data["text"]
        for e in run.events.of_kind("prompt_injected")
        if e.data["text"].startswith(WARNING)
    ]
    assert told and "The cost limit is 8" in told[0] and "of $0.25." in told[0]
    assert run.job is not None and "Wrapped up when told to" in run.job.summary
    assert run.status == "budget_exhausted" and run.outcome is not None
    assert run.outcome.limit is not None and run.outcome.limit.kind == "cost"
    assert "The cost limit is" in str(run.reason)
    checks = run.completion_df()
    assert not (checks["complete"] == False).any()  # noqa: E712 (a frame's column)
    assert checks["bypassed"].notna().all()
    assert gr.lint_guidance(run) == []
    assert run.summary()["cost_usd"] < 0.25


def test_check_resources_reports_the_cost_only_under_a_cost_limit() -> None:
    capped = ResourceReport.of(
        Budget(max_cost_usd=2.0).usage(tokens=10, iterations=1, elapsed_s=0, cost_usd=0.5), None
    )
    payload = capped.to_json()
    assert payload["cost_used_usd"] == 0.5 and payload["cost_limit_usd"] == 2.0
    assert payload["limits_percentage_used"] == 25.0
    plain = ResourceReport.of(Budget().usage(tokens=10, iterations=1, elapsed_s=0), None)
    assert "cost_used_usd" not in plain.to_json() and plain.cost_limit_usd is None
    late = ResourceReport.of(
        Budget(max_cost_usd=2.0).usage(tokens=10, iterations=10, elapsed_s=0, cost_usd=1.7), None
    )
    assert late.wrap_up and late.recommendation == (
        f"{WARNING} The cost limit is 85% spent: $1.70 of $2.00."
    )
    assert late.named_order() is not None and plain.named_order() is None


# -- the meters and %agent status -------------------------------------------------------------


def _meters(run: gr.Run) -> tuple[Any, ...]:
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    return tracker.meters(run)


def test_the_meters_and_status_show_the_cost_against_its_limit_only_when_set(
    tmp_path: Path,
) -> None:
    capped = agent_at(
        tmp_path / "capped", "simulated:literal", price=PRICE, budget=Budget(max_cost_usd=5.0)
    ).run_sync(JOB)
    spent = capped.summary()["cost_usd"]
    share = spent / 5.0
    [cost] = [m for m in _meters(capped) if m.label == "Cost"]
    assert (cost.used, cost.limit) == (pytest.approx(spent), 5.0)
    text = f"Cost: ${spent:.4f} / $5.00 ({share:.0%})"
    assert cost.describe() == text
    assert text in render_meters(_meters(capped)) and "gr-meter" in render_meters(_meters(capped))
    assert text in text_dashboard(RunTracker().snapshot(capped))
    assert f"; ${spent:.4f}/$5.00 spent ({share:.0%}); " in status_line(capped)
    priced = agent_at(tmp_path / "priced", "simulated:literal", price=PRICE).run_sync(JOB)
    assert [m.label for m in _meters(priced)] == ["Tokens used", "Iterations", "Context"]
    assert "spent" not in status_line(priced)
    assert f"; ${priced.summary()['cost_usd']:.4f}; " in status_line(priced)  # as before


# -- resume and fork keep the cost spent -------------------------------------------------------


def test_a_checkpoint_keeps_the_cost_and_an_older_one_sums_its_calls(tmp_path: Path) -> None:
    agent = agent_at(tmp_path, "simulated:literal", price=PRICE)
    run = agent.run_sync(JOB)
    with Store(tmp_path / "store.sqlite") as store:
        checkpoint = load_checkpoint(store, run.run_id, 20)  # as turn 20 began
    calls = run.turns_df()
    before = float(calls.loc[calls["turn"] < 20, "cost_usd"].sum())
    assert checkpoint.snapshot["counters"]["cost_usd"] == pytest.approx(before)
    state = RunState(agent.definition(), workspace=run.workspace, clock=agent.clock)
    state.restore(checkpoint.snapshot, events=checkpoint.events)
    assert state.cost_usd == pytest.approx(before) and state.usage().cost_usd == state.cost_usd
    older = {**checkpoint.snapshot, "counters": dict(checkpoint.snapshot["counters"])}
    del older["counters"]["cost_usd"]  # made before the cost was kept: its calls are summed
    again = RunState(agent.definition(), workspace=run.workspace, clock=agent.clock)
    again.restore(older, events=checkpoint.events)
    assert again.cost_usd == pytest.approx(before)


def test_a_fork_counts_the_cost_its_parent_spent_before_the_fork(tmp_path: Path) -> None:
    agent = agent_at(tmp_path, "simulated:literal", price=PRICE)
    parent = agent.run_sync(JOB)
    calls = parent.turns_df()
    before = float(calls.loc[calls["turn"] < 20, "cost_usd"].sum())
    capped = gr.Agent(
        "simulated:literal",
        price=PRICE,
        budget=Budget(max_cost_usd=round(before * 1.1, 4)),
        self_regulation=True,
    )
    fork = parent.fork(20, capped, workspace=tmp_path / "fork")
    assert fork.status == "budget_exhausted" and fork.outcome is not None
    limit = fork.outcome.limit
    assert limit is not None and limit.kind == "cost"
    assert fork.turns < parent.turns  # the parent's spending counted from the start
    assert fork.summary()["cost_usd"] >= before
