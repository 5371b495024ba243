"""A Claude Agent SDK or LangChain session is traced as a run of gr's loop is: its ``gr.Run``
has the same events, so live tracing and the export give the same spans and decisions."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

import gr_notebook as gr
from gr_notebook.integrations.opentelemetry import export_run, instrument
from tests.integrations.conftest import MODEL, sdk_session
from tests.integrations.otel_helpers import layout, memory_provider, workspace
from tests.integrations.test_opentelemetry import decision_rows, frame_rows


async def test_a_claude_agent_sdk_session_is_traced_like_a_run(tmp_path: Path) -> None:
    script = [
        gr.tool_call("write_file", path="data.md", content="new\n"),  # denied: not read yet
        gr.tool_call("read_file", path="data.md"),
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.text("Wrote data.md."),
    ]
    ws = workspace(tmp_path / "ws", {"data.md": "old\n"})
    agent = gr.Agent(
        gr.ScriptedModel([]),
        workspace=ws,
        store=False,
        self_regulation=False,
        interventions=None,
        policies=[gr.ReadBeforeWritePolicy()],
        name="claude",
    )
    provider, exporter = memory_provider()
    with instrument(agent, provider):
        session = await sdk_session(agent, script, ws)
    run = session.run
    live = list(exporter.get_finished_spans())
    exporter.clear()
    export_run(run, provider)
    assert layout(list(exporter.get_finished_spans())) == layout(live)
    assert decision_rows(live) == frame_rows(run)
    [root] = [s for s in live if s.parent is None]
    assert root.name == "invoke_agent claude"
    assert root.attributes["gr.harness"] == "claude-agent-sdk"
    assert root.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert root.attributes[semconv.GEN_AI_REQUEST_MODEL] == MODEL
    tools = [s for s in live if s.name.startswith("execute_tool")]
    assert [s.name for s in tools] == [
        "execute_tool Write",
        "execute_tool Read",
        "execute_tool Write",
    ]
    assert tools[0].attributes["error.type"] == "denied"
    chats = [s for s in live if s.name.startswith("chat")]
    assert len(chats) == run.turns and chats[0].name == f"chat {MODEL}"


async def test_a_langchain_session_is_traced_like_a_run(tmp_path: Path) -> None:
    from tests.integrations.langchain_kit import langchain_session

    script = [
        gr.tool_call("write_file", path="data.md", content="new\n"),  # denied: not read yet
        gr.tool_call("read_file", path="data.md"),
        gr.tool_call("write_file", path="data.md", content="new\n"),
        gr.text("Wrote data.md."),
    ]
    ws = workspace(tmp_path / "ws", {"data.md": "old\n"})
    agent = gr.Agent(
        gr.ScriptedModel([]),
        workspace=ws,
        store=False,
        self_regulation=False,
        interventions=None,
        policies=[gr.ReadBeforeWritePolicy()],
        name="chain",
    )
    provider, exporter = memory_provider()
    with instrument(agent, provider):
        session = await langchain_session(agent, script, ws)
    run = session.run
    live = list(exporter.get_finished_spans())
    exporter.clear()
    export_run(run, provider)
    assert layout(list(exporter.get_finished_spans())) == layout(live)
    assert decision_rows(live) == frame_rows(run)
    [root] = [s for s in live if s.parent is None]
    assert root.name == "invoke_agent chain"
    assert root.attributes["gr.harness"] == "langchain"
    tools = [s for s in live if s.name.startswith("execute_tool")]
    assert len(tools) == 3 and tools[0].attributes["error.type"] == "denied"
