"""The feedback half of a run's guardrails: trigger state per configuration, and delivery.

It reads the run through its :class:`~gr_notebook.guardrails.view.RunView` and gives each
provider a :class:`~gr_notebook.guardrails.feedback.FeedbackContext`, the providers' view.

Which providers fire is decided from counters and timestamps kept per configuration (not
per provider name, so two providers of one class keep their own cadence), never by
scanning the history: O(1) per configuration per tool call.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gr_notebook.eventdata import fields_json
from gr_notebook.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    FeedbackProviderConfig,
    Observation,
    ToolCallRecord,
)
from gr_notebook.guardrails.paths import is_file
from gr_notebook.guardrails.view import failure

if TYPE_CHECKING:
    from gr_notebook.guardrails.view import RunView

__all__ = ["RECENT_CALLS", "FeedbackRunner"]

RECENT_CALLS = 50
"""How many recent tool calls a feedback provider can look back on."""


@dataclass(slots=True)
class _Trigger:
    last_call: int = 0
    last_time: float = 0.0
    file_fired: bool = False


class FeedbackRunner:
    def __init__(self, configs: Sequence[FeedbackProviderConfig], run: RunView) -> None:
        self.configs = tuple(configs)
        self._run = run
        self.workspace = run.workspace
        self._emit, self._clock, self._usage = run.emit, run.clock, run.usage
        self.prompt_name = run.name
        self.calls = 0
        self.recent: deque[ToolCallRecord] = deque(maxlen=RECENT_CALLS)
        self.last: Feedback | None = None
        self.last_by_provider: dict[str, Feedback] = {}
        started = self._clock()
        self._triggers = [_Trigger(last_time=started) for _ in self.configs]
        self._files = [
            c.trigger.on_file_created.filename if c.trigger.on_file_created else None
            for c in self.configs
        ]

    def after_call(
        self, tool: str, params: Mapping[str, Any], *, is_error: bool, turn: int
    ) -> list[Feedback]:
        """Count the call, then run every provider whose trigger fires; O(1) per config."""
        self.calls += 1
        now = self._clock()
        record = ToolCallRecord(self.calls, tool, params, is_error, turn, now)
        self.recent.append(record)
        if not self._triggers:
            return []
        blocks: list[Feedback] = []
        context: FeedbackContext | None = None
        for index, config in enumerate(self.configs):
            state, trigger = self._triggers[index], config.trigger
            fires = bool(
                (trigger.every_n_calls and self.calls - state.last_call >= trigger.every_n_calls)
                or (trigger.every_n_seconds and now - state.last_time >= trigger.every_n_seconds)
            )
            name = self._files[index]
            file_seen = not state.file_fired and name is not None and is_file(self.workspace, name)
            if not (fires or file_seen):
                continue
            if context is None:
                context = FeedbackContext(
                    self,
                    workspace=self.workspace,
                    todos=self._run.todos,
                    plan=self._run.plan,
                    budget=self._usage(),
                    now=now,
                )
            ran, block = self._consult(index, context, now, tool)
            if not ran:
                continue
            state.last_call, state.last_time = self.calls, now
            state.file_fired = state.file_fired or file_seen
            if block is not None:
                blocks.append(block)
        for block in blocks:  # stored after all ran: every provider saw the same history
            self.last = block
            self.last_by_provider[block.provider_name] = block
        return blocks

    def _consult(
        self, index: int, context: FeedbackContext, now: float, tool: str
    ) -> tuple[bool, Feedback | None]:
        """Whether the provider ran (``should_run`` declining leaves the trigger armed), and
        its feedback: None when it had nothing to say or failed."""
        provider = self.configs[index].provider
        name = str(getattr(provider, "name", type(provider).__name__))
        try:
            if not provider.should_run(context=context):
                return False, None
            block = provider.provide(context=context)
            if block is None:
                return True, None
            if not isinstance(block, Feedback):
                raise TypeError(f"provide() returned {type(block).__name__}, not gr.Feedback")
        except Exception as exc:  # guidance is optional: report it, never break the call
            self._emit(failure("feedback", exc, provider=name))
            return True, None
        block = dataclasses.replace(
            block,
            provider_name=block.provider_name or name,
            timestamp=datetime.fromtimestamp(now, UTC),
            call_index=self.calls,
            prompt_name=self.prompt_name,
        )
        self._emit(block.event(tool, index))
        return True, block

    def to_json(self, *, recent: bool = True) -> dict[str, Any]:
        """The runner's state; ``recent=False`` leaves the recent tool calls out (None)."""
        return {
            "calls": self.calls,
            "triggers": [
                {"provider": str(c.provider.name), **fields_json(t)}
                for c, t in zip(self.configs, self._triggers, strict=True)
            ],
            "last": self.last.to_json() if self.last else None,
            "last_by_provider": {k: f.to_json() for k, f in self.last_by_provider.items()},
            "recent": [record.to_json() for record in self.recent] if recent else None,
        }

    def load_json(self, data: Mapping[str, Any]) -> Callable[[], None]:
        """Check a saved state; returns the function that applies it, so nothing changes
        unless the whole snapshot is good."""
        saved = data["triggers"]
        if len(saved) != len(self.configs):
            raise ValueError(
                f"it has {len(saved)} feedback triggers, this run has {len(self.configs)}"
            )
        triggers = [
            _Trigger(int(t["last_call"]), float(t["last_time"]), bool(t["file_fired"]))
            for t in saved
        ]
        last = _feedback_of(data["last"]) if data["last"] else None
        by_provider = {str(k): _feedback_of(v) for k, v in data["last_by_provider"].items()}
        recent = [ToolCallRecord(**r) for r in data["recent"]]
        calls = int(data["calls"])

        def apply() -> None:
            self.calls, self._triggers = calls, triggers
            self.last, self.last_by_provider = last, by_provider
            self.recent = deque(recent, maxlen=RECENT_CALLS)

        return apply


def _feedback_of(data: Mapping[str, Any]) -> Feedback:
    stamp = data.get("timestamp")
    return Feedback(
        provider_name=data["provider"],
        summary=data["summary"],
        severity=data["severity"],
        observations=tuple(
            Observation(o["category"], o["description"], o.get("evidence"))
            for o in data["observations"]
        ),
        suggestions=tuple(data["suggestions"]),
        call_index=int(data["call_index"]),
        timestamp=datetime.fromtimestamp(stamp, UTC) if stamp is not None else None,
        prompt_name=data.get("prompt_name", ""),
    )
