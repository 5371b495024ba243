"""``literal``: the diligent agent's work, done by a model that obeys every order it reads.

This is the profile to test guardrails against. A real model does what it is told, so an
order that contradicts the job shows up here as a job that does not get done:

- told to wrap up (a resource warning, a feedback block, the todo layer's INSTRUCTION line),
  it summarizes its progress and calls ``job_complete`` with what is done and what is left;
- told that a read is redundant, it does not read that file again while the copy is in view;
- told to narrow the scope, it keeps only the todos its allotment fits (and notes the rest);
  denied a budget by a person, it asks again for half the scope;
- it calls ``check_resources`` every 3 tool calls, the most often the prompt asks;
- told by a strategy check to re-read the plan and change its approach, it does.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from gr_notebook.guidance import action_of_text
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.simulated import habits
from gr_notebook.models.simulated.diligent import Profile, register_profile, respond
from gr_notebook.models.simulated.situation import Situation
from gr_notebook.workflow import prompts

__all__ = ["Literal"]

CHECK_EVERY = 3
_FEEDBACK = re.compile(r"<feedback provider='[^']*'>.*?</feedback>", re.DOTALL)
_REDUNDANT = "provider='Redundancy'"
_TASK_TYPES = ("codebase_audit", "multi_file_refactor", "file_edit", "exploration")
_RECAP_ANSWER = "Your latest assess_task answer: "
_DENIED = "Not approved"
_ALLOTTED = re.compile(r" tokens and (\d+) iterations")
_PERSON_SAID = re.compile(
    r"^Not run: a person denied this \w+ call\. Their reason: (.*?)\. Follow it"
)


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
        """Told to narrow the scope: by an assessment, it keeps the todos the allotment
        fits; by a person's denial, it asks again for half the scope."""
        left = [t.title for t in s.tasks if not t.done]
        denied = _denied(s)
        if denied is not None:
            half = {
                **denied,
                "estimated_files": max(int(denied.get("estimated_files", 1)) // 2, 1),
                "estimated_iterations": max(int(denied.get("estimated_iterations", 2)) // 2, 1),
            }
            keep = max(len(left) // 2, 1)
            return respond(
                "Asking again for half the scope, and keeping half the tasks.",
                [("assess_task", half), *_narrowed_to(left, keep)],
            )
        for call in reversed(s.calls_since_marker):
            if call.name == "todo_write" and call.turn_index > _last_assessed(s):
                return None
        assessed = _narrowing(s)
        if assessed is None:
            return None
        fits = max((assessed - habits.TRANSITION_ITERATIONS) // habits.ITERATIONS_PER_STEP, 1)
        if len(left) <= fits:
            return None
        return respond(
            f"Narrowing the scope to the {fits} tasks the budget fits.", _narrowed_to(left, fits)
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
    """The orders inside a text: its feedback blocks, a resource recommendation, or the
    reason a person gave for denying a call."""
    blocks = _FEEDBACK.findall(text)
    if said := _PERSON_SAID.match(text):
        blocks.append(said.group(1))
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
            after_denial = (_recap_answer(s) or "").startswith(_DENIED)
            return _allotted_if_narrow(guidance, after_denial=after_denial)
    answer = _recap_answer(s)
    return None if answer is None else _allotted_if_narrow(answer)


def _recap_answer(s: Situation) -> str | None:
    prefix = _RECAP_ANSWER
    line = next((ln for ln in s.summary.splitlines() if ln.startswith(prefix)), None)
    return None if line is None else line[len(prefix) :]


def _allotted_if_narrow(guidance: str, *, after_denial: bool = False) -> int | None:
    """The iterations allotted, when the answer asks to narrow the scope (or answers the
    smaller request that a person's denial asked for)."""
    match = _ALLOTTED.search(guidance)
    if match is None or not (after_denial or "narrow the scope" in guidance):
        return None
    return int(match.group(1))


def _narrowed_to(left: list[str], keep: int) -> list[tuple[str, Mapping[str, Any]]]:
    """The todo list cut to ``keep`` tasks, and a note of what was left out."""
    if len(left) <= keep:
        return []
    dropped = "; ".join(left[keep:])
    return [
        ("todo_write", {"todos": left[:keep]}),
        ("add_note", {"text": f"Left out to fit the budget: {dropped}"[:500]}),
    ]


def _denied(s: Situation) -> dict[str, Any] | None:
    """What to ask again for, when a person denied the latest assessment (in view, or
    carried by the recap) and it was not asked again since."""
    for call in reversed(s.calls):
        if call.name == "assess_task":
            if call.is_error and (call.result or "").startswith(_DENIED):
                return dict(call.input)
            return None
    if not s.tasks:
        return None
    if not (_recap_answer(s) or "").startswith(_DENIED) or any(t.done for t in s.tasks):
        return None  # the recap's denial counts only before the phase's first task is done
    left = [t for t in s.tasks if not t.done]
    return {
        "task_type": habits.task_type_of(s.latest_read("instructions.md") or "", _TASK_TYPES),
        "estimated_files": len(left),
        "estimated_iterations": habits.ITERATIONS_PER_STEP * len(left)
        + habits.TRANSITION_ITERATIONS,
        "strategy": "The same phase, at half the scope the person declined.",
    }


def _last_assessed(s: Situation) -> int:
    for call in reversed(s.calls_since_marker):
        if call.ok("assess_task"):
            return call.turn_index
    return -1
