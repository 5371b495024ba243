"""OpenTelemetry traces of runs: live tracing and the export of a recorded run give the same
spans, with the GenAI conventions' names and every guardrail decision as a span event; an
OTLP/HTTP exporter delivers them to a receiver on 127.0.0.1 that reads them back."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.history.checkpoint_store import load_checkpoint
from gr_notebook.integrations.opentelemetry import Instrumentation, export_run, instrument
from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.models.secrets import key_forms
from gr_notebook.testing import Fault, MessagesServer
from gr_notebook.testing.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.integrations.otel_helpers import (
    GUARDED_SCRIPT,
    STUCK_SCRIPT,
    every_value,
    guarded_agent,
    layout,
    memory_provider,
    stuck_agent,
    workspace,
)

Make = Callable[..., gr.Agent]
SCENARIOS = {
    "guarded": (guarded_agent, GUARDED_SCRIPT, {"data.md": "old\n"}),
    "stuck": (stuck_agent, STUCK_SCRIPT, {"a.md": "a"}),
}


async def traced(
    tmp_path: Path, scenario: str, *, capture_content: bool = False, **options: Any
) -> tuple[gr.Run, list[ReadableSpan], TracerProvider, Any]:
    make, script, files = SCENARIOS[scenario]
    ws = workspace(tmp_path / scenario, files)
    provider, exporter = memory_provider()
    agent = make(gr.ScriptedModel(list(script)), ws, **options)
    with instrument(agent, provider, capture_content=capture_content):
        run = await agent.run("Do the job.")
    spans = list(exporter.get_finished_spans())
    exporter.clear()
    return run, spans, provider, exporter


def _by_operation(spans: list[Any], operation: str) -> list[Any]:
    return [s for s in spans if s.attributes.get(semconv.GEN_AI_OPERATION_NAME) == operation]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_a_recorded_run_exports_the_spans_live_tracing_gave(
    tmp_path: Path, scenario: str
) -> None:
    run, live, provider, exporter = await traced(tmp_path, scenario)
    trace_id = export_run(run, provider)
    exported = list(exporter.get_finished_spans())
    assert layout(exported) == layout(live)
    assert {f"{s.context.trace_id:032x}" for s in exported} == {trace_id}
    assert len({s.context.trace_id for s in live}) == 1  # one trace per run


async def test_the_spans_follow_the_genai_conventions(tmp_path: Path) -> None:
    run, spans, _, _ = await traced(tmp_path, "guarded")
    [root] = [s for s in spans if s.parent is None]
    assert (root.name, root.kind) == ("invoke_agent agent", trace.SpanKind.INTERNAL)
    assert root.attributes[semconv.GEN_AI_AGENT_NAME] == "agent"
    assert root.attributes[semconv.GEN_AI_CONVERSATION_ID] == run.run_id
    assert root.attributes["gr.run.status"] == "completed"
    chats = _by_operation(spans, "chat")
    tools = _by_operation(spans, "execute_tool")
    assert len(chats) == run.turns == 6 and len(tools) == 4
    assert all(s.parent.span_id == root.context.span_id for s in chats + tools)
    assert {(s.name, s.kind) for s in chats} == {("chat scripted", trace.SpanKind.CLIENT)}
    turns = run.turns_df()
    assert [s.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] for s in chats] == list(
        turns["input_tokens"]
    )
    assert chats[0].attributes[semconv.GEN_AI_PROVIDER_NAME] == "gr_notebook"
    assert chats[0].attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    denied = tools[0]
    assert denied.name == "execute_tool write_file"
    assert denied.status.status_code == trace.StatusCode.ERROR
    assert denied.attributes["error.type"] == "denied"
    assert all(s.status.status_code == trace.StatusCode.UNSET for s in tools[1:])
    assert [s.attributes[semconv.GEN_AI_TOOL_CALL_ID] for s in tools] == [
        e.tool_use_id for e in run.events.of_kind("tool_call")
    ]
    # Each span runs from its first decision to its last, inside the run's.
    for span in tools:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
        assert all(span.start_time <= e.timestamp <= span.end_time for e in span.events)


async def test_the_spans_give_the_runs_decisions_row_for_row(tmp_path: Path) -> None:
    run, spans, _, _ = await traced(tmp_path, "guarded")
    assert decision_rows(spans) == frame_rows(run)
    run, spans, _, _ = await traced(tmp_path, "stuck")
    assert decision_rows(spans) == frame_rows(run)
    assert [row[1] for row in decision_rows(spans)["interventions"] if row[2]] == [1, 2, 3]


def decision_rows(spans: list[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The run's decisions as the spans carry them, in order: spans from the SDK or from
    the OTLP receiver alike."""
    ordered = sorted(spans, key=_start)
    events = sorted(
        ((e, s) for s in ordered for e in s.events),
        key=lambda pair: (_time(pair[0]), pair[0].name),
    )
    tools = _by_operation(ordered, "execute_tool")
    return {
        "tool_calls": [
            (s.attributes[semconv.GEN_AI_TOOL_NAME], _status(s) == "ERROR") for s in tools
        ],
        "policy": [
            (
                a["gr.guardrail.kind"],
                a["gr.decision"],
                a.get("gr.guardrail.name"),
                a.get("gr.reason"),
                a["gr.mode"],
                s.attributes[semconv.GEN_AI_TOOL_NAME],
            )
            for e, s in events
            if e.name == "gr.policy_decision"
            for a in [e.attributes]
        ],
        "feedback": [
            (
                e.attributes["gr.guardrail.name"],
                e.attributes["gr.decision"],
                e.attributes["gr.reason"],
            )
            for e, _ in events
            if e.name == "gr.feedback"
        ],
        "completion": [
            (e.attributes["gr.decision"], e.attributes["gr.completion.refusals"])
            for e, _ in events
            if e.name == "gr.completion_check"
        ],
        "interventions": [
            (
                e.attributes["gr.intervention.step"],
                e.attributes["gr.intervention.tier"],
                e.attributes["gr.intervention.fired"],
                e.attributes.get("gr.intervention.skip_reason"),
            )
            for e, _ in events
            if e.name == "gr.intervention_check"
        ],
    }


