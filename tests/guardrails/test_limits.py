"""Limits as values: a spent limit says which limit, how much was used and the limit, on the
event and on ``run.outcome``; the token check before a request holds for every model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import RequestOverBudget
from gr_notebook.events import RunFinishedEvent, decode
from gr_notebook.guardrails.budget import Budget, SpentLimit
from gr_notebook.messages import Usage
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.call_context import current_call
from tests.conftest import agent_at

# -- the value ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "limit", "sentence"),
    [
        (
            {"tokens": 0, "iterations": 5, "elapsed_s": 0},
            SpentLimit("iterations", 5, 5),
            "the iteration cap of 5 was reached",
        ),
        (
            {"tokens": 1_234, "iterations": 1, "elapsed_s": 0},
            SpentLimit("tokens", 1_234, 1_000),
            "the token budget of 1,000 was used (1,234 tokens)",
        ),
        (
            {"tokens": 0, "iterations": 1, "elapsed_s": 60.5},
            SpentLimit("time", 60.5, 60),
            "the deadline of 60 s passed (60.5 s elapsed)",
        ),
    ],
)
def test_a_spent_limit_is_a_value_that_reads_as_the_sentence(
    usage: dict[str, Any], limit: SpentLimit, sentence: str
) -> None:
    spent = Budget(max_tokens=1_000, max_iterations=5, deadline_s=60).usage(**usage)
    assert spent.spent == limit
    assert spent.exhausted == limit.reason == str(limit) == sentence
    finished = RunFinishedEvent(
        status="budget_exhausted",
        reason=limit.reason,
        turns=1,
        input_tokens=0,
        output_tokens=0,
        tokens_used=0,
        limit=limit,
    )
    again = decode("run_finished", json.loads(json.dumps(finished.to_data())))
    assert isinstance(again, RunFinishedEvent) and again.limit == limit  # as the store keeps it


def test_nothing_is_spent_while_every_limit_has_room() -> None:
    budget = Budget(max_tokens=100, max_iterations=5, deadline_s=60)
    usage = budget.usage(tokens=99, iterations=4, elapsed_s=30)
    assert usage.spent is None and usage.exhausted is None
    assert usage.nearest() == SpentLimit("tokens", 99, 100)  # 99% is the closest to spent
    later = budget.usage(tokens=10, iterations=4, elapsed_s=59.9)
    assert later.nearest() == SpentLimit("time", 59.9, 60)


def test_a_request_is_admitted_only_if_it_fits_what_the_token_budget_left() -> None:
    usage = Budget(max_tokens=1_000).usage(tokens=800, iterations=1, elapsed_s=0)
    assert usage.admits(200) is None
    over = usage.admits(250)
    assert over == SpentLimit("tokens", 800, 1_000, request=250)
    assert over.reason == (
        "the next request needs 250 input tokens (counted before sending) and 200 remain of "
        "the token budget; it was not sent"
    )
    assert Budget().usage(tokens=10**9, iterations=1, elapsed_s=0).admits(10**9) is None


# -- on the run and its events ----------------------------------------------------------------


def finished_event(run: gr.Run) -> Any:
    [event] = run.events.of_kind("run_finished")
    return event


def test_the_limit_that_ended_a_run_is_on_its_outcome_and_its_last_event(tmp_path: Path) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files")] * 10)
    run = agent_at(tmp_path, model, max_iterations=3, stuck_turns=None).run_sync("job")
    assert run.status == "budget_exhausted" and run.outcome is not None
    assert run.outcome.limit == SpentLimit("iterations", 3, 3)
    assert run.outcome.reason == run.reason == "the iteration cap of 3 was reached"
    assert finished_event(run).limit == run.outcome.limit  # the value itself, typed
    assert finished_event(run).data["limit"] == {"kind": "iterations", "used": 3, "limit": 3}


def test_a_run_no_limit_ended_has_none(tmp_path: Path) -> None:
    run = agent_at(tmp_path, gr.ScriptedModel([gr.text("done")])).run_sync("job")
    assert run.outcome is not None and run.outcome.status == "ended"
    assert run.outcome.limit is None and finished_event(run).limit is None
    assert "limit" not in finished_event(run).data


def test_the_deadline_is_a_time_limit(tmp_path: Path) -> None:
    clock = gr.FakeClock()

    def slow(request: ModelRequest) -> ModelResponse:
        clock.advance(40)
        return gr.tool_call("list_files")

    run = agent_at(
        tmp_path,
        gr.ScriptedModel([slow] * 5),
        budget=Budget(deadline_s=100),
        max_iterations=None,
        clock=clock,
    ).run_sync("job")
    assert run.outcome is not None and run.outcome.limit == SpentLimit("time", 120.0, 100)


def test_a_stop_let_through_by_a_wrap_up_order_names_the_limit_it_is_about(
    tmp_path: Path,
) -> None:
    """Past 80% of the deadline the run is told to wrap up; the model stops with work left,
    so the limit ended the job, though none is spent: the one nearest to it is named."""
    clock = gr.FakeClock()

    def first(request: ModelRequest) -> ModelResponse:
        clock.advance(85)
        return gr.tool_call("list_files")

    run = agent_at(
        tmp_path,
        gr.ScriptedModel([first, gr.text("done")]),
        budget=Budget(deadline_s=100, max_iterations=50),
        max_iterations=None,
        clock=clock,
        stuck_turns=None,
    ).run_sync("job")
    assert run.status == "budget_exhausted" and "told to wrap up" in str(run.reason)
    assert run.outcome is not None and run.outcome.limit == SpentLimit("time", 85.0, 100)


# -- the token check before each request, for every model -------------------------------------


def test_a_model_that_cannot_count_is_stopped_by_its_usage_between_turns(
    tmp_path: Path,
) -> None:
    """No estimate is checked before sending (decision 157): the last request is sent, and
    the spent token limit ends the run as a value."""
    model = gr.ScriptedModel([gr.tool_call("list_files")] * 5)
    run = agent_at(tmp_path, model, budget=Budget(max_tokens=3_000), max_iterations=None).run_sync(
        "job"
    )
    assert run.status == "budget_exhausted"
    assert run.events.of_kind("request_over_budget") == []
    assert model.calls == run.turns  # every request was sent
    limit = run.outcome.limit if run.outcome else None
    assert limit is not None and limit.kind == "tokens" and limit.request is None
    assert limit.used >= limit.limit == 3_000
    assert finished_event(run).limit == limit
    assert run.reason == limit.reason


class CountingModel:
    """A model that counts its requests' input tokens before they are sent."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.counted: list[int] = []
        self.seen: list[int | None] = []

    @property
    def name(self) -> str:
        return "counting"

    async def count_input_tokens(self, request: ModelRequest) -> int:
        self.counted.append(request.turn)
        return self.count

    async def complete(self, request: ModelRequest) -> ModelResponse:
        call = current_call()
        self.seen.append(call.input_tokens if call else None)
        return dataclasses.replace(gr.text("done"), usage=Usage(self.count, 1))


