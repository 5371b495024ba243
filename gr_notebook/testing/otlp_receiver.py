"""A local OTLP/HTTP trace receiver on 127.0.0.1: it decodes each ``ExportTraceServiceRequest``
(protobuf, gzipped or not) into plain :class:`ReceivedSpan` values, so a test reads back what
an OpenTelemetry exporter really sent. Needs ``opentelemetry-proto`` (the ``otel`` extra)."""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gr_notebook.testing.local_http import LocalServer, Reply

__all__ = ["OtlpReceiver", "ReceivedEvent", "ReceivedSpan"]

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    """One span as it arrived: ids in hex, the kind and status as OTLP numbers them."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[ReceivedEvent, ...]
    status_code: int
    scope: str


class OtlpReceiver(LocalServer):
    """``with OtlpReceiver() as receiver:`` export to ``receiver.endpoint``; read
    ``receiver.spans``."""

    def __init__(self) -> None:
        super().__init__()
        self._spans: list[ReceivedSpan] = []
        self._requests = 0

    @property
    def endpoint(self) -> str:
        return f"{self.url}{TRACES_PATH}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    def dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Reply]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        with self._lock:
            self._requests += 1
            number = self._requests
        if method != "POST" or path != TRACES_PATH:
            return number, Reply(404, b"not found", (("content-type", "text/plain"),))
        if headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except Exception:  # a body that is not the message: the exporter's bug, shown
            return number, Reply(400, b"not an ExportTraceServiceRequest")
        spans = [
            _span(span, scope_spans.scope.name)
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._lock:
            self._spans.extend(spans)
        body = ExportTraceServiceResponse().SerializeToString()
        return number, Reply(200, body, (("content-type", "application/x-protobuf"),))


def _span(span: Any, scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        name=span.name,
        kind=span.kind,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=_attributes(span.attributes),
        events=tuple(
            ReceivedEvent(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events
        ),
        status_code=span.status.code,
        scope=scope,
    )


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)