def frame_rows(run: gr.Run) -> dict[str, list[tuple[Any, ...]]]:
    def value(v: Any) -> Any:
        return None if isinstance(v, float) and v != v else v

    calls = run.tool_calls_df().to_dict("records")
    policy = run.policy_df().to_dict("records")
    completion = run.completion_df().to_dict("records")
    return {
        "tool_calls": [(r["tool"], bool(r["is_error"])) for r in calls],
        "policy": [
            (
                "policy",
                r["decision"],
                value(r["guardrail"]),
                value(r["reason"]),
                r["mode"],
                r["tool"],
            )
            for r in policy
        ],
        "feedback": [
            (r["provider"], "fire", r["summary"]) for r in run.feedback_df().to_dict("records")
        ],
        "completion": [(_verdict(r), r["refusals"]) for r in completion],
        "interventions": [
            (r["step"], r["tier"], bool(r["fired"]), value(r["skip_reason"]))
            for r in run.interventions_df().to_dict("records")
        ],
    }


def _verdict(check: dict[str, Any]) -> str:
    """A completion_df row's verdict, in the words of ``gr.decision``."""
    if isinstance(check["bypassed"], str):
        return "bypass"
    return "refuse" if check["complete"] is False else "accept"


def _start(span: Any) -> int:
    return int(getattr(span, "start_time", None) or span.start_ns)


def _time(event: Any) -> int:
    return int(getattr(event, "timestamp", None) or event.time_ns)


def _status(span: Any) -> str:
    if isinstance(span, ReceivedSpan):
        return {0: "UNSET", 1: "OK", 2: "ERROR"}[span.status_code]
    return str(span.status.status_code.name)


async def test_an_otlp_http_exporter_delivers_the_run_to_a_receiver(tmp_path: Path) -> None:
    run, live, _, _ = await traced(tmp_path, "guarded")
    with OtlpReceiver() as receiver:
        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
        )
        trace_id = export_run(run, provider)
        provider.shutdown()
        received = receiver.spans
    assert len(received) == len(live) == 11
    assert {s.trace_id for s in received} == {trace_id}
    assert {s.scope for s in received} == {"gr_notebook"}
    assert decision_rows(received) == frame_rows(run)
    [root] = [s for s in received if not s.parent_span_id]
    assert all(s.parent_span_id == root.span_id for s in received if s is not root)
    assert root.kind == 1 and root.name == "invoke_agent agent"  # SPAN_KIND_INTERNAL
    assert {s.kind for s in _by_operation(received, "chat")} == {3}  # SPAN_KIND_CLIENT
    # The times are the events' own, to the nanosecond, as the in-memory spans have them.
    assert sorted((s.name, s.start_ns, s.end_ns) for s in received) == sorted(
        (s.name, s.start_time, s.end_time) for s in live
    )


