"""The Approve/Deny confirmer, driven the way its buttons would be, and how ``%%agent``
gives it to runs: only where a click can reach the kernel, never over the person's own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import gr_notebook as gr
from gr_notebook.errors import ConfigError, RunError
from gr_notebook.jupyter import magics as magics_module
from gr_notebook.jupyter.confirm import ConfirmationPrompt, WidgetConfirmer
from gr_notebook.jupyter.widgets import Dashboard
from tests.test_run_controls import until

Factory = Callable[..., gr.Agent]
BIG = gr.tool_call(
    "assess_task",
    task_type="codebase_audit",
    estimated_files=20,
    estimated_iterations=15,
    strategy="map the modules, then audit each",
)  # at least 160,000 tokens: above the default threshold of 100,000


def big_job() -> gr.ScriptedModel:
    return gr.ScriptedModel([BIG, gr.tool_call("check_resources"), gr.text("done")])


def budget_seen_by_the_model(run: gr.Run) -> tuple[int | None, int]:
    """What check_resources, called after the assessment, reported."""
    report = json.loads(run.events.of_kind("tool_call")[-1]["result"])
    return report["tokens_budget"], report["iterations_max"]


def decision(run: gr.Run) -> tuple[bool, str]:
    [event] = run.events.of_kind("confirmation")
    return event["approved"], event["by"]


async def start_and_wait_for_prompt(
    agent: gr.Agent, confirmer: WidgetConfirmer
) -> tuple[gr.Run, ConfirmationPrompt]:
    run = agent.start("audit the code")
    await until(lambda: bool(confirmer.pending))
    return run, confirmer.pending[0]


# -- the confirmer ---------------------------------------------------------------------------


async def test_approve_click_lets_the_budget_stand(make_agent: Factory) -> None:
    shown: list[ConfirmationPrompt] = []
    confirmer = WidgetConfirmer(show=shown.append)
    run, prompt = await start_and_wait_for_prompt(
        make_agent(big_job(), confirm=confirmer), confirmer
    )
    assert shown == [prompt] and not run.done  # the run waits on the person
    r = prompt.request
    assert (r.operation, r.threshold, r.run_id) == ("assess_task", 100_000, run.run_id)
    assert r.estimated_tokens >= 160_000
    assert f"{r.estimated_tokens:,}" in prompt.children[0].value
    assert "100,000" in prompt.children[0].value
    assert "map the modules" in prompt.children[0].value
    prompt.approve_button.click()
    await run.wait()
    assert decision(run) == (True, "confirmer")
    assert budget_seen_by_the_model(run) == (r.estimated_tokens, 40)
    assert prompt.outcome == "approved" and prompt.approve_button.disabled
    prompt.deny_button.click()  # too late: the first answer stands
    assert prompt.outcome == "approved" and "Approved" in prompt.status.value


async def test_deny_keeps_the_run_on_its_own_limits(make_agent: Factory) -> None:
    confirmer = WidgetConfirmer(show=lambda prompt: None)
    run, prompt = await start_and_wait_for_prompt(
        make_agent(big_job(), confirm=confirmer), confirmer
    )
    confirmer.deny()  # what the oldest prompt's Deny button does
    await run.wait()
    assert decision(run) == (False, "confirmer")
    assert prompt.outcome == "denied" and "Denied" in prompt.status.value
    assert budget_seen_by_the_model(run) == (None, 200)
    with pytest.raises(RunError, match="nothing to approve: no confirmation is waiting"):
        confirmer.approve()


async def test_no_answer_within_the_timeout_denies(make_agent: Factory) -> None:
    confirmer = WidgetConfirmer(timeout=0.01, show=lambda prompt: None)
    run = await make_agent(big_job(), confirm=confirmer).run("audit the code")
    assert decision(run) == (False, "confirmer")
    [prompt] = confirmer.prompts
    assert prompt.outcome == "timed_out" and "no answer within 0.01 s" in prompt.status.value
    assert prompt.approve_button.disabled and prompt.deny_button.disabled
    prompt.approve()
    assert prompt.outcome == "timed_out"


async def test_stopping_the_run_withdraws_the_question(make_agent: Factory) -> None:
    confirmer = WidgetConfirmer(show=lambda prompt: None)
    run, prompt = await start_and_wait_for_prompt(
        make_agent(big_job(), confirm=confirmer), confirmer
    )
    run.cancel("stopped by the person")
    await run.wait()
    assert run.status == "cancelled"
    assert prompt.outcome == "withdrawn" and prompt.deny_button.disabled
    assert confirmer.pending == ()


def test_timeout_must_be_positive_seconds_or_none() -> None:
    with pytest.raises(ConfigError, match="timeout must be a number of seconds > 0"):
        WidgetConfirmer(timeout=0)
    assert WidgetConfirmer(timeout=None).timeout is None


# -- %%agent ---------------------------------------------------------------------------------


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were buttons offered where no click can come, a test fails fast instead of hanging."""
    monkeypatch.setattr(magics_module, "CONFIRM_TIMEOUT_S", 0.2)


