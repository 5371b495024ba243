"""The live dashboard widget shows finished thinking collapsed, under the feedback panel."""

from __future__ import annotations

from collections.abc import Callable

import gr_notebook as gr
from gr_notebook.jupyter.widgets import Dashboard
from gr_notebook.messages import ThinkingBlock
from gr_notebook.models import ModelResponse

Factory = Callable[..., gr.Agent]


async def test_a_live_dashboard_shows_each_finished_thought(make_agent: Factory) -> None:
    read = gr.tool_call("read_file", path="instructions.md").content
    script = [
        ModelResponse((ThinkingBlock("First, read the brief.", "sig"), *read), "tool_use"),
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


def test_the_thinking_and_live_panels_are_built_when_there_is_something_to_show(
    make_agent: Factory,
) -> None:
    """Each panel is a widget; a dashboard of a run that neither thinks nor streams does
    without them, until asked (decision 280's rule for the fork controls)."""

    def shown(dash: Dashboard) -> list[str]:
        return [str(c.value) for c in dash.children if hasattr(c, "value")]

    plain = Dashboard(make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("job"))
    assert not any("gr-thinking" in v or "gr-live" in v for v in shown(plain))
    count = len(plain.children)
    live = plain.live  # asked for: built, empty, between the feedback and the timeline
    assert live.value == "" and len(plain.children) == count + 1
    assert plain.children.index(plain.feedback) + 1 == plain.children.index(live)
    assert plain.children.index(live) + 1 == plain.children.index(plain.timeline)

    read = gr.tool_call("read_file", path="instructions.md").content
    script = [
        ModelResponse((ThinkingBlock("First, read the brief.", "sig"), *read), "tool_use"),
        gr.text("done"),
    ]
    thought = Dashboard(make_agent(gr.ScriptedModel(script)).run_sync("job"))
    assert any("First, read the brief." in v for v in shown(thought))  # built by the refresh
