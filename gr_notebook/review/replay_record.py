"""What a recorded run shows its guardrails decided live, indexed by the point each decided
on, for a replay to set its own decisions beside."""

from __future__ import annotations

from collections.abc import Sequence

from gr_notebook.events import (
    CompletionCheckEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    JobCompleteEvent,
    ModelCallEvent,
    PolicyDecisionEvent,
    RewindEvent,
    RunPausedEvent,
    RunStartedEvent,
    ToolCallEvent,
)

__all__ = ["LiveRecord", "last_calls"]


class LiveRecord:
    """The live guardrail events of a run, indexed by the point they decided on; shadow
    decisions (``mode="shadow"``) are not what happened and are left out."""

    def __init__(self, events: Sequence[Event], providers: Sequence[str]) -> None:
        self.policy: dict[str | None, PolicyDecisionEvent] = {}
        self.policy_by_seq: dict[int, PolicyDecisionEvent] = {}
        self.governed: set[str] = set()
        self.stop_calls: set[int] = set()
        self.stops: dict[int, CompletionCheckEvent] = {}
        self.denials: set[int] = set()
        self.interventions: dict[int, InterventionCheckEvent] = {}
        self._fed: set[tuple[int, int]] = set()
        live_names = _live_providers(events)
        self._config_of = _match_providers(providers, live_names)
        pending: list[Event] = []
        last_model: ModelCallEvent | None = None
        for event in events:
            if getattr(event, "mode", None) is not None:
                continue
            if isinstance(event, ToolCallEvent):
                self._decided_before(event, pending)
                pending = []
            elif isinstance(event, PolicyDecisionEvent):
                self.governed.add(event.tool)
                pending.append(event)
            elif isinstance(event, CompletionCheckEvent) and event.stop == "end_turn":
                if last_model is not None:
                    self.stops[last_model.seq] = event
            elif isinstance(event, (CompletionCheckEvent, JobCompleteEvent)):
                pending.append(event)
            elif isinstance(event, ModelCallEvent):
                last_model, pending = event, []
            elif isinstance(event, FeedbackEvent) and event.config is not None:
                self._fed.add((event.config, event.call_index))
            elif isinstance(event, InterventionCheckEvent) and event.kind in (
                "intervention",
                "intervention_skipped",
            ):
                self.interventions[event.step] = event

    def _decided_before(self, call: ToolCallEvent, pending: Sequence[Event]) -> None:
        """File the decisions recorded before ``call`` under it: they were made on it."""
        for before in pending:
            if isinstance(before, PolicyDecisionEvent):
                self.policy_by_seq[call.seq] = before
                if before.tool_use_id is not None:
                    self.policy[before.tool_use_id] = before
                if not before.allowed:
                    self.denials.add(call.seq)
            elif isinstance(before, CompletionCheckEvent):
                self.stop_calls.add(call.seq)
                self.stops[call.seq] = before
            elif isinstance(before, JobCompleteEvent):
                self.stop_calls.add(call.seq)

    def stop_at(self, event: Event) -> CompletionCheckEvent | None:
        return self.stops.get(event.seq)

    def denied(self, event: Event) -> bool:
        return event.seq in self.denials

    def fed(self, index: int, call: int) -> bool:
        live = self._config_of.get(index)
        return live is not None and (live, call) in self._fed


def last_calls(events: Sequence[Event]) -> set[int]:
    """The seqs of each turn's last tool call after which nothing but the loop touched the
    files before the next checkpoint (no person's rewind, no pause)."""
    last: dict[int, int] = {}
    disturbed: set[int] = set()
    for event in events:
        if isinstance(event, ToolCallEvent):
            last[event.turn] = event.seq
            disturbed.discard(event.turn)
        elif (isinstance(event, RewindEvent) and event.source == "person") or isinstance(
            event, RunPausedEvent
        ):
            disturbed.add(event.turn)
    return {seq for turn, seq in last.items() if turn not in disturbed}


def _live_providers(events: Sequence[Event]) -> list[str]:
    started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
    names = started.config.get("feedback_providers") if started is not None else None
    return [str(n) for n in names] if isinstance(names, list) else []


def _match_providers(replayed: Sequence[str], live: Sequence[str]) -> dict[int, int]:
    """Replayed configuration index → the live one of the same provider name (each once)."""
    free = list(enumerate(live))
    matched: dict[int, int] = {}
    for index, name in enumerate(replayed):
        for position, (live_index, live_name) in enumerate(free):
            if live_name == name:
                matched[index] = live_index
                del free[position]
                break
    return matched
