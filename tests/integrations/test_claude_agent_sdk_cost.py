"""A cost limit on a Claude Agent SDK session: each reply priced as it comes, the session
ended once the limit is spent, the CLI's ``max_budget_usd`` as a backstop."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.integrations.claude_agent_sdk import guardrail_hooks
from gr_notebook.integrations.claude_agent_sdk.replies import Reply
from gr_notebook.messages import Usage
from tests.integrations.conftest import MODEL, sdk_session
from tests.integrations.test_claude_agent_sdk import SCRIPT, agent_at

SONNET = gr.Price(3.0, 15.0, 3.75, 0.30)


def test_the_agent_lends_a_cost_limit_to_a_session_with_no_model_of_its_own(
    tmp_path: Path,
) -> None:
    """The agent's own (default, unpriced) model makes no call in a session, so it needs
    no price; the cost limit becomes the CLI's max_budget_usd, unless the caller sets one."""
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_cost_usd=0.75), store=False)
    hooks = guardrail_hooks(agent, tools=["Read"])
    assert hooks.options().max_budget_usd == 0.75
    assert hooks.options(max_budget_usd=2.0).max_budget_usd == 2.0
    assert hooks.run.limits.cost_limit_usd == 0.75
    plain = guardrail_hooks(agent_at(tmp_path / "plain", store=False), tools=["Read"])
    assert plain.options().max_budget_usd is None


def _reply(model: str, usage: Usage, n: int) -> Reply:
    return Reply(message_id=f"msg_{n}", model=model, usage=usage, started=0.0)


def test_each_reply_is_priced_and_a_spent_limit_ends_the_session(tmp_path: Path) -> None:
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_cost_usd=0.01), store=False)
    hooks = guardrail_hooks(agent, tools=["Read"])
    session = hooks._session
    session._model_call(_reply(MODEL, Usage(2_000, 100), 1))
    [call] = hooks.run.events.of_kind("model_call")
    assert call.data["cost_usd"] == pytest.approx(SONNET.cost(Usage(2_000, 100)))
    assert session.state.usage().spent is None
    session._model_call(_reply(MODEL, Usage(2_000, 100), 2))
    spent = session.state.usage().spent
    assert spent is not None and spent.kind == "cost"  # $0.0150 of $0.01
    assert session.state.cost_usd == pytest.approx(2 * SONNET.cost(Usage(2_000, 100)))


def test_a_reply_of_a_model_with_no_price_ends_a_capped_session_failed(tmp_path: Path) -> None:
    """The cap cannot count an unpriced model, so it is refused before the session spends
    more: the run ends ``failed`` with a ConfigError naming the model and the fix."""
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_cost_usd=1.0), store=False)
    hooks = guardrail_hooks(agent, tools=["Read"])
    session = hooks._session
    session.join("session-1")
    session._model_call(_reply("claude-next-9", Usage(110_000, 10), 1))
    assert hooks.run.status == "failed"
    assert isinstance(hooks.run.error, gr.ConfigError)
    assert "'claude-next-9'" in str(hooks.run.error) and "price=gr.Price(" in str(hooks.run.error)
    [error] = session.run.events.of_kind("error")
    assert error.data["source"] == "budget" and error.data["message"] == str(hooks.run.error)
    session.observe(SimpleNamespace(subtype="success"))  # nothing more is recorded
    assert len(session.run.events.of_kind("model_call")) == 1
    priced = agent_at(
        tmp_path / "priced", budget=gr.Budget(max_cost_usd=1.0), price=SONNET, store=False
    )
    session = guardrail_hooks(priced, tools=["Read"])._session
    session._model_call(_reply("claude-next-9", Usage(1_000, 10), 1))  # the agent's price
    assert session.state.cost_usd == pytest.approx(SONNET.cost(Usage(1_000, 10)))
    assert session.run.events.of_kind("error") == []


def test_a_named_model_with_no_price_is_refused_before_the_session(tmp_path: Path) -> None:
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_cost_usd=1.0), store=False)
    with pytest.raises(gr.ConfigError, match=r"'claude-next-9' has no price: pass price=gr"):
        guardrail_hooks(agent, tools=["Read"], model="claude-agent-sdk:claude-next-9")
    hooks = guardrail_hooks(agent, tools=["Read"], model=f"claude-agent-sdk:{MODEL}")
    assert hooks.run.limits.cost_limit_usd == 1.0  # a priced model: the cap can count it


def test_the_cli_ending_on_its_budget_is_the_cost_limit(tmp_path: Path) -> None:
    agent = agent_at(tmp_path / "ws", budget=gr.Budget(max_cost_usd=0.5), store=False)
    session = guardrail_hooks(agent, tools=["Read"])._session
    message: Any = SimpleNamespace(subtype="error_max_budget_usd", total_cost_usd=0.51)
    outcome = session._result_outcome(message)
    assert outcome.status == "budget_exhausted" and outcome.limit is not None
    assert (outcome.limit.kind, outcome.limit.used, outcome.limit.limit) == ("cost", 0.51, 0.5)
    assert outcome.reason == "the cost limit of $0.50 was reached ($0.51 spent)"


async def test_a_session_ends_when_its_cost_limit_is_spent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    agent = agent_at(ws, budget=gr.Budget(max_cost_usd=0.000001))
    session = await sdk_session(agent, SCRIPT, ws)
    run = session.run
    assert run.status == "budget_exhausted" and run.outcome is not None
    assert run.outcome.limit is not None and run.outcome.limit.kind == "cost"
    assert run.turns < len(SCRIPT)
    assert all(e.data["cost_usd"] > 0 for e in run.events.of_kind("model_call"))
