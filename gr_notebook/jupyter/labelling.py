"""The labelling widget: recorded points shown one at a time, as a guardrail saw them (the
call and its result, the todo list, the turn), each label kept in the run's store at once.

Keys: JupyterLab 4 gives a widget no key events of its own, and its notebook shortcuts take
the keys a cell is not typing into, so the widget has a small text box that takes them: with
the cursor in it, ``y`` (should act), ``n`` (should not), ``s`` (skip), ``b`` (back). The
buttons do the same, and each control has a method (``act``, ``dont``, ``skip``, ``back``,
``key``) so that a test or a cell can drive it without a browser.

In a notebook it is two outputs: the widget, and under it the labels given here, a static
output updated as each label is kept, so that a notebook saved mid-way still says what was
labelled. Labelling finishes with the Finish button, ``finish()``, or a label on every point:
the widget closes and its output becomes the labeller as it stopped, static HTML and text
(:mod:`gr_notebook.jupyter.outputs`, as a run's dashboard does when the run ends), which is
what a saved notebook, GitHub and nbviewer show. A widget left live reads "model not found"
in a notebook saved and reopened.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as w

from gr_notebook.display.render import PANEL
from gr_notebook.errors import ConfigError
from gr_notebook.events import (
    Event,
    ModelCallEvent,
    ToolCallEvent,
)
from gr_notebook.history.labels import KINDS, Label, decision_points, default_who, save_labels
from gr_notebook.history.store import Store
from gr_notebook.jupyter.clicks import on_this_loop
from gr_notebook.jupyter.outputs import LiveOutput, show_static
from gr_notebook.review.recorded import todos_after
from gr_notebook.review.replay_sources import recorded_runs
from gr_notebook.workflow.todos import TodoList

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
    Each answer is kept in the run's store as it is given, under ``who``, and listed under
    the widget; :meth:`finish` (or a label on every point) leaves the labeller static."""

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
        self.notes: dict[tuple[str, int], str | None] = {}
        self.finished = not self.points
        """Labelling is over (there was nothing to label, or :meth:`finish`): the controls
        do nothing, and the labeller shows as it stopped."""
        self._views: list[LiveOutput] = []
        """The cell outputs showing the widget, replaced when the labelling finishes."""
        self._lists: list[LiveOutput] = []
        """The cell outputs listing the labels given here, updated as each is given."""
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
            ("Finish", self.finish, "info"),
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

    def finish(self) -> None:
        """Labelling is over: the widget closes, and its output becomes the labeller as it
        stopped (the labels given stay listed under it). A second call does nothing."""
        if self.finished:
            return
        self.finished = True
        self._show()
        for view in self._views:
            view.replace(self.static_bundle())
        for listed in self._lists:
            listed.replace(self.labels_bundle())
        _close_tree(self.widget)

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
        if point is None or self.finished:
            return
        note = self._note.value.strip() or None
        with Store(point.store) as store:
            save_labels(store, [Label(point.run_id, point.seq, value, self.kind, self.who, note)])
        key = (point.run_id, point.seq)
        self.given[key] = value
        self.notes[key] = note
        self._note.value = ""
        self._move(1)
        for listed in self._lists:
            listed.update(self.labels_bundle())
        if all((p.run_id, p.seq) in self.given for p in self.points):
            self.finish()  # nothing is left to label

    def _move(self, step: int) -> None:
        if self.finished:
            return
        self.index = max(0, min(len(self.points), self.index + step))
        self._show()

    def _show(self) -> None:
        self._header.value = self._heading()
        point = self.current
        self._body.value = "" if point is None else _render(point)

    def _heading(self) -> str:
        """What the widget's first line says: where it is, or that labelling is over."""
        done, total, point = len(self.given), len(self.points), self.current
        if self.finished:
            stopped = ""
            if point is not None:
                stopped = f" It stopped at point {self.index + 1}: {self._where(point)}."
            return (
                f"<b>Labelling finished: {done} of {total} {self.kind} points labelled</b>, by "
                f"{html.escape(self.who)}. The labels are in the runs' store; "
                f"<code>gr.backtest(..., labels=None)</code> reads them.{stopped}"
            )
        if point is None:
            return (
                f"<b>{done} of {total} points labelled</b>: every point was shown. Press Back to "
                "see one again, or Finish. The labels are in the runs' store; "
                "<code>gr.backtest(..., labels=None)</code> reads them."
            )
        return (
            f"<b>{self.index + 1} of {total}</b> · {done} labelled · {self._where(point)} · "
            f"should a {self.kind} act here?"
        )

    def _where(self, point: LabelPoint) -> str:
        given = self.given.get((point.run_id, point.seq))
        said = "" if given is None else f" (labelled: {'act' if given else 'not act'})"
        return (
            f"run {html.escape(point.run)}, turn {point.turn}, event {point.seq}: a "
            f"{point.what}{said}"
        )

    # -- in a notebook --------------------------------------------------------------------------

    def _ipython_display_(self) -> None:
        """The widget, and under it the labels given here; both static once finished."""
        if self.finished:
            show_static(self.static_bundle())
            show_static(self.labels_bundle())
            return
        self._show()
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = repr(self)
        data["text/html"] = f"<div class='gr-labeller'>{html.escape(repr(self))}</div>"
        self._views.append(LiveOutput(data))
        self._lists.append(LiveOutput(self.labels_bundle()))

    def static_bundle(self) -> dict[str, str]:
        """The labeller as it stands, without its controls: what it is once finished."""
        point = self.current
        body = "" if point is None else _render(point)
        heading = self._heading()
        drawn = f"<div class='gr-labeller' style='{PANEL}'><div>{heading}</div>{body}</div>"
        return {
            "text/html": drawn,
            "text/plain": f"{self!r}\n{_plain(heading)}",
        }

    def labels_bundle(self) -> dict[str, str]:
        """The labels given here, a table: what a notebook saved mid-way still shows."""
        keys = [(p, (p.run_id, p.seq)) for p in self.points]
        rows = [(p, self.given[k], self.notes.get(k)) for p, k in keys if k in self.given]
        acting = sum(value for _, value, _ in rows)
        who = html.escape(self.who)
        if rows:
            title = (
                f"Labels given here by {who}: {len(rows)} ({acting} should act, "
                f"{len(rows) - acting} should not), each kept in the runs' store as it was given"
            )
        elif self.finished:
            title = f"Labels given here by {who}: none"
        else:
            title = (
                f"Labels given here by {who}: none yet; each is kept in the runs' store as it "
                "is given, and listed here"
            )
        cells = ("run", "turn", "event", "point", "label", "note")
        head = "".join(f"<th style='text-align:left;padding:0 6px'>{c}</th>" for c in cells)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='text-align:left;padding:0 6px'>{html.escape(str(c))}</td>"
                for c in _row(p, v, n)
            )
            + "</tr>"
            for p, v, n in rows
        )
        table = (
            f"<div style='max-height:320px;overflow:auto'><table><tr>{head}</tr>{body}</table>"
            "</div>"
            if rows
            else ""
        )
        lines = ["  ".join(map(str, _row(p, v, n))) for p, v, n in rows]
        return {
            "text/html": f"<div class='gr-labels' style='{PANEL}'><b>{title}</b>{table}</div>",
            "text/plain": "\n".join([html.unescape(title), *lines]),
        }

    def __repr__(self) -> str:
        over = ", finished" if self.finished else ""
        return (
            f"<Labeller: {len(self.given)} of {len(self.points)} {self.kind} points labelled{over}>"
        )


def _points(
    label: str, run_id: str, events: Sequence[Event], store: Path, kind: str
) -> list[LabelPoint]:
    """The run's points a guardrail of ``kind`` decides at, with the todos each saw."""
    at = {seq for seq, (point, implied) in decision_points(events).items() if seq == point}
    todos = TodoList()
    found = []
    for event in events:
        todos = todos_after(todos, event)
        if event.seq not in at:
            continue
        shown = tuple(f"[{'x' if item.done else ' '}] {item.title}" for item in todos.items)
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


def _row(point: LabelPoint, value: bool, note: str | None) -> tuple[object, ...]:
    what = point.tool or point.what
    return (
        point.run,
        point.turn,
        point.seq,
        what,
        "should act" if value else "should not act",
        note or "",
    )


def _plain(heading: str) -> str:
    """A heading's words without its tags."""
    return html.unescape(re.sub(r"<[^>]+>", "", heading))


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


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
