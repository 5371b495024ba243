"""One run as the data of a shared page: its header, its timeline, and every turn as the
model saw it (todo layer, plan, meters, context layers) with the tool calls it made and what
every live and shadow guardrail decided about each.

Everything is read from the run's events, which every host records; the plan and the files
come from its checkpoints, which only gr's loop with a store takes. What a run lacks is said
in its ``missing`` notes rather than left blank. Texts go into a shared :class:`Texts`
table and a run names them by index.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gr_notebook.display.timeline import TIMELINE_KINDS, describe, tone_of, worth_a_line
from gr_notebook.events import (
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    ModelCallEvent,
    PolicyDecisionEvent,
    RunFinishedEvent,
    RunResumedEvent,
    RunStartedEvent,
    ThinkingEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
    ToolIntentEvent,
)
from gr_notebook.guardrails.completion import PLAN_FILE
from gr_notebook.history.store import Store
from gr_notebook.models.base import DEFAULT_CONTEXT_WINDOW
from gr_notebook.review.recorded import todos_after
from gr_notebook.share.files import FileHistory, FileTexts, file_history
from gr_notebook.share.readable import readable
from gr_notebook.share.texts import Texts
from gr_notebook.workflow.todos import TodoList

__all__ = ["RunSource", "run_data"]

LAYERS: Final = ("system prompt", "todo layer", "tools", "summary", "conversation")
"""The five context layers, in the order a model call's event counts them."""
MARK_KINDS: Final = frozenset(
    {
        "phase_started",
        "phase_transition",
        "compaction",
        "conversation_pruned",
        "rewind",
        "intervention",
        "approval_answered",
        "run_paused",
        "run_unpaused",
        "run_resumed",
        "tool_recovered",
        "error",
        "job_complete",
        "request_over_budget",
    }
)
"""The kinds that earn a mark on a run's timeline, besides the decisions that went against
the model (a denial, a refused stop) and a person's edits."""
PERSON: Final = "person"


@dataclass(frozen=True, slots=True)
class RunSource:
    """What a page is made from: the run's events, and its store for the checkpoints."""

    run_id: str
    events: Sequence[Event]
    store: Store | None = None
    workspace: Path | None = None
    instructions: str = ""
    status: str | None = None
    """The store's status, for a run whose events end without a ``run_finished``."""


def run_data(source: RunSource, texts: Texts) -> dict[str, Any]:
    """The run as plain data for the page (see :mod:`gr_notebook.share.page`)."""
    events, unread = readable(source.events)
    started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
    finished = next((e for e in reversed(events) if isinstance(e, RunFinishedEvent)), None)
    config: Mapping[str, Any] = started.config if started is not None else {}
    files = file_history(source.store, source.run_id, source.workspace)
    plan_file = str(config.get("plan_file") or PLAN_FILE)
    file_texts = FileTexts(texts, files) if files is not None else None
    turns = _Turns(texts, file_texts, plan_file, _window(config))
    for event in events:
        turns.add(event)
    harness = str(config.get("harness") or "gr")
    missing = _missing(source, started, finished, files, harness, bool(turns.todos.items))
    missing += unread
    model_calls = [e for e in events if isinstance(e, ModelCallEvent)]
    costs = [cost for e in model_calls if (cost := _usd(e.cost_usd)) is not None]
    resumed = next((e for e in events if isinstance(e, RunResumedEvent)), None)
    return {
        "id": source.run_id,
        "job": texts.add(started.instructions if started else source.instructions),
        "settings": _settings(config, started),
        "status": finished.status if finished else (source.status or "unfinished"),
        "reason": finished.reason if finished else None,
        "turns": finished.turns if finished else max((e.turn for e in events), default=0),
        "tokens": model_calls[-1].tokens_used if model_calls else 0,
        "cost": round(sum(costs), 6) if costs else None,
        "started": events[0].time if events else None,
        "parent": (
            {"id": resumed.parent_run_id, "turn": resumed.parent_turn, "how": resumed.relation}
            if resumed is not None and resumed.parent_run_id
            else None
        ),
        "missing": missing,
        "marks": turns.marks,
        "by_turn": list(turns.by_turn.values()),
        "files": _files(file_texts) if file_texts is not None else [],
    }