async def test_content_is_exported_only_when_asked_for(tmp_path: Path) -> None:
    content_keys = {
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_INPUT_MESSAGES,
        "gr.feedback.text",
        "gr.order.text",
        "gr.approval.input",
    }

    def keys(spans: list[ReadableSpan]) -> set[str]:
        found = {k for s in spans for k in s.attributes or {}}
        return found | {k for s in spans for e in s.events for k in e.attributes or {}}

    run, spans, provider, exporter = await traced(tmp_path / "off", "guarded")
    assert not keys(spans) & content_keys
    assert not any("# Report" in v or "Do the job." in v for v in every_value(spans))
    reasons = [e.attributes.get("gr.reason") for s in spans for e in s.events]
    assert any("read it first" in str(r) for r in reasons)  # a denial's reason is no content

    run, spans, provider, exporter = await traced(tmp_path / "on", "guarded", capture_content=True)
    assert keys(spans) >= content_keys
    [write] = [
        s
        for s in _by_operation(spans, "execute_tool")
        if "report.md" in str(s.attributes.get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS))
    ]
    assert json.loads(str(write.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS])) == {
        "path": "report.md",
        "content": "# Report\n",
    }
    [root] = [s for s in spans if s.parent is None]
    [message] = json.loads(str(root.attributes[semconv.GEN_AI_INPUT_MESSAGES]))
    assert message == {"role": "user", "parts": [{"type": "text", "content": "Do the job."}]}
    export_run(run, provider, capture_content=True)
    assert layout(list(exporter.get_finished_spans())) == layout(spans)


SECRET = "sk-ant-api03-SECRET-otel-never-7f3a9c"


async def test_the_api_key_is_never_exported(tmp_path: Path) -> None:
    script: list[Any] = [
        Fault.rate_limited(0.01),
        gr.tool_call("write_file", path="a.md", content="a\n"),
        gr.text("Done."),
    ]
    provider, exporter = memory_provider()
    with MessagesServer(script) as server:
        model = AnthropicModel(
            "claude-sonnet-4-6",
            api_key=SECRET,
            base_url=server.url,
            retry=RetryPolicy(max_retries=2, base_s=0.01, max_s=0.02),
        )
        agent = gr.Agent(model, workspace=tmp_path / "ws", store=False, self_regulation=False)
        with instrument(agent, provider, capture_content=True):
            run = await agent.run("Write a.md.")
    spans = list(exporter.get_finished_spans())
    export_run(run, provider, capture_content=True)
    spans += exporter.get_finished_spans()
    values = every_value(spans)
    assert not [v for v in values if SECRET in v or "SECRET" in v]
    chats = _by_operation(spans, "chat")
    assert chats[0].attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert chats[0].attributes[semconv.GEN_AI_REQUEST_MODEL] == "claude-sonnet-4-6"
    assert chats[0].name == "chat claude-sonnet-4-6"
    assert [e.name for e in chats[0].events] == ["gr.model_retry"]  # the 429, on its call


