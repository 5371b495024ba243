"""What the simulated agent can see: a model request read back into facts.

The simulated model has no memory of its own between calls. Everything it knows comes from
the request, exactly as for a real LLM, so it forgets what compaction removes and relies on
the protected layers (its todo list above all) to find its way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gr_notebook.messages import TextBlock, ToolResultBlock, ToolUseBlock
from gr_notebook.models.base import ModelRequest
from gr_notebook.workflow import prompts

__all__ = ["Call", "Situation", "Task"]

_ITEM = re.compile(r"^\[([ x])\] (\d+)\. (.*?)(?:\s{6}← CURRENT)?$")
_PHASE = re.compile(r"^Phase: (.*?)(?: \((\d+) of (\d+)\))?$")
_NOT_WORK = ("Bootstrap", "Job Completion")
_PLAN_FILE = re.compile(r"the strategy is in (\S+?)\.?$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Task:
    number: int
    title: str
    done: bool


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the agent made earlier in the visible conversation, with its result."""

    name: str
    input: Mapping[str, Any]
    result: str | None
    is_error: bool
    turn_index: int
    """Index of the assistant message that made it, counted from the start of layer 5."""

    def ok(self, name: str) -> bool:
        """A successful call of ``name``."""
        return self.name == name and not self.is_error


@dataclass(frozen=True, slots=True)
class Situation:
    tasks: tuple[Task, ...]
    phase_name: str
    phase_number: int
    phase_total: int
    plan_file: str
    calls: tuple[Call, ...]
    last_text: str
    """The text of the agent's own previous reply."""
    marker: str | None
    """The latest workflow prompt (PHASE TRANSITION, REWIND, …) in view, if any."""
    marker_text: str
    calls_since_marker: tuple[Call, ...]
    turn: int
    refused_stops: int = 0
    """Stops the completion checker refused since the latest workflow marker."""
    tools: frozenset[str] = frozenset()
    """The tools the request offers."""
    strategy_checks: int = 0
    """STRATEGY CHECK prompts (tier-1 interventions) in view."""
    instruction: str = ""
    """The todo layer's INSTRUCTION line."""
    summary: str = ""
    """Layer 4: the recap and progress summary the system wrote at the last compaction."""
    fresh_texts: tuple[str, ...] = ()
    """What the system said since the agent's previous reply: injected prompts, and the
    results of its last tool calls."""

    def calls_since(self, name: str) -> tuple[Call, ...]:
        """The calls after the latest call of ``name``; every call when there is none."""
        for index in range(len(self.calls) - 1, -1, -1):
            if self.calls[index].name == name:
                return self.calls[index + 1 :]
        return self.calls

    @property
    def current(self) -> Task | None:
        return next((t for t in self.tasks if not t.done), None)

    @property
    def in_work_phase(self) -> bool:
        """A phase of the plan, not the bootstrap or job-completion list."""
        return self.phase_number >= 1 and self.phase_name not in _NOT_WORK

    @property
    def erring(self) -> bool:
        """Every call of the previous turn failed."""
        last = self.last_calls
        return bool(last) and all(c.is_error for c in last)

    @property
    def last_calls(self) -> tuple[Call, ...]:
        if not self.calls:
            return ()
        last = self.calls[-1].turn_index
        return tuple(c for c in self.calls if c.turn_index == last)

    def latest_read(self, path: str) -> str | None:
        for call in reversed(self.calls):
            if call.name == "read_file" and call.input.get("path") == path and not call.is_error:
                return call.result
        return None

    @classmethod
    def read(cls, request: ModelRequest) -> Situation:
        tasks, name, number, total = _parse_display(request.layer_text(2))
        match = _PLAN_FILE.search(request.layer_text(1))
        uses: dict[str, tuple[ToolUseBlock, int]] = {}
        calls: list[Call] = []
        marker, marker_text, marker_at = None, "", -1
        last_text = ""
        assistant_index = -1
        refusals: list[int] = []
        checks = 0
        fresh: list[str] = []
        for message in request.messages:
            if message.role == "assistant":
                assistant_index += 1
                last_text = message.text
                fresh = []
            else:
                fresh += [
                    b.text if isinstance(b, TextBlock) else b.content
                    for b in message.content
                    if isinstance(b, (TextBlock, ToolResultBlock))
                ]
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    uses[block.id] = (block, assistant_index)
                elif isinstance(block, ToolResultBlock) and block.tool_use_id in uses:
                    use, index = uses[block.tool_use_id]
                    calls.append(Call(use.name, use.input, block.content, block.is_error, index))
                elif isinstance(block, TextBlock) and message.role == "user":
                    head = block.text.split(":", 1)[0]
                    if head in prompts.MARKERS:
                        marker, marker_text, marker_at = head, block.text, assistant_index
                    elif head == prompts.STOP_REFUSED_MARKER:
                        refusals.append(assistant_index)
                    elif head == prompts.STRATEGY_CHECK_MARKER:
                        checks += 1
                if isinstance(block, ToolResultBlock) and block.content.startswith(
                    prompts.STOP_REFUSED_MARKER
                ):
                    refusals.append(assistant_index)
        since = tuple(c for c in calls if c.turn_index > marker_at) if marker else ()
        return cls(
            tasks=tasks,
            phase_name=name,
            phase_number=number,
            phase_total=total,
            plan_file=match.group(1) if match else "main_plan.md",
            calls=tuple(calls),
            last_text=last_text,
            marker=marker,
            marker_text=marker_text,
            calls_since_marker=since,
            turn=request.turn,
            refused_stops=sum(at >= marker_at for at in refusals),
            tools=frozenset(t.name for t in request.tools),
            strategy_checks=checks,
            instruction=_instruction(request.layer_text(2)),
            summary=_summary(request),
            fresh_texts=tuple(fresh),
        )


def _summary(request: ModelRequest) -> str:
    first = request.messages[0] if request.messages else None
    if first is None or first.role != "user" or not first.content:
        return ""
    block = first.content[0]
    text = block.text if isinstance(block, TextBlock) else ""
    return text if text.startswith(("PREVIOUS SUMMARY", "PROGRESS SUMMARY")) else ""


def _instruction(display: str) -> str:
    for line in reversed(display.splitlines()):
        if line.startswith("INSTRUCTION: "):
            return line.removeprefix("INSTRUCTION: ")
    return ""


def _parse_display(display: str) -> tuple[tuple[Task, ...], str, int, int]:
    tasks: list[Task] = []
    name, number, total = "", 0, 0
    for line in display.splitlines():
        item = _ITEM.match(line)
        if item:
            tasks.append(Task(int(item.group(2)), item.group(3), item.group(1) == "x"))
            continue
        phase = _PHASE.match(line)
        if phase:
            name = phase.group(1)
            number = int(phase.group(2) or 0)
            total = int(phase.group(3) or 0)
    return tuple(tasks), name, number, total