class _Turns:
    """Folds the events into turns, in one pass: each turn's record is what the model saw
    when it was called, then what it did and what was decided about it."""

    def __init__(self, texts: Texts, files: FileTexts | None, plan_file: str, window: int):
        self.texts = texts
        self.files = files
        self.plan_file = plan_file
        self.window = window
        self.todos = TodoList()
        self.by_turn: dict[int, dict[str, Any]] = {}
        self.calls: dict[tuple[int, str | None], dict[str, Any]] = {}
        self.marks: list[dict[str, Any]] = []
        self.cost = 0.0

    def turn(self, number: int) -> dict[str, Any]:
        found = self.by_turn.get(number)
        if found is None:
            found = self.by_turn[number] = {
                "turn": number,
                "phase": self.todos.phase_label() if self.todos.items else None,
                "todos": None,
                "plan": None,
                "meters": [],
                "context": None,
                "model": None,
                "calls": [],
                "checks": [],
                "feedback": [],
                "lines": [],
                "changed": self._changed(number),
            }
        return found

    def add(self, event: Event) -> None:
        self.todos = todos_after(self.todos, event)
        turn = self.turn(event.turn)
        shadow = getattr(event, "mode", None) == "shadow"
        if event.kind in TIMELINE_KINDS and worth_a_line(event):
            line = {"seq": event.seq, "kind": event.kind, "text": describe(event)}
            turn["lines"].append({**line, "tone": tone_of(event), "shadow": shadow})
            if self._marks(event):
                self.marks.append({**line, "turn": event.turn, "tone": tone_of(event)})
                self.marks[-1]["shadow"] = shadow
        if isinstance(event, ModelCallEvent):
            self._model_call(turn, event)
        elif isinstance(event, ThinkingEvent) and turn["model"] is not None:
            turn["model"]["thinking"] = self.texts.add(event.text)
        elif isinstance(event, ToolIntentEvent):
            self._call(turn, event.tool_use_id, event.tool, event.input)["effect"] = event.effect
        elif isinstance(event, ToolCallEvent):
            call = self._call(turn, event.tool_use_id, event.tool, event.input)
            call["result"] = self.texts.add(event.result)
            call["error"] = event.is_error
            call["seconds"] = round(event.duration_s, 3)
        elif isinstance(event, PolicyDecisionEvent):
            call = self._call(turn, event.tool_use_id, event.tool, None)
            who = event.policy or ", ".join(event.policies) or "no policy"
            reason = event.reason or ("allowed" if event.allowed else "")
            call["decisions"].append(_decision(who, event.verdict, reason, shadow))
        elif isinstance(event, FeedbackEvent):
            block = {
                "provider": event.provider,
                "severity": event.severity,
                "summary": event.summary,
                "text": self.texts.add(event.text),
                "shadow": shadow,
            }
            self._latest_call(turn, event.tool, "feedback", turn["feedback"]).append(block)
        elif isinstance(event, InterventionCheckEvent):
            verdict = event.verdict
            decision = _decision("interventions", verdict, event.why, shadow)
            self._latest_call(turn, None, "decisions", turn["checks"]).append(decision)
        elif isinstance(event, CompletionCheckEvent):
            reason = event.feedback or event.bypassed or ("complete" if event.complete else "")
            who = f"{event.checker} (on {event.stop})"
            turn["checks"].append(_decision(who, event.verdict, reason, shadow))
        elif isinstance(event, ApprovalRequestedEvent):
            call = self._call(turn, event.tool_use_id, event.tool, event.input)
            call["approval"] = {"asked": event.asked, "reason": event.reason}
        elif isinstance(event, ApprovalAnsweredEvent):
            call = self._call(turn, event.tool_use_id, event.tool, None)
            answer = call.setdefault("approval", {})
            answer.update(decision=event.decision, by=event.by, waited=round(event.waited_s, 1))
            if event.reason:
                answer["why"] = event.reason
            if event.input is not None:
                answer["edited"] = _json(event.input)
        elif isinstance(event, ErrorEvent) and event.traceback:
            turn["lines"].append(
                {"seq": event.seq, "kind": "traceback", "text": "\n".join(event.traceback)}
            )

    def _marks(self, event: Event) -> bool:
        if event.kind in MARK_KINDS:
            return True
        if isinstance(event, PolicyDecisionEvent | CompletionCheckEvent):
            return event.verdict in ("deny", "refuse")
        if isinstance(event, TodosWrittenEvent | TodoCompletedEvent):
            return event.source == PERSON
        return False

    def _model_call(self, turn: dict[str, Any], event: ModelCallEvent) -> None:
        cost = _usd(event.cost_usd)
        self.cost += cost or 0.0
        layers = [
            event.layer1_tokens,
            event.layer2_tokens,
            event.layer3_tokens,
            event.layer4_tokens,
            event.layer5_tokens,
        ]
        turn["context"] = {
            "layers": [[name, n] for name, n in zip(LAYERS, layers, strict=True)],
            "total": event.context_tokens,
            "window": self.window,
            "messages": event.messages,
        }
        turn["meters"] = [
            ["tokens", event.tokens_used, event.tokens_budget],
            ["iterations", event.iterations_used, event.iterations_max],
            ["context", event.context_tokens, self.window],
        ]
        if cost is not None:
            turn["meters"].append(["cost (USD)", round(self.cost, 6), None])
        turn["model"] = {
            "text": self.texts.add(event.text),
            "stop": event.stop_reason,
            "in": event.input_tokens,
            "out": event.output_tokens,
            "seconds": round(event.duration_s, 2),
            "thinking": None,
        }
        if self.todos.items:
            turn["todos"] = self.texts.add(self.todos.render())
            turn["phase"] = self.todos.phase_label()
        if self.files is not None and (at := self.files.history.at_turn.get(turn["turn"])):
            digest = at.get(self.plan_file)
            if digest is not None:
                turn["plan"] = self._file_text(digest, self.plan_file)

    def _call(
        self, turn: dict[str, Any], use_id: str | None, tool: str, given: object
    ) -> dict[str, Any]:
        # a call's events are all in its turn; an id alone may come again (a fork's model
        # numbers its calls afresh after the parent's history)
        key = (turn["turn"], use_id)
        call = self.calls.get(key) if use_id else None
        if call is None:
            call = {
                "id": use_id,
                "tool": tool,
                "input": None,
                "result": None,
                "error": False,
                "decisions": [],
                "feedback": [],
            }
            self.calls[key] = call
            turn["calls"].append(call)
        if given is not None and call["input"] is None:
            call["input"] = self.texts.add(_json(given))
        return call

    def _latest_call(
        self, turn: dict[str, Any], tool: str | None, key: str, otherwise: list[Any]
    ) -> list[Any]:
        """The list ``key`` of the turn's latest call (of ``tool``, when named): feedback
        and intervention checks follow the call that set them off."""
        for call in reversed(turn["calls"]):
            if tool is None or call["tool"] == tool:
                found: list[Any] = call[key]
                return found
        return otherwise

    def _changed(self, number: int) -> list[list[Any]]:
        if self.files is None:
            return []
        after = self.files.history.after(number)
        return [
            [path, self._file_text(after[path], path) if path in after else None]
            for path in self.files.history.changed(number)
        ]

    def _file_text(self, digest: str, path: str) -> int:
        assert self.files is not None
        found = self.files.text(digest)
        if found is None:
            return self.texts.add(
                f"({path}: not kept, the page's room for file text is spent; "
                "the whole file is in the run's store)"
            )
        return found