async def test_the_api_key_a_tool_read_is_redacted_before_the_record_and_the_model(
    tmp_path: Path,
) -> None:
    """The model reads a ``.env`` holding the adapter's own key: the tool's result is recorded,
    exported, checkpointed and sent on with every form of the key redacted (decision 383)."""
    script: list[Any] = [gr.tool_call("read_file", path=".env"), gr.text("Done.")]
    ws = workspace(tmp_path / "ws", {".env": f"ANTHROPIC_API_KEY={SECRET}\nDEBUG=1\n"})
    db = tmp_path / "runs.db"
    provider, exporter = memory_provider()
    with MessagesServer(script) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=SECRET, base_url=server.url)
        agent = gr.Agent(model, workspace=ws, store=db, self_regulation=False)
        with instrument(agent, provider, capture_content=True):
            run = await agent.run("Read .env.")
        sent = [json.dumps(r.body) for r in server.requests if r.path == "/v1/messages"]
    live = list(exporter.get_finished_spans())
    exporter.clear()
    export_run(run, provider, capture_content=True)
    exported = list(exporter.get_finished_spans())
    forms = key_forms(SECRET)
    assert not [v for v in every_value(live + exported) if any(form in v for form in forms)]
    [read] = _by_operation(live, "execute_tool")
    result = str(read.attributes[semconv.GEN_AI_TOOL_CALL_RESULT])
    assert "ANTHROPIC_API_KEY=[redacted]" in result and "DEBUG=1" in result
    with gr.Store(db) as store:
        [(_, stored)] = store.events_of_kind("tool_call")
        checkpoint = load_checkpoint(store, run.run_id)
    assert "ANTHROPIC_API_KEY=[redacted]" in stored.data["result"]
    assert list(run.tool_calls_df()["result"]) == [stored.data["result"]]
    assert not any(form in json.dumps(checkpoint.snapshot) for form in forms)
    assert len(sent) == 2 and "ANTHROPIC_API_KEY=[redacted]" in sent[1]
    assert not any(form in body for body in sent for form in forms)


@pytest.mark.parametrize("calls", [0, 1], ids=["at-once", "after-a-tool-call"])
async def test_a_failed_run_names_the_class_of_the_error_that_ended_it(
    tmp_path: Path, calls: int
) -> None:
    """The script runs dry (ScriptExhausted): the run's span is ERROR with that class, and the
    error is the run's, not the tool call's before it."""
    script: list[ModelResponse] = [gr.tool_call("read_file", path="a.md")] * calls
    ws = workspace(tmp_path / "ws", {"a.md": "a"})
    provider, exporter = memory_provider()
    agent = stuck_agent(gr.ScriptedModel(script), ws, interventions=None)
    with instrument(agent, provider):
        run = await agent.run("Do the job.")
    assert run.status == "failed"
    spans = list(exporter.get_finished_spans())
    [root] = [s for s in spans if s.parent is None]
    assert root.status.status_code == trace.StatusCode.ERROR
    assert root.attributes["error.type"] == "ScriptExhausted"
    assert [e.attributes["gr.error.type"] for e in root.events if e.name == "gr.error"] == [
        "ScriptExhausted"
    ]
    tools = _by_operation(spans, "execute_tool")
    assert len(tools) == calls
    assert all(not s.events and s.status.status_code == trace.StatusCode.UNSET for s in tools)
    exporter.clear()
    export_run(run, provider)
    assert layout(list(exporter.get_finished_spans())) == layout(spans)


async def test_a_run_started_inside_a_span_is_its_child(tmp_path: Path) -> None:
    provider, exporter = memory_provider()
    ws = workspace(tmp_path / "ws", {"a.md": "a"})
    agent = stuck_agent(gr.ScriptedModel([gr.text("Done.")]), ws, interventions=None)
    handle = instrument(agent, provider)
    with provider.get_tracer("app").start_as_current_span("request") as outer:
        run = await agent.run("Do the job.")
    handle.uninstrument()
    spans = exporter.get_finished_spans()
    [root] = [s for s in spans if s.name == "invoke_agent agent"]
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id
    assert run.status == "ended"


async def test_uninstrument_stops_tracing_the_runs_that_start_later(tmp_path: Path) -> None:
    provider, exporter = memory_provider()
    agent = stuck_agent(gr.ScriptedModel([gr.text("One."), gr.text("Two.")]), tmp_path / "ws")
    handle = instrument(agent, provider)
    assert handle.active and "active" in repr(handle)
    with pytest.raises(ConfigError, match=r"instrumented already.*\.uninstrument\(\)"):
        instrument(agent, provider)
    await agent.run("First job.")
    with handle:  # the end of a with block uninstruments too
        pass
    assert not handle.active and agent.run_watchers == ()
    await agent.run("Second job.")
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert len(roots) == 1
    again = instrument(agent, provider)  # and it may be instrumented again
    assert isinstance(again, Instrumentation)
    again.uninstrument()


async def test_the_global_provider_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = memory_provider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    agent = stuck_agent(gr.ScriptedModel([gr.text("Done.")]), tmp_path / "ws", interventions=None)
    with instrument(agent):
        run = await agent.run("Do the job.")
    live = list(exporter.get_finished_spans())
    exporter.clear()
    export_run(run.events)  # its events alone do too
    assert layout(list(exporter.get_finished_spans())) == layout(live)


