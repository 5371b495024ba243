"""The live dashboard widget shows finished thinking collapsed, under the feedback panel."""

from __future__ import annotations

from collections.abc import Callable

import gr_notebook as gr
from gr_notebook.jupyter.widgets import Dashboard
from gr_notebook.messages import ThinkingBlock

Factory = Callable[..., gr.Agent]


async def test_a_live_dashboard_shows_each_finished_thought(make_agent: Factory) -> None:
    read = gr.tool_call("read_file", path="instructions.md").content
    script = [
        gr.ModelResponse((ThinkingBlock("First, read the brief.", "sig"), *read), "tool_use"),
        gr.text("done"),
    ]
    run = make_agent(gr.ScriptedModel(script)).start("job")
    dash = Dashboard(run)
    assert dash.thinking in dash.children
    assert dash.children.index(dash.feedback) + 1 == dash.children.index(dash.thinking)
    await run.wait()
    dash.refresh()
    assert "<details class='gr-thinking-entry'" in dash.thinking.value
    assert "First, read the brief." in dash.thinking.value
    assert "turn 1</span> Thought (22 characters)" in dash.thinking.value


def test_a_dashboard_of_a_model_that_does_not_think_has_an_empty_panel(
    make_agent: Factory,
) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("job")
    assert Dashboard(run).thinking.value == ""