def test_a_model_that_counts_is_asked_and_its_count_decides(tmp_path: Path) -> None:
    over = CountingModel(count=5_000)
    run = agent_at(
        tmp_path / "over", over, budget=Budget(max_tokens=4_000), max_iterations=None
    ).run_sync("job")
    assert run.status == "budget_exhausted" and over.seen == []  # never sent
    assert run.outcome is not None and run.outcome.limit == SpentLimit(
        "tokens", 0, 4_000, request=5_000
    )
    assert "counted before sending" in str(run.reason)
    fits = CountingModel(count=10)  # the estimate is far larger: the count is what is sent
    run = agent_at(
        tmp_path / "fits", fits, budget=Budget(max_tokens=1_000), max_iterations=None
    ).run_sync("job")
    assert run.status == "ended"
    assert fits.counted == [1] and fits.seen == [10]  # the model finds its count on the call


def test_a_model_that_checks_the_budget_itself_still_ends_the_run_as_before(
    tmp_path: Path,
) -> None:
    async def refuse(request: ModelRequest) -> ModelResponse:
        raise RequestOverBudget("too big for what is left", needed=900, remaining=100)

    model = gr.FunctionModel(refuse)
    budget = Budget(max_tokens=100_000)
    run = agent_at(tmp_path, model, budget=budget, max_iterations=None).run_sync("job")
    assert (run.status, run.reason) == ("budget_exhausted", "too big for what is left")
    [over] = run.events.of_kind("request_over_budget")
    assert (over["needed"], over["remaining"]) == (900, 100)
    assert run.outcome is not None and run.outcome.limit is not None
    assert run.outcome.limit.request == 900