async def test_a_run_exports_from_its_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run, live, provider, exporter = await traced(tmp_path, "guarded", store=db)
    export_run(run.run_id, provider, store=db)
    assert layout(list(exporter.get_finished_spans())) == layout(live)
    with pytest.raises(ConfigError, match="no run '20990101-000000-abcdef' in"):
        export_run("20990101-000000-abcdef", provider, store=db)


async def test_a_resumed_run_is_traced_from_its_own_start(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ws = workspace(tmp_path / "ws", {"a.md": "a"})
    script: list[ModelResponse] = [
        gr.tool_call("read_file", path="a.md"),
        gr.tool_call("read_file", path="a.md"),
        gr.text("Done."),
    ]
    first = await stuck_agent(gr.ScriptedModel(script), ws, store=db, interventions=None).run(
        "Do the job."
    )
    provider, exporter = memory_provider()
    other = stuck_agent(
        gr.ScriptedModel([gr.text("Forked.")]), tmp_path / "fork", store=db, interventions=None
    ).replace(name="forker")
    with instrument(other, provider):
        forked = gr.fork(first, 2, agent=other, workspace=tmp_path / "fork", wait=False)
        await forked.wait()
    live = list(exporter.get_finished_spans())
    [root] = [s for s in live if s.parent is None]
    assert root.name == "invoke_agent forker"
    assert root.attributes["gr.run.parent_id"] == first.run_id
    assert root.attributes["gr.run.relation"] == "fork"
    assert root.attributes[semconv.GEN_AI_CONVERSATION_ID] == forked.run_id
    assert len(_by_operation(live, "chat")) == 1  # the turn played again, not the parent's
    exporter.clear()
    export_run(forked, provider)
    assert layout(list(exporter.get_finished_spans())) == layout(live)


# -- what a person can get wrong ---------------------------------------------------------------


class NotAProvider:
    pass


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (NotAProvider(), r"got NotAProvider$"),
        (TracerProvider().get_tracer("x"), r"a tracer: pass the provider it came from"),
        (OTLPSpanExporter(endpoint="http://127.0.0.1:9/v1/traces"), r"an exporter: give it"),
    ],
)
def test_a_tracer_provider_of_the_wrong_type_says_what_to_pass(
    tmp_path: Path, given: object, says: str
) -> None:
    agent = gr.Agent(gr.ScriptedModel([]), workspace=tmp_path, store=False)
    for call in (lambda: instrument(agent, given), lambda: export_run([], given)):  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"TracerProvider, e\.g\. opentelemetry") as caught:
            call()
        assert caught.match(says)
    assert agent.run_watchers == ()


def test_other_wrong_arguments_say_what_to_pass(tmp_path: Path) -> None:
    agent = gr.Agent(gr.ScriptedModel([]), workspace=tmp_path, store=False)
    provider, _ = memory_provider()
    with pytest.raises(ConfigError, match=r"instrument takes a gr\.Agent, not str"):
        instrument("agent", provider)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"capture_content takes True .* got 'yes'"):
        instrument(agent, provider, capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"export_run takes a gr\.Run, a run id"):
        export_run(42, provider)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"from its start \(run_started\)"):
        export_run([], provider)


def test_a_missing_extra_names_the_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conventions = "opentelemetry.semconv._incubating.attributes.gen_ai_attributes"
    monkeypatch.setitem(sys.modules, conventions, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "gr_notebook.integrations.opentelemetry.names", raising=False)
    agent = gr.Agent(gr.ScriptedModel([]), workspace=tmp_path, store=False)
    for call in (lambda: instrument(agent), lambda: export_run([])):
        with pytest.raises(ConfigError, match=r"pip install 'gr-notebook\[otel\]'"):
            call()


def test_conventions_too_old_to_name_the_cache_tokens_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(semconv, "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS")
    monkeypatch.delitem(sys.modules, "gr_notebook.integrations.opentelemetry.names", raising=False)
    agent = gr.Agent(gr.ScriptedModel([]), workspace=tmp_path, store=False)
    with pytest.raises(ConfigError, match=r"0\.63b1 or later.*pip install 'gr-notebook\[otel\]'"):
        instrument(agent)
