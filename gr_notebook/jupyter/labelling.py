"""The labelling widget: recorded points shown one at a time, as a guardrail saw them (the
call and its result, the todo list, the turn), each label kept in the run's store at once.

Keys: JupyterLab 4 gives a widget no key events of its own, and its notebook shortcuts take
the keys a cell is not typing into, so the widget has a small text box that takes them: with
the cursor in it, ``y`` (should act), ``n`` (should not), ``s`` (skip), ``b`` (back). The
buttons do the same, and each control has a method (``act``, ``dont``, ``skip``, ``back``,
``key``) so that a test or a cell can drive it without a browser.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as w

from gr_notebook.errors import ConfigError
from gr_notebook.events import (
    Event,
    ModelCallEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
)
from gr_notebook.history.labels import KINDS, Label, decision_points, default_who, save_labels
from gr_notebook.history.store import Store
from gr_notebook.jupyter.clicks import on_this_loop
from gr_notebook.review.replay_sources import recorded_runs

__all__ = ["LabelPoint", "Labeller"]

_CLIP = 600


@dataclass(frozen=True)
class LabelPoint:
    """One point to label: where it is and what a guardrail saw there."""

    run: str
    run_id: str
    seq: int
    turn: int
    what: str
    """``tool call`` or ``stop``."""
    tool: str | None
    input: Mapping[str, Any] | None
    result: str | None
    text: str | None
    todos: tuple[str, ...]
    """The todo list as the model saw it, one line an item (``[x]`` when done)."""
    store: Path


class Labeller:
    """Label recorded points one at a time (``kind``: policy, checker, feedback or
    intervention; ``tools=`` only calls of these tools; ``points=`` a DataFrame with
    ``run_id`` and ``seq`` columns, such as a backtest's ``.mistakes``, to label those).
    Each answer is kept in the run's store as it is given, under ``who``."""

    def __init__(
        self,
        runs: object,
        *,
        kind: str = "policy",
        tools: Iterable[str] | None = None,
        points: Any = None,
        store: Any = None,
        who: str | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ConfigError(f"kind is {kind!r}; it is one of {', '.join(KINDS)}")
        self.kind = kind
        self.who = who or default_who()
        wanted = None if tools is None else set(tools)
        chosen = None
        if points is not None:
            chosen = {
                (str(r), int(s)) for r, s in zip(points["run_id"], points["seq"], strict=True)
            }
        self.points: list[LabelPoint] = []
        for source in recorded_runs(runs, store, "Labeller"):
            if source.store is None:
                raise ConfigError(
                    f"run {source.label} was given as events alone, with no store to keep its "
                    "labels: give the run, or its id with store="
                )
            self.points += [
                p
                for p in _points(
                    source.label, source.run_id, source.events, source.store.path, kind
                )
                if (wanted is None or p.tool in wanted)
                and (chosen is None or (p.run_id, p.seq) in chosen)
            ]
        self.index = 0
        self.given: dict[tuple[str, int], bool] = {}
        self._header = w.HTML()
        self._body = w.HTML()
        self._note = w.Text(placeholder="note (optional): why", layout=w.Layout(width="60%"))
        self._keys = w.Text(
            placeholder="keys here: y act · n don't · s skip · b back",
            continuous_update=True,
            layout=w.Layout(width="30%"),
        )
        self._keys.observe(self._typed, names="value")
        buttons = []
        for text, handler, style in (
            ("Should act (y)", self.act, "danger"),
            ("Should not act (n)", self.dont, "success"),
            ("Skip (s)", self.skip, ""),
            ("Back (b)", self.back, ""),
        ):
            button = w.Button(description=text, button_style=style)
            button.on_click(on_this_loop(handler))
            buttons.append(button)
        self._buttons = tuple(buttons)
        self.widget = w.VBox(
            [self._header, self._body, w.HBox([self._note, self._keys]), w.HBox(buttons)]
        )
        self._show()

    # -- controls -------------------------------------------------------------------------------

    def act(self) -> None:
        """The guardrail should act here: kept, then the next point."""
        self._label(True)

    def dont(self) -> None:
        """The guardrail should let this be: kept, then the next point."""
        self._label(False)

    def skip(self) -> None:
        self._move(1)

    def back(self) -> None:
        self._move(-1)

    def key(self, key: str) -> None:
        """A key typed in the keys box: y, n, s or b (others are ignored)."""
        action = {"y": self.act, "n": self.dont, "s": self.skip, "b": self.back}.get(key.lower())
        if action is not None:
            action()

    def set_note(self, note: str) -> None:
        self._note.value = note

    @property
    def current(self) -> LabelPoint | None:
        return self.points[self.index] if self.index < len(self.points) else None

    # -- internals ------------------------------------------------------------------------------

    def _typed(self, change: Mapping[str, Any]) -> None:
        text = str(change.get("new") or "")
        if not text:
            return
        self._keys.value = ""
        for key in text:
            self.key(key)

    def _label(self, value: bool) -> None:
        point = self.current
        if point is None:
            return
        note = self._note.value.strip() or None
        with Store(point.store) as store:
            save_labels(store, [Label(point.run_id, point.seq, value, self.kind, self.who, note)])
        self.given[(point.run_id, point.seq)] = value
        self._note.value = ""
        self._move(1)

    def _move(self, step: int) -> None:
        self.index = max(0, min(len(self.points), self.index + step))
        self._show()

    def _show(self) -> None:
        done = len(self.given)
        total = len(self.points)
        point = self.current
        if point is None:
            self._header.value = (
                f"<b>{done} of {total} points labelled</b>: every point was shown. The labels "
                "are in the runs' store; <code>gr.backtest(..., labels=None)</code> reads them."
            )
            self._body.value = ""
            return
        given = self.given.get((point.run_id, point.seq))
        said = "" if given is None else f" (labelled: {'act' if given else 'not act'})"
        self._header.value = (
            f"<b>{self.index + 1} of {total}</b> · {done} labelled · run {html.escape(point.run)}"
            f", turn {point.turn}, event {point.seq}: a {point.what}{said} · should a "
            f"{self.kind} act here?"
        )
        self._body.value = _render(point)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = self.widget._repr_mimebundle_(**kwargs)
        data["text/plain"] = repr(self)  # what a saved notebook says where it was
        return data

    def __repr__(self) -> str:
        return f"<Labeller: {len(self.given)} of {len(self.points)} {self.kind} points labelled>"


def _points(
    label: str, run_id: str, events: Sequence[Event], store: Path, kind: str
) -> list[LabelPoint]:
    """The run's points a guardrail of ``kind`` decides at, with the todos each saw."""
    at = {seq for seq, (point, implied) in decision_points(events).items() if seq == point}
    todos: list[str] = []
    done = 0
    found = []
    for event in events:
        if isinstance(event, TodosWrittenEvent):
            todos, done = list(event.titles), 0
        elif isinstance(event, TodoCompletedEvent):
            done += 1
        if event.seq not in at:
            continue
        shown = tuple(f"[{'x' if i < done else ' '}] {t}" for i, t in enumerate(todos))
        if isinstance(event, ToolCallEvent) and (kind != "checker" or event.tool == "job_complete"):
            found.append(
                LabelPoint(
                    label,
                    run_id,
                    event.seq,
                    event.turn,
                    "tool call",
                    event.tool,
                    dict(event.input or {}),
                    event.result,
                    None,
                    shown,
                    store,
                )
            )
        elif isinstance(event, ModelCallEvent) and kind == "checker":
            found.append(
                LabelPoint(
                    label,
                    run_id,
                    event.seq,
                    event.turn,
                    "stop",
                    None,
                    None,
                    None,
                    event.text,
                    shown,
                    store,
                )
            )
    return found


def _render(point: LabelPoint) -> str:
    def block(title: str, text: str) -> str:
        clipped = text if len(text) <= _CLIP else text[:_CLIP] + "…"
        return (
            f"<div><b>{title}</b><pre style='white-space:pre-wrap;margin:2px 0 6px'>"
            f"{html.escape(clipped)}</pre></div>"
        )

    parts = []
    if point.what == "tool call":
        shown = json.dumps(point.input, indent=1, ensure_ascii=False, default=str)
        parts.append(block(f"the call: {point.tool}", shown))
        parts.append(block("its result", point.result or ""))
    else:
        parts.append(block("the model stopped, saying", point.text or ""))
    parts.append(block("the todo list", "\n".join(point.todos) or "(none yet)"))
    return "".join(parts)
