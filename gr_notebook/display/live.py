"""The model turn that is streaming now, as a dashboard shows it: text as it arrives, thinking
collapsed under a short "thinking…", the tools it calls by name.

A long turn arrives in thousands of small deltas, so :class:`LiveTurn` keeps only the tail
of it (:data:`LIVE_CHARS` characters, in at most :data:`LIVE_SECTIONS` sections): adding a
delta costs O(1) amortised, and a view costs the kept tail, never the whole turn, so a
redraw at delta 50,000 costs what one at delta 50 does. When the turn ends its
``model_call`` event clears the view, and the finished turn shows as every other does.
Pure: no IPython, no widgets.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from html import escape
from typing import Literal, TypeAlias

from gr_notebook.models.call_context import ModelDelta

__all__ = ["LIVE_CHARS", "LIVE_SECTIONS", "LiveSection", "LiveTurn", "LiveView", "render_live"]

LIVE_CHARS = 2_000
"""Characters of the streaming turn kept and shown: its tail."""
LIVE_SECTIONS = 8
"""Sections (a thinking block, a run of text, a tool call) kept and shown: the newest."""

SectionKind: TypeAlias = Literal["text", "thinking", "redacted_thinking", "tool_use"]


@dataclass(frozen=True, slots=True)
class LiveSection:
    kind: SectionKind
    text: str
    cut: int = 0
    """Characters of this section no longer kept (its head)."""


@dataclass(frozen=True, slots=True)
class LiveView:
    """What the live panel shows of one streaming turn."""

    turn: int
    sections: tuple[LiveSection, ...]
    received: int
    """Characters received in this turn so far, shown or not."""
    dropped: int = 0
    """Sections dropped from the front."""


@dataclass(slots=True)
class _Section:
    kind: SectionKind
    parts: deque[str] = field(default_factory=deque)
    kept: int = 0
    cut: int = 0


class LiveTurn:
    """Takes a run's :class:`~gr_notebook.models.call_context.ModelDelta` values and keeps
    the tail of the turn they belong to; a new turn, or a ``restart`` (a retry), starts over."""

    def __init__(self, *, limit: int = LIVE_CHARS, max_sections: int = LIVE_SECTIONS) -> None:
        if limit < 1 or max_sections < 1:
            raise ValueError("limit and max_sections must be at least 1")
        self.limit = limit
        self.max_sections = max_sections
        self.turn: int | None = None
        self._sections: deque[_Section] = deque()
        self._kept = 0
        self._received = 0
        self._dropped = 0

    def clear(self) -> None:
        """The turn ended (its ``model_call`` event), or the run did: nothing is live."""
        self.turn = None
        self._sections.clear()
        self._kept = self._received = self._dropped = 0

    def add(self, delta: ModelDelta) -> bool:
        """Take one delta; True when it changed what the view shows."""
        kind = delta.kind
        if kind == "restart" or delta.turn != self.turn:
            self.clear()
            self.turn = delta.turn
            if kind == "restart":
                return True
        last = self._sections[-1] if self._sections else None
        if last is None or last.kind != kind or kind not in ("text", "thinking"):
            last = _Section(kind)
            self._sections.append(last)
            if len(self._sections) > self.max_sections:
                self._kept -= self._sections.popleft().kept
                self._dropped += 1
        piece = delta.text
        self._received += len(piece)
        if len(piece) > self.limit:  # only its tail can show
            last.cut += len(piece) - self.limit
            piece = piece[-self.limit :]
        if piece:
            last.parts.append(piece)
            last.kept += len(piece)
            self._kept += len(piece)
        if self._kept > self.limit + self.limit // 2:  # trim in batches: O(1) amortised
            self._trim()
        return True

    def _trim(self) -> None:
        """Drop the oldest characters down to ``limit``; a section emptied before the newest
        goes too (it is counted in ``dropped``)."""
        excess = self._kept - self.limit
        while excess > 0 and self._sections:
            first = self._sections[0]
            while excess > 0 and first.parts:
                head = first.parts[0]
                take = min(len(head), excess)
                if take == len(head):
                    first.parts.popleft()
                else:
                    first.parts[0] = head[take:]
                first.kept -= take
                first.cut += take
                self._kept -= take
                excess -= take
            if not first.parts and len(self._sections) > 1:
                self._sections.popleft()
                self._dropped += 1
            elif not first.parts:
                break

    def view(self) -> LiveView | None:
        """The view now; None when nothing is streaming."""
        if self.turn is None:
            return None
        sections = tuple(LiveSection(s.kind, "".join(s.parts), s.cut) for s in self._sections)
        return LiveView(self.turn, sections, self._received, self._dropped)


_PANEL = (
    "border-left:3px solid #1565c0;padding:4px 8px;margin:4px 0;font-size:12px;"
    "max-height:16em;overflow-y:auto"
)
_BODY = "white-space:pre-wrap;word-break:break-word;margin:2px 0"


def render_live(view: LiveView | None) -> str:
    """The live panel's HTML: empty when nothing streams."""
    if view is None:
        return ""
    head = f"turn {view.turn} · the model is writing…"
    if view.received:
        head += f" ({view.received:,} characters)"
    parts = [f"<div class='gr-live-head' style='color:#616161'>{escape(head)}</div>"]
    if view.dropped:
        parts.append(f"<div style='color:#9e9e9e'>… {view.dropped} earlier part(s)</div>")
    for section in view.sections:
        parts.append(_section(section))
    return f"<div class='gr-live' style='{_PANEL}'>{''.join(parts)}</div>"


def _section(section: LiveSection) -> str:
    text = ("…" if section.cut else "") + section.text
    if section.kind == "tool_use":
        return f"<div class='gr-live-tool'>→ calling <code>{escape(section.text)}</code>…</div>"
    if section.kind in ("thinking", "redacted_thinking"):
        summary = "thinking…" if section.kind == "thinking" else "thinking… (redacted)"
        body = f"<div style='{_BODY};color:#616161'>{escape(text)}</div>" if text else ""
        return f"<details class='gr-live-thinking'><summary>{summary}</summary>{body}</details>"
    return f"<div class='gr-live-text' style='{_BODY}'>{escape(text)}</div>"
