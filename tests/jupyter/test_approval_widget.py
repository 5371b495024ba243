"""The dashboard's Approve, Deny and Edit controls, driven as their clicks drive them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import gr_notebook as gr
from gr_notebook.events import ToolCallEvent
from gr_notebook.jupyter.approval import ApprovalPrompt
from gr_notebook.jupyter.confirm import WidgetConfirmer
from gr_notebook.jupyter.widgets import Dashboard

WRITE = ("write_file", {"path": "a.txt", "content": "hello"})


def start(make_agent: Callable[..., gr.Agent], **kwargs: Any) -> gr.Run:
    model = gr.ScriptedModel([gr.tool_calls([WRITE]), gr.text("done")])
    agent = make_agent(
        model,
        policies=[gr.ApprovalPolicy(tools=["write_file"])],
        self_regulation=False,
        stuck_turns=None,
        **kwargs,
    )
    return agent.start("job")


async def prompt_of(dash: Dashboard, index: int = 0) -> ApprovalPrompt:
    for _ in range(1000):
        prompts = [p for p in dash.prompts.children if isinstance(p, ApprovalPrompt)]
        if len(prompts) > index:
            return prompts[index]
        await asyncio.sleep(0)
    raise AssertionError("no approval prompt came")


def result(run: gr.Run) -> ToolCallEvent:
    return next(e for e in run.events if isinstance(e, ToolCallEvent))


async def test_approve_from_the_dashboard(make_agent: Callable[..., gr.Agent]) -> None:
    run = start(make_agent, confirm=lambda r: False)  # the dashboard is asked first
    dash = Dashboard(run)
    prompt = await prompt_of(dash)
    assert "write_file" in prompt.children[0].value and "hello" in prompt.children[0].value
    prompt.approve_button.click()
    await run.wait()
    assert run.workspace.read_text("a.txt") == "hello"
    assert prompt.outcome == "answered" and prompt.approve_button.disabled
    assert prompt.children == (prompt.status,)  # folded into its one line
    assert "write_file a.txt</b>: " in prompt.status.value and "Approved" in prompt.status.value
    assert run.approvals_df()["by"].tolist() == ["dashboard"]
    assert dash.approvals is not None and not run.approvals.attended  # let go at the end


async def test_deny_with_the_reason_box(make_agent: Callable[..., gr.Agent]) -> None:
    run = start(make_agent)
    dash = Dashboard(run)
    prompt = await prompt_of(dash)
    prompt.reason.value = "use notes.md instead"
    prompt.deny_button.click()
    await run.wait()
    assert "Their reason: use notes.md instead" in result(run).result
    assert "Denied: use notes.md instead" in prompt.status.value


async def test_edit_refused_by_the_schema_is_asked_again(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = start(make_agent)
    dash = Dashboard(run)
    prompt = await prompt_of(dash)
    prompt.edit_button.click()
    assert prompt.input.layout.display == ""
    prompt.input.value = "{not json"
    prompt.run_edited.click()
    assert "not JSON" in prompt.status.value and prompt.outcome == "waiting"
    prompt.input.value = '{"path": "b.txt"}'
    prompt.run_edited.click()
    again = await prompt_of(dash, 1)
    assert "Your edit was refused" in again.children[0].value
    again.edit('{"path": "b.txt", "content": "edited"}')
    await run.wait()
    assert run.workspace.read_text("b.txt") == "edited"


async def test_stop_closes_the_prompt_and_a_late_click_says_so(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = start(make_agent)
    dash = Dashboard(run)
    prompt = await prompt_of(dash)
    dash.stop()
    await run.wait()
    assert run.status == "cancelled" and prompt.approve_button.disabled
    assert prompt.outcome == "withdrawn" and prompt.children == (prompt.status,)
    prompt.approve()  # a click that arrives late
    assert "no longer waiting" in prompt.status.value


def test_a_blocking_cells_dashboard_does_not_attend(make_agent: Callable[..., gr.Agent]) -> None:
    """On a worker thread (a blocking cell), nobody could click: the run does not wait."""
    seen: list[bool] = []

    async def main() -> None:
        run = start(make_agent)
        seen.append(Dashboard(run).approvals is None)
        await run.wait()
        seen.append(result(run).is_error)

    worker = threading.Thread(target=lambda: asyncio.run(main()))
    worker.start()
    worker.join(30)
    assert seen == [True, True]


async def test_a_widget_confirmer_shows_a_tool_call(make_agent: Callable[..., gr.Agent]) -> None:
    confirmer = WidgetConfirmer(show=lambda prompt: None)
    run = start(make_agent, confirm=confirmer)
    for _ in range(1000):
        if confirmer.pending:
            break
        await asyncio.sleep(0)
    [prompt] = confirmer.pending
    assert "Approve write_file" in prompt.children[0].value
    confirmer.approve()
    await run.wait()
    assert run.workspace.read_text("a.txt") == "hello"
