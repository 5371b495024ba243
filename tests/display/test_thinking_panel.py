"""The model's finished thinking on the dashboard: recorded clipped, shown collapsed, and
absent for a model that does not think."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import gr_notebook as gr
from gr_notebook.display.render import render_dashboard, render_thinking, text_dashboard
from gr_notebook.display.state import RunTracker, ThinkingEntry
from gr_notebook.eventdata import MAX_EVENT_TEXT
from gr_notebook.events import ThinkingEvent
from gr_notebook.messages import RedactedThinkingBlock, ThinkingBlock
from gr_notebook.models import ModelResponse

Factory = Callable[..., gr.Agent]
READ = gr.tool_call("read_file", path="instructions.md")


def thinking(*blocks: object) -> ModelResponse:
    return ModelResponse((*blocks, *READ.content), "tool_use")  # type: ignore[arg-type]


def run_that_thinks(make_agent: Factory, model: list[gr.ScriptedModel] | None = None) -> gr.Run:
    script = [
        thinking(ThinkingBlock("Read <instructions> & plan.", "sig-1")),
        thinking(ThinkingBlock("x" * 5_000, "sig-2"), RedactedThinkingBlock("opaque")),
        thinking(RedactedThinkingBlock("opaque-2")),
        thinking(ThinkingBlock("Last look.", "sig-4")),
        gr.text("done"),
    ]
    scripted = gr.ScriptedModel(script)
    if model is not None:
        model.append(scripted)
    return make_agent(scripted).run_sync("job")


def test_thinking_is_recorded_clipped_and_redacted_thinking_without_its_data(
    make_agent: Factory,
) -> None:
    models: list[gr.ScriptedModel] = []
    run = run_that_thinks(make_agent, models)
    events = run.events.of_kind("thinking")
    assert [(e["blocks"], e["redacted"], e["chars"]) for e in events] == [
        (1, 0, 27),
        (1, 1, 5_000),
        (0, 1, 0),
        (1, 0, 10),
    ]
    long = events[1]["text"]
    assert len(long) == MAX_EVENT_TEXT and long.endswith("…")
    assert "opaque" not in str([dict(e.data) for e in events])
    # the conversation keeps the blocks whole; Message.text stays the text blocks only
    last = models[0].requests[-1]
    message = next(m for m in last.messages if m.thinking)
    assert message.thinking == (ThinkingBlock("Read <instructions> & plan.", "sig-1"),)
    assert message.text == ""


def test_the_dashboard_shows_the_latest_thinking_collapsed(make_agent: Factory) -> None:
    run = run_that_thinks(make_agent)
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    state = tracker.snapshot(run)
    assert [t.turn for t in state.thinking] == [4, 3, 2]  # newest first, the last three
    html = render_dashboard(state)
    panel = render_thinking(state.thinking)
    assert panel in html and html.index("gr-feedback") < html.index("gr-thinking")
    assert html.index("gr-thinking") < html.index("gr-timeline")
    assert panel.count("<details class='gr-thinking-entry'") == 3 and " open" not in panel
    assert "Thought (10 characters)" in panel
    assert "Thought (no text shown, 1 redacted)" in panel
    assert "1 redacted block, not shown." in panel
    assert "Thought (5,000 characters, 1 redacted)" in panel
    text = text_dashboard(state)
    assert "Thinking (newest first):\n  turn 4: Thought (10 characters)\n" in text


def test_thinking_text_is_escaped() -> None:
    entry = ThinkingEntry(turn=1, text="if a < b & c: <script>", blocks=1, redacted=0, chars=22)
    panel = render_thinking((entry,))
    assert "&lt;script&gt;" in panel and "<script>" not in panel


def test_a_model_that_does_not_think_leaves_the_dashboard_as_it_was(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([READ, gr.text("done")])).run_sync("job")
    assert run.events.of_kind("thinking") == [] and run.thinking_df().empty
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    state = tracker.snapshot(run)
    assert state.thinking == () and render_thinking(state.thinking) == ""
    html = render_dashboard(state)
    assert "gr-thinking" not in html
    assert html == render_dashboard(dataclasses.replace(state, thinking=()))
    assert "Thinking" not in text_dashboard(state)


def test_thinking_events_read_back_typed_from_the_store(
    make_agent: Factory, tmp_path: Path
) -> None:
    run = run_that_thinks(make_agent)
    with gr.Store(tmp_path / "store.sqlite") as store:
        stored = [e for e in store.events(run.run_id) if e.kind == "thinking"]
    assert all(isinstance(e, ThinkingEvent) for e in stored)
    assert [e.to_data() for e in stored] == [e.to_data() for e in run.events.of_kind("thinking")]
