"""Runs with every kind of guardrail decision, and spans read as comparable rows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import gr_notebook as gr
from gr_notebook.models import ModelResponse


class DenyReads:
    """A shadow policy: it would deny every read, and nothing obeys it."""

    name = "deny_reads"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        if tool.name == "read_file":
            return gr.PolicyDecision.deny("reads are off limits")
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


GUARDED_SCRIPT: list[ModelResponse] = [
    gr.tool_call("write_file", path="data.md", content="new\n"),  # denied: not read yet
    gr.tool_call("read_file", path="data.md"),
    gr.text("All done!"),  # refused: report.md is missing
    gr.tool_call("write_file", path="report.md", content="# Report\n"),  # asks a person
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.text("Done: report.md is written."),
]


def guarded_agent(model: gr.ScriptedModel, ws: Path, **options: Any) -> gr.Agent:
    """Policies (one asks a person, who says yes), feedback every second call, a completion
    checker, a shadow policy."""
    static = gr.StaticFeedbackProvider("Check the style guide before the next file.")
    options.setdefault("store", False)
    return gr.Agent(
        model,
        workspace=ws,
        self_regulation=False,
        interventions=None,
        policies=[
            gr.ReadBeforeWritePolicy(),
            gr.ApprovalPolicy(when=lambda tool, params: params.get("path") == "report.md"),
        ],
        confirm=lambda request: True,
        feedback_providers=[gr.FeedbackProviderConfig(static, gr.FeedbackTrigger(every_n_calls=2))],
        task_completion_checker=gr.FileOutputChecker(["report.md"]),
        shadow=[DenyReads()],
        **options,
    )


STUCK_SCRIPT: list[ModelResponse] = [gr.tool_call("read_file", path="a.md") for _ in range(6)] + [
    gr.text("Done.")
]


def stuck_agent(model: gr.ScriptedModel, ws: Path, **options: Any) -> gr.Agent:
    config = gr.InterventionConfig(
        check_every=1,
        min_steps_before_intervention=1,
        grace_period_after_reset=0,
        consecutive_stuck_tolerance=1,
    )
    options.setdefault("store", False)
    options.setdefault("interventions", config)
    return gr.Agent(model, workspace=ws, self_regulation=False, **options)


def workspace(root: Path, files: Mapping[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def layout(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Each span as a row that two traces of one run share: name, kind, its parent's name,
    attributes, events (name, time, attributes), times and status; ids differ."""
    by_id = {s.context.span_id: s.name for s in spans if s.context is not None}
    rows = []
    for s in spans:
        parent = by_id.get(s.parent.span_id) if s.parent is not None else None
        events = tuple((e.name, e.timestamp, _plain(e.attributes)) for e in s.events)
        rows.append(
            (
                s.name,
                s.kind.name,
                parent,
                _plain(s.attributes),
                events,
                s.start_time,
                s.end_time,
                s.status.status_code.name,
            )
        )
    return sorted(rows, key=lambda r: (r[5] or 0, r[0], json.dumps(r[3], sort_keys=True)))


def _plain(attributes: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dict(attributes or {}).items()}


def every_value(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every attribute value and event attribute value of the spans, as text."""
    values: list[str] = []
    for s in spans:
        values += [str(v) for v in (s.attributes or {}).values()]
        for e in s.events:
            values += [str(v) for v in (e.attributes or {}).values()]
        values.append(s.name)
    return values
