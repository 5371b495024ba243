"""``instrument(agent)`` traces an agent's live runs; ``export_run(run)`` exports a recorded
one from its events. Both build the spans with one
:class:`~gr_notebook.integrations.opentelemetry.spans.TraceBuilder`, so they agree."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from gr_notebook.agent import Agent
from gr_notebook.errors import ConfigError
from gr_notebook.events import Event, RunFinishedEvent
from gr_notebook.history.run_arg import read_run
from gr_notebook.history.store import Store, StoreLike
from gr_notebook.run import Run

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = ["EXTRA", "Instrumentation", "export_run", "instrument", "load_otel"]

EXTRA = "pip install 'gr-notebook[otel]'"
SCOPE = "gr_notebook"
"""The instrumentation scope the spans are recorded under."""


def load_otel() -> ModuleType:
    """The ``opentelemetry.trace`` module, or a one-line error that names the extra."""
    try:
        from opentelemetry import trace

        importlib.import_module("gr_notebook.integrations.opentelemetry.names")  # every name
    except ImportError:
        raise ConfigError(
            "OpenTelemetry with its GenAI semantic conventions (0.63b1 or later, which name "
            f"the cache tokens) is not installed; it is an optional extra: {EXTRA}"
        ) from None
    return trace


def instrument(
    agent: Agent, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
) -> Instrumentation:
    """Trace every run ``agent`` starts from now on (its resumes, forks, and Claude Agent SDK
    and LangChain sessions too): a span for the run, one per model call and one per tool
    call, with every guardrail decision as a span event. ``tracer_provider`` defaults to
    the global one (``opentelemetry.trace.get_tracer_provider()``). Prompts, replies, tool
    input and output are exported only with ``capture_content=True``. Returns a handle
    whose ``uninstrument()`` (or the end of its ``with`` block) stops tracing new runs."""
    if not isinstance(agent, Agent):
        raise ConfigError(f"instrument takes a gr.Agent, not {type(agent).__name__}")
    tracer = _tracer(tracer_provider, "instrument")
    _check_content(capture_content, "instrument")
    return Instrumentation(agent, tracer, capture_content)


class Instrumentation:
    """The tracing of one agent's runs; ``uninstrument()`` stops it for the runs that start
    later (the runs being traced are traced to their end, so their traces stay whole)."""

    def __init__(self, agent: Agent, tracer: Tracer, capture_content: bool) -> None:
        if any(isinstance(w, _Watcher) for w in agent.run_watchers):
            raise ConfigError(
                "this agent is instrumented already; call .uninstrument() on the first handle "
                "before instrumenting it again"
            )
        self.agent = agent
        self._stop = agent.on_run(_Watcher(agent, tracer, capture_content))

    @property
    def active(self) -> bool:
        return any(isinstance(w, _Watcher) for w in self.agent.run_watchers)

    def uninstrument(self) -> None:
        self._stop()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstrument()

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<Instrumentation of agent {self.agent.name!r}: {state}>"


class _Watcher:
    """Called with each new run: subscribes a builder to its events until it finishes."""

    def __init__(self, agent: Agent, tracer: Tracer, capture_content: bool) -> None:
        self.agent, self.tracer, self.content = agent, tracer, capture_content

    def __call__(self, run: Run) -> None:
        from opentelemetry import context

        from gr_notebook.integrations.opentelemetry.spans import TraceBuilder
        from gr_notebook.integrations.opentelemetry.writer import SpanWriter

        writer = SpanWriter(self.tracer, parent=context.get_current())
        builder = TraceBuilder(
            writer, run_id=run.run_id, config=self.agent.config(), capture_content=self.content
        )

        def feed(event: Event) -> None:
            builder.feed(event)
            if isinstance(event, RunFinishedEvent):
                unsubscribe()

        unsubscribe = run.subscribe(feed)


def export_run(
    run: Run | Iterable[Event] | str,
    tracer_provider: TracerProvider | None = None,
    *,
    capture_content: bool = False,
    store: StoreLike | None = None,
) -> str:
    """Export a recorded run as the spans live tracing gives it, timed by its events.

    ``run`` is a Run, a run id in ``store=`` (a Store or its path, default
    ``gr_runs/store.sqlite``), or its events; works
    for runs of gr's loop and for Claude Agent SDK and LangChain sessions alike. Returns the
    trace id (32 hex digits). The provider is flushed, so the spans have left when this
    returns."""
    tracer = _tracer(tracer_provider, "export_run")
    _check_content(capture_content, "export_run")
    from gr_notebook.integrations.opentelemetry.spans import TraceBuilder, own_events
    from gr_notebook.integrations.opentelemetry.writer import SpanWriter

    run_id, events, config = _recorded(run, store)
    writer = SpanWriter(tracer)
    builder = TraceBuilder(writer, run_id=run_id, config=config, capture_content=capture_content)
    mine = own_events(events)
    if not mine or mine[0].kind not in ("run_started", "run_resumed"):
        raise ConfigError(
            "export_run needs a run's events from its start (run_started); these begin with "
            f"{mine[0].kind if mine else 'nothing'}: pass the whole run, or store.events(run_id)"
        )
    for event in mine:
        builder.feed(event)
    builder.close(at=mine[-1].time)
    flush = getattr(tracer_provider or _global_provider(), "force_flush", None)
    if callable(flush):
        flush()
    return "" if writer.trace_id is None else f"{writer.trace_id:032x}"


def _recorded(
    run: object, store: StoreLike | None
) -> tuple[str | None, list[Event], Mapping[str, Any] | None]:
    """The run's id, its events and its agent's configuration (from the store's row, which
    names the agent that ran a fork; from the events' start without a store)."""
    with read_run(run, store, "export_run") as given:
        if given.store is not None:
            return given.run_id, given.events, _config(given.store, given.run_id)
        return given.run_id or None, given.events, _started_config(given.events)


def _config(store: Store | None, run_id: str) -> Mapping[str, Any] | None:
    if store is None:
        return None
    row = next((r for r in store.runs() if r["run_id"] == run_id), None)
    if row is None:
        return None
    return {**row["config"], "model": row.get("model") or row["config"].get("model", "")}


def _started_config(events: list[Event]) -> Mapping[str, Any] | None:
    started = [e for e in events if e.kind == "run_started"]
    if not started:
        return None
    data = started[-1].data
    return {**dict(data.get("config") or {}), "model": data.get("model", "")}


def _tracer(provider: object, call: str) -> Tracer:
    load_otel()
    from opentelemetry.trace import TracerProvider, get_tracer_provider

    if provider is None:
        provider = get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise ConfigError(f"{call}'s tracer_provider {_wrong_provider(provider)}")
    return provider.get_tracer(SCOPE)


def _global_provider() -> object:
    return load_otel().get_tracer_provider()


def _wrong_provider(provider: object) -> str:
    got = type(provider).__name__
    takes = (
        "takes an OpenTelemetry TracerProvider, e.g. opentelemetry.sdk.trace.TracerProvider() "
        "with a span processor, or None for the global one (opentelemetry.trace."
        "get_tracer_provider())"
    )
    if hasattr(provider, "start_span") and hasattr(provider, "start_as_current_span"):
        return f"{takes}; got a {got}, a tracer: pass the provider it came from"
    if hasattr(provider, "export") and hasattr(provider, "shutdown"):
        return (
            f"{takes}; got a {got}, an exporter: give it to a provider, "
            "provider.add_span_processor(BatchSpanProcessor(exporter)), and pass the provider"
        )
    return f"{takes}; got {got}"


def _check_content(capture_content: object, call: str) -> None:
    if not isinstance(capture_content, bool):
        raise ConfigError(
            f"{call}'s capture_content takes True (export prompts, replies, tool input and "
            f"output) or False; got {capture_content!r}"
        )