def _decision(who: str, verdict: str, reason: str, shadow: bool) -> dict[str, Any]:
    return {"who": who, "verdict": verdict, "reason": reason, "shadow": shadow}


def _usd(cost: float | None) -> float | None:
    """A cost the page can show: None for none, and for a NaN or an infinity (a model with
    no price, a crafted row), which is no price either and which JSON cannot hold."""
    return cost if cost is not None and math.isfinite(cost) else None


def _json(value: object) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def _window(config: Mapping[str, Any]) -> int:
    window = config.get("context_window")
    return window if isinstance(window, int) and window > 0 else DEFAULT_CONTEXT_WINDOW


def _settings(config: Mapping[str, Any], started: RunStartedEvent | None) -> dict[str, Any]:
    shadow = config.get("shadow") or {}
    limits = [
        f"{label} {config[key]:,}"
        for key, label in (
            ("max_iterations", "iterations ≤"),
            ("max_tokens", "tokens ≤"),
            ("deadline_s", "seconds ≤"),
            ("max_cost_usd", "USD ≤"),
        )
        if isinstance(config.get(key), int | float) and not isinstance(config.get(key), bool)
    ]
    price = config.get("price")
    return {
        "model": started.model if started else str(config.get("model") or "unknown"),
        "harness": str(config.get("harness") or "gr"),
        "live": _guardrails(config),
        "shadow": _guardrails(shadow) if isinstance(shadow, Mapping) else [],
        "limits": limits,
        "price": (
            f"${price['input']}/M input, ${price['output']}/M output"
            if isinstance(price, Mapping) and {"input", "output"} <= price.keys()
            else None
        ),
        "tools": list(_names(config.get("tools"))),
    }


