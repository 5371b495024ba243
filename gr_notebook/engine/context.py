"""Assembles the five context layers for every model call, and compacts layers 4-5.

Layers 1-3 (system prompt, todo display, tool descriptions) are protected: compaction
never touches them. Token counts are kept as running totals, so assembling a request costs
the same on turn 10 as on turn 10,000. Layers 4-5 are part of the run state's snapshot
(:meth:`ContextManager.to_json`); the token totals are recomputed on restore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gr_notebook.messages import (
    MESSAGE_OVERHEAD,
    ContentBlock,
    Message,
    ToolResultBlock,
    approx_tokens,
    message_tokens,
)
from gr_notebook.models.base import ModelRequest, SystemBlock, ToolSpec
from gr_notebook.workflow.journal import Journal
from gr_notebook.workflow.phases import Segment
from gr_notebook.workflow.todos import TodoList

__all__ = ["CompactionStats", "ContextManager", "build_recap"]

PRUNE_KEEP = 5
RECENT_PHASES = 5
RECENT_ACCOMPLISHMENTS = 6
RECENT_NOTES = 4
RECENT_FAILURES = 3
MAX_TITLES_CHARS = 240


@dataclass(frozen=True, slots=True)
class CompactionStats:
    messages_removed: int
    tokens_before: int
    tokens_after: int


class ContextManager:
    """Holds layers 4 (previous summary) and 5 (conversation since it)."""

    def __init__(self) -> None:
        self._summary: Message | None = None
        self._summary_tokens = 0
        self._recap: str | None = None
        self._progress: str | None = None
        self._messages: list[Message] = []
        self._message_tokens: list[int] = []
        self._conversation_tokens = 0
        self._l1: tuple[str, int] = ("", 0)
        self._l3: tuple[tuple[ToolSpec, ...], int] = ((), 0)

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    @property
    def summary(self) -> str | None:
        return self._summary.text if self._summary else None

    def append(self, message: Message) -> None:
        """Add to layer 5, merging into the previous message when the role repeats."""
        tokens = message_tokens(message)
        if self._messages and self._messages[-1].role == message.role:
            previous = self._messages[-1]
            self._messages[-1] = Message(message.role, previous.content + message.content)
            tokens -= MESSAGE_OVERHEAD  # one message now, not two
            self._message_tokens[-1] += tokens
        else:
            self._messages.append(message)
            self._message_tokens.append(tokens)
        self._conversation_tokens += tokens

    def append_user(self, blocks: Sequence[ContentBlock]) -> None:
        if blocks:
            self.append(Message("user", tuple(blocks)))

    def assemble(
        self, system_prompt: str, todos: TodoList, tools: tuple[ToolSpec, ...], *, turn: int
    ) -> ModelRequest:
        if self._l1[0] is not system_prompt:
            self._l1 = (system_prompt, approx_tokens(system_prompt))
        if self._l3[0] is not tools:
            self._l3 = (tools, _tools_tokens(tools))
        display = todos.render()
        messages = tuple(self._messages)
        if self._summary is not None:
            messages = _prepend(self._summary, messages)
        return ModelRequest(
            system=(SystemBlock(1, system_prompt), SystemBlock(2, display)),
            messages=messages,
            tools=tools,
            layer_tokens=(
                self._l1[1],
                approx_tokens(display),
                self._l3[1],
                self._summary_tokens,
                self._conversation_tokens,
            ),
            turn=turn,
        )

    def compact(self, recap: str) -> CompactionStats:
        """Replace layers 4-5 with ``recap``. Layer 5 is cleared whole, so no tool_use is
        ever parted from its tool_result."""
        before = self._summary_tokens + self._conversation_tokens
        removed = len(self._messages)
        self._recap, self._progress = recap, None
        self._set_summary()
        self._messages.clear()
        self._message_tokens.clear()
        self._conversation_tokens = 0
        return CompactionStats(removed, before, self._summary_tokens)

    def prune(self, progress: str, keep: int = PRUNE_KEEP) -> CompactionStats:
        """Seed 003's pruning: layer 4 gains ``progress`` (after the phase recap, if any)
        and layer 5 keeps its last ``keep`` messages. A kept message never holds a
        tool_result whose tool_use was dropped: the window starts later instead. Thinking
        blocks go with their messages, and a window cut into a running tool loop starts at a
        message that opens with thinking, as the API asks when the model thinks."""
        before = self._summary_tokens + self._conversation_tokens
        start = max(len(self._messages) - keep, 0)
        while start < len(self._messages) and _holds_results(self._messages[start]):
            if start == 0:
                break  # its tool_use is already gone (a compaction): nothing to part
            start += 1
        start = _opening_thought(self._messages, start)
        removed = start
        del self._messages[:start]
        del self._message_tokens[:start]
        self._conversation_tokens = sum(self._message_tokens)
        self._progress = progress
        self._set_summary()
        after = self._summary_tokens + self._conversation_tokens
        return CompactionStats(removed, before, after)

    def release(self) -> None:
        """Forget layers 4-5 (an idle, finished run); the events keep the history."""
        self._recap = self._progress = None
        self._set_summary()
        self._messages.clear()
        self._message_tokens.clear()
        self._conversation_tokens = 0

    def to_json(self, *, messages: bool = True) -> dict[str, Any]:
        """Layers 4-5 as JSON values; ``messages=False`` leaves layer 5 out."""
        layers: dict[str, Any] = {"recap": self._recap, "progress": self._progress}
        if messages:
            layers["messages"] = [m.to_json() for m in self._messages]
        return layers

    def load_json(self, data: Mapping[str, Any]) -> None:
        """Bring back layers 4-5 from :meth:`to_json` (messages are decoded before any
        change, so a bad snapshot leaves the conversation as it was)."""
        messages = [Message.from_json(m) for m in data["messages"]]
        self._recap, self._progress = data["recap"], data["progress"]
        self._set_summary()
        self._messages = messages
        self._message_tokens = [message_tokens(m) for m in messages]
        self._conversation_tokens = sum(self._message_tokens)

    def _set_summary(self) -> None:
        parts = [p for p in (self._recap, self._progress) if p]
        self._summary = Message.user("\n\n".join(parts)) if parts else None
        self._summary_tokens = message_tokens(self._summary) if self._summary else 0


def _holds_results(message: Message) -> bool:
    return message.role == "user" and any(
        isinstance(block, ToolResultBlock) for block in message.content
    )


def _opening_thought(messages: list[Message], start: int) -> int:
    """Where a window cut at ``start`` must start instead so that, with the summary put
    before it, the running tool loop still opens with a thinking block, which the API
    requires with thinking on.

    The loop runs from the last user message that answers no tool call. A cut before it
    changes nothing; a cut inside it makes its first kept assistant message the opener, so
    the cut moves on to the next one that opens with thinking, or, when none does (a model
    that thinks only before its first call), back to the latest that does."""
    if start == 0 or start >= len(messages) or not _holds_results(messages[-1]):
        return start
    loop = len(messages)
    while loop > 0 and (
        messages[loop - 1].role == "assistant" or _holds_results(messages[loop - 1])
    ):
        loop -= 1
    if start <= loop or messages[start].opens_with_thinking:
        return start
    thinking = [i for i in range(loop, len(messages)) if messages[i].opens_with_thinking]
    if not thinking:  # the model did not think in this loop: the API asks for nothing
        return start
    later = [i for i in thinking if i > start]
    return later[0] if later else thinking[-1]


def _prepend(summary: Message, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    if messages and messages[0].role == "user":
        return (Message("user", summary.content + messages[0].content), *messages[1:])
    return (summary, *messages)


def _tools_tokens(tools: tuple[ToolSpec, ...]) -> int:
    return sum(
        approx_tokens(t.name)
        + approx_tokens(t.description)
        + approx_tokens(json.dumps(t.input_schema))
        for t in tools
    )


def build_recap(
    *,
    segments: Sequence[Segment],
    journal: Journal,
    todos: TodoList,
    plan_file: str,
    turn: int,
    workspace_state: Sequence[str] = (),
    budget: str | None = None,
) -> str:
    """The new layer 4, built from the record without a model call: deterministic and cheap.

    Every section keeps only its most recent entries, so the recap is the same size after
    phase 30 as after phase 3; the full history stays in the workspace files it names.
    """
    lines = [
        f"PREVIOUS SUMMARY (written by the system at turn {turn}; the full record is in "
        f"{plan_file}, workspace_summary.md, notes.md, experiences.md and archive/)",
        "",
        "Completed so far:",
    ]
    older = segments[:-RECENT_PHASES]
    if older:
        rewound = sum(s.outcome == "rewound" for s in older)
        lines.append(f"- {len(older)} earlier todo lists ({rewound} rewound); see archive/")
    for seg in segments[-RECENT_PHASES:]:
        lines.append(f"- {_segment_line(seg)}")
    last = segments[-1] if segments else None
    if last and last.titles:
        titles = "; ".join(last.titles)
        if len(titles) > MAX_TITLES_CHARS:
            titles = titles[: MAX_TITLES_CHARS - 1] + "…"
        lines.append(f"  Tasks done in the last list: {titles}")
    lines += _section("Current state", workspace_state, len(workspace_state))
    lines += _section("Recent accomplishments", journal.accomplishments(), RECENT_ACCOMPLISHMENTS)
    lines += _section("Recent notes", journal.notes(), RECENT_NOTES)
    lines += _section(
        "Failed approaches (from rewinds; avoid repeating them)",
        journal.failed_approaches(),
        RECENT_FAILURES,
    )
    if budget:  # an order still in force: the answer to the phase's assessment
        lines += ["", f"Your latest assess_task answer: {budget}"]
    lines += [
        "",
        f"Now: {todos.phase_label()}, {len(todos.items)} tasks in your todo list. "
        "Continue with the current task shown in the todo list.",
    ]
    return "\n".join(lines)


def _segment_line(seg: Segment) -> str:
    if seg.kind == "bootstrap":
        label = "Bootstrap"
    elif seg.kind == "job_completion":
        label = "Job completion"
    else:
        label = f"Phase {seg.phase} '{seg.name}'"
    where = f" ({seg.archive})" if seg.archive else ""
    if seg.outcome == "rewound":
        return f"{label}: rewound after {seg.done} tasks: {seg.issue}{where}"
    return f"{label}: {seg.outcome}, {seg.done} tasks done{where}"


def _section(title: str, items: Sequence[str], limit: int) -> list[str]:
    if not items:
        return []
    shown = items[-limit:]
    more = f" (latest {limit} of {len(items)})" if len(items) > limit else ""
    return ["", f"{title}{more}:", *(f"- {item}" for item in shown)]
