"""``literal``: the diligent agent's work, done by a model that obeys every order it reads.

This is the profile to test guardrails against. A real model does what it is told, so an
order that contradicts the job shows up here as a job that does not get done:

- told to wrap up (a resource warning, a feedback block, the todo layer's INSTRUCTION line),
  it summarizes its progress and calls ``job_complete`` with what is done and what is left;
- told that a read is redundant, it does not read that file again while the copy is in view;
- told to narrow the scope, it keeps only the todos its allotment fits;
- it calls ``check_resources`` every 3 tool calls, the most often the prompt asks;
- told by a strategy check to re-read the plan and change its approach, it does.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from gr_notebook import prompts
from gr_notebook.guidance import action_of_text
from gr_notebook.models import habits
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.simulated import Profile, register_profile, respond
from gr_notebook.models.situation import Situation

__all__ = ["Literal"]

CHECK_EVERY = 3
_FEEDBACK = re.compile(r"<feedback provider='[^']*'>.*?</feedback>", re.DOTALL)
_REDUNDANT = "provider='Redundancy'"
_RECAP_BUDGET = "Your assess_task budget: "
_ALLOTTED = re.compile(r" tokens and (\d+) iterations")


@register_profile
class Literal(Profile):
    """Does the diligent agent's work and follows every directive to the letter."""

    name: ClassVar[str] = "literal"

    def act(self, s: Situation) -> ModelResponse:
        if wrap_up_ordered(s):
            return self.wrap_up(s)
        narrowed = self.narrow(s)
        if narrowed is not None:
            return narrowed
        if any(t.startswith(prompts.STRATEGY_CHECK_MARKER) for t in s.fresh_texts):
            return respond(
                "Re-reading the plan, as the strategy check says, before I change approach.",
                [("read_file", {"path": s.plan_file})],
            )
        response = super().act(s)
        return without_rebuked_reads(s, response)

    def wrap_up(self, s: Situation) -> ModelResponse:
        left = [t.title for t in s.tasks if not t.done]
        calls: list[tuple[str, Mapping[str, Any]]] = []
        if "summarize_progress" in s.tools:
            calls.append(("summarize_progress", habits.summary_for(s)))
        calls.append(
            (
                "job_complete",
                {
                    "summary": "Wrapped up when told to, before the work was finished.",
                    "deliverables": [],
                    "confidence": 0.3,
                    "notes": "Tasks left: " + ("; ".join(left) if left else "none listed"),
                },
            )
        )
        return respond("I was told to wrap up, so I am finishing now.", calls)

    def narrow(self, s: Situation) -> ModelResponse | None:
        """After an assessment that said to narrow the scope: keep the todos it fits."""
        for call in reversed(s.calls_since_marker):
            if call.name == "todo_write" and call.turn_index > _last_assessed(s):
                return None
        assessed = _narrowing(s)
        if assessed is None:
            return None
        left = [t.title for t in s.tasks if not t.done]
        fits = max((assessed - habits.TRANSITION_ITERATIONS) // habits.ITERATIONS_PER_STEP, 1)
        if len(left) <= fits:
            return None
        return respond(
            f"Narrowing the scope to the {fits} tasks the budget fits.",
            [("todo_write", {"todos": left[:fits]})],
        )

    def checks_resources(self, s: Situation) -> bool:
        return len(s.calls_since("check_resources")) >= CHECK_EVERY


def wrap_up_ordered(s: Situation) -> bool:
    """The latest order says to wrap up: the todo layer's standing order, or the newest
    feedback block or resource recommendation, unless a refused stop came after it."""
    if s.instruction == prompts.WRAP_UP_INSTRUCTION:
        return True
    latest: bool | None = None
    for text in s.fresh_texts:
        if text.startswith(prompts.STOP_REFUSED_MARKER):
            latest = False
        for order in _orders(text):
            if action_of_text(order) == "wrap_up":
                latest = True
    return bool(latest)


def without_rebuked_reads(s: Situation, response: ModelResponse) -> ModelResponse:
    """Drop the reads a Redundancy block told it not to repeat; a file the latest workflow
    prompt asks for is still read."""
    rebuked = {
        str(c.input.get("path"))
        for c in s.calls
        if c.ok("read_file") and _REDUNDANT in (c.result or "")
    }
    if not rebuked:
        return response
    asked = s.marker_text if s.marker else ""
    kept = [
        (u.name, u.input)
        for u in response.tool_uses
        if not (
            u.name == "read_file"
            and str(u.input.get("path")) in rebuked
            and str(u.input.get("path")) not in asked
        )
    ]
    if not kept or len(kept) == len(response.tool_uses):
        return response
    return respond(response.text, kept)


def _orders(text: str) -> list[str]:
    """The orders inside a text: its feedback blocks, or a resource recommendation."""
    blocks = _FEEDBACK.findall(text)
    if text.startswith('{"tokens_used"'):
        with contextlib.suppress(ValueError, KeyError):
            blocks.append(str(json.loads(text.split("\n\n", 1)[0])["recommendation"]))
    return blocks


def _narrowing(s: Situation) -> int | None:
    """The iterations allotted by the latest assessment, when it said to narrow the scope:
    from its result, or from the recap that carries it past a compaction."""
    for call in reversed(s.calls_since_marker):
        if call.ok("assess_task"):
            try:
                guidance = str(json.loads(call.result or "").get("guidance", ""))
            except (ValueError, AttributeError):
                return None
            return _allotted_if_narrow(guidance)
    budget = next((line for line in s.summary.splitlines() if line.startswith(_RECAP_BUDGET)), None)
    return None if budget is None else _allotted_if_narrow(budget)


def _allotted_if_narrow(guidance: str) -> int | None:
    match = _ALLOTTED.search(guidance)
    if match is None or "narrow the scope" not in guidance:
        return None
    return int(match.group(1))


def _last_assessed(s: Situation) -> int:
    for call in reversed(s.calls_since_marker):
        if call.ok("assess_task"):
            return call.turn_index
    return -1