def _guardrails(config: Mapping[str, Any]) -> list[str]:
    """The guardrails a recorded configuration names, each as a short line."""
    named: list[str] = []
    named += [f"policy {p}" for p in _names(config.get("policies"))]
    named += [f"feedback {p}" for p in _names(config.get("feedback_providers"))]
    checker = config.get("task_completion_checker")
    if checker:
        named.append(f"completion checker {_name(checker)}")
    if config.get("interventions"):
        named.append("interventions")
    return named


def _names(items: object) -> Iterable[str]:
    return (_name(i) for i in items) if isinstance(items, list | tuple) else ()


def _name(item: object) -> str:
    if isinstance(item, Mapping):
        return str(item.get("name") or item.get("provider") or item.get("type") or item)
    return str(item)


def _missing(
    source: RunSource,
    started: RunStartedEvent | None,
    finished: RunFinishedEvent | None,
    files: FileHistory | None,
    harness: str,
    has_todos: bool,
) -> list[str]:
    notes = []
    if started is None:
        notes.append("No run_started event: the agent's settings are not recorded.")
    if finished is None:
        notes.append(
            "The run did not finish: it was killed, or was still running when this was "
            "exported. Its last turn may be cut short."
        )
    if harness != "gr":
        notes.append(
            f"A {harness} session runs its own loop: it has no todo layer, plan file or "
            "checkpoints, so those are not shown."
        )
    elif files is None:
        why = "it had no store" if source.store is None else "it has no checkpoints"
        notes.append(
            f"No files or plan turn by turn: {why} (a run killed before its first turn "
            "ended has none)."
        )
    elif files.final_from == "checkpoint":
        notes.append(
            "Its workspace is gone (or is not a folder gr ran in): the files shown last are "
            "its last checkpoint's."
        )
    if harness == "gr" and not has_todos and started is not None:
        notes.append("The run never wrote a todo list.")
    return notes


def _files(texts: FileTexts) -> list[dict[str, Any]]:
    """Every file the run left or removed, with the turns that changed it; past the page's
    room for file text, a file no turn changed is named without its text."""
    final, changes = texts.history.final, texts.changes
    return [
        {
            "path": path,
            "turns": changes.get(path, []),
            "text": texts.text(final[path]) if path in final else None,
            "removed": path not in final,
        }
        for path in sorted(final.keys() | changes.keys())
    ]