@pytest.fixture
def kernel(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell with a kernel, as in Jupyter: widgets show and clicks can come in."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)


def prompts_of(run: gr.Run) -> tuple[Any, ...]:
    return tuple(Dashboard.for_run(run).prompts.children)


async def answer_in_dashboard(ip: InteractiveShell, out: str) -> None:
    """Click Approve in the run's dashboard once the question shows there."""
    await until(lambda: out in ip.user_ns and bool(prompts_of(ip.user_ns[out])))
    (prompt,) = prompts_of(ip.user_ns[out])
    prompt.approve_button.click()


@pytest.mark.usefixtures("kernel")
async def test_a_background_run_asks_in_its_dashboard(ip: InteractiveShell, tmp_path: Path) -> None:
    agent = ip.user_ns["mine"] = gr.Agent(big_job(), workspace=tmp_path / "bg", store=False)
    with capture_output():
        ip.run_cell_magic("agent", "--background --agent mine --out bg", "audit the code")
    await answer_in_dashboard(ip, "bg")
    run = await asyncio.wait_for(ip.user_ns["bg"].wait(), 10)
    assert decision(run) == (True, "confirmer")
    assert agent.regulation is not None and agent.regulation.confirm is None  # only lent


@pytest.mark.usefixtures("kernel")
async def test_a_top_level_await_cell_asks_in_its_dashboard(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    ip.user_ns["mine"] = gr.Agent(big_job(), workspace=tmp_path / "tl", store=False)
    magics = ip.find_cell_magic("agent").__self__
    with capture_output():
        await asyncio.wait_for(
            asyncio.gather(
                magics.run_async("--agent mine --out r", "audit the code"),
                answer_in_dashboard(ip, "r"),
            ),
            10,
        )
    assert decision(ip.user_ns["r"]) == (True, "confirmer")


@pytest.mark.usefixtures("kernel", "short_timeout")
def test_a_blocking_cell_denies_at_once_instead_of_waiting_for_a_click(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    ip.user_ns["mine"] = gr.Agent(
        big_job(), workspace=tmp_path / "blk", store=False, confirm_above_tokens=100_000
    )
    with capture_output():
        ip.run_cell_magic("agent", "--agent mine --out blocked", "audit the code")
    run = ip.user_ns["blocked"]
    assert run.status == "ended"
    assert decision(run) == (False, "no confirmer (headless runs deny)")
    assert prompts_of(run) == ()


@pytest.mark.usefixtures("short_timeout")
def test_without_a_kernel_no_buttons_are_offered(ip: InteractiveShell, tmp_path: Path) -> None:
    ip.user_ns["mine"] = gr.Agent(
        big_job(), workspace=tmp_path / "term", store=False, confirm_above_tokens=100_000
    )
    with capture_output() as captured:
        result = ip.run_cell("%%agent --agent mine --out r\naudit the code")
    assert result.success, captured.stderr
    assert decision(ip.user_ns["r"]) == (False, "no confirmer (headless runs deny)")


@pytest.mark.usefixtures("kernel")
async def test_the_persons_own_confirmer_is_kept(ip: InteractiveShell, tmp_path: Path) -> None:
    asked: list[gr.guardrails.ConfirmationRequest] = []

    def mine(request: gr.guardrails.ConfirmationRequest) -> bool:
        asked.append(request)
        return True

    ip.user_ns["mine"] = gr.Agent(big_job(), workspace=tmp_path / "own", store=False, confirm=mine)
    with capture_output():
        ip.run_cell_magic("agent", "--background --agent mine --out bg", "audit the code")
    run = await asyncio.wait_for(ip.user_ns["bg"].wait(), 10)
    assert decision(run) == (True, "confirmer")
    assert [r.estimated_tokens >= 160_000 for r in asked] == [True]
    assert prompts_of(run) == ()
