"""Span drafts become OpenTelemetry spans through a tracer, at the times the events give."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from gr_notebook.integrations.opentelemetry.names import ERROR_TYPE
from gr_notebook.integrations.opentelemetry.spans import SpanDraft

__all__ = ["SpanWriter"]

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


class SpanWriter:
    """A :class:`~gr_notebook.integrations.opentelemetry.spans.SpanSink` that starts real
    spans; the run's span is a child of ``parent`` (the caller's span when a live run
    started inside one), its children are the run's."""

    def __init__(self, tracer: trace.Tracer, parent: otel_context.Context | None = None) -> None:
        self.tracer, self.parent = tracer, parent
        self._run: trace.Span | None = None
        self.trace_id: int | None = None

    def start_run(self, draft: SpanDraft) -> None:
        self._run = self.tracer.start_span(
            draft.name,
            context=self.parent if self.parent is not None else otel_context.Context(),
            kind=_KINDS[draft.kind],
            attributes=draft.attributes,
            start_time=_ns(draft.start),
        )
        self.trace_id = self._run.get_span_context().trace_id

    def child(self, draft: SpanDraft) -> None:
        context = trace.set_span_in_context(self._run) if self._run is not None else None
        span = self.tracer.start_span(
            draft.name,
            context=context,
            kind=_KINDS[draft.kind],
            attributes=draft.attributes,
            start_time=_ns(draft.start),
        )
        self._finish(span, draft)

    def end_run(self, draft: SpanDraft) -> None:
        span = self._run
        if span is None:
            return
        span.set_attributes(draft.attributes)
        self._finish(span, draft)

    def _finish(self, span: trace.Span, draft: SpanDraft) -> None:
        for event in draft.events:
            span.add_event(event.name, dict(event.attributes), timestamp=_ns(event.time))
        if draft.error is not None:
            span.set_attribute(ERROR_TYPE, draft.error)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(draft.end))
