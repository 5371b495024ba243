"""Side effects that survive a crash: the records around a tool call, and what a resume
reads from them.

Before a tool's handler runs, the guarded step records a ``tool_intent`` (the call, the hash
of its input, its idempotency key, its effect class); the ``tool_call`` that follows is its
completion. Every event is committed to the store as it is emitted, so a run killed at any
instant leaves one of three states for each call: no intent (it never ran), an intent and
no completion (it began; whether it took effect is unknown), or both (it ended).

A resume rebuilds the turn the kill cut (:class:`CutTurn`): the model's reply, kept as a
blob, is not asked for again, and each of its calls is judged by its record and its tool's
:data:`~gr_notebook.tools.base.Effect` (decision 407):

- ended ``once`` call: its recorded result, not run again;
- ``read`` or ``idempotent`` call: run again (the workspace was brought back to the turn's
  start, and running it again is safe);
- began and never ended ``once`` call: the tool's ``probe`` decides; without one a person
  who attends is asked; else it is *unverified*: not run, and the model is told so.

The idempotency key of a call (:func:`idempotency_key`) is a hash of the lineage's first
run, the turn, the call's place in the turn, the tool and its input: the same across
resumes, retries and forks from before the call, unless the call itself changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gr_notebook.digests import digest_of
from gr_notebook.eventdata import plain_json
from gr_notebook.events import (
    Event,
    ModelCallEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolIntentEvent,
    ToolRecoveredEvent,
    as_typed,
)
from gr_notebook.guardrails.runtime import Denial
from gr_notebook.messages import Message
from gr_notebook.models.base import ModelResponse
from gr_notebook.tools.nesting import too_deep_message

__all__ = [
    "CallRecord",
    "CutTurn",
    "canonical_input",
    "cut_turn",
    "happened_result",
    "idempotency_key",
    "once_calls",
    "policies_fingerprint",
    "unknown_outcome_ask",
    "unverified_result",
]

KEY_PREFIX: Final = "gr-"


def canonical_input(params: Mapping[str, Any]) -> bytes:
    """A tool input as canonical JSON (sorted keys, no spaces): its hash names it."""
    text = json.dumps(
        plain_json(params), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return text.encode("utf-8", "surrogatepass")


def idempotency_key(root: str, turn: int, index: int, tool: str, input_hash: str) -> str:
    """The key of one call: the lineage's first run (a resume's and a fork's are their
    parent's), the turn, the call's place among the turn's calls, the tool and the hash of
    its input. A fork whose agent makes the same call gets the same key; one that changes
    it (another input, another place) gets another."""
    named = f"{root}\x1f{turn}\x1f{index}\x1f{tool}\x1f{input_hash}".encode()
    return KEY_PREFIX + digest_of(named)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def policies_fingerprint(bindings: Iterable[tuple[str, object]]) -> str:
    """The hash of the policies that govern a tool, ``(key, policy)`` each, as their reprs
    say them (an object's address left out): an approval given under them holds on resume
    only while this is the same."""
    said = [[key, _ADDRESS.sub("", repr(policy))] for key, policy in bindings]
    return digest_of(json.dumps(said, ensure_ascii=False).encode("utf-8", "surrogatepass"))


# -- what the model reads ---------------------------------------------------------------------


def unverified_result(tool: str, turn: int) -> str:
    """The result of a ``once`` call whose outcome is unknown: what happened, what it may do."""
    return (
        f"Outcome unknown: this {tool} call of turn {turn} was cut off when the run was "
        "interrupted, so nobody knows whether it took effect; it was not run again. Check "
        f"first if you can, with another tool, and call {tool} again only if the check shows "
        "it did not happen; if you cannot check, do not call it again, and say in your final "
        "summary that a person must check it."
    )


def happened_result(tool: str) -> str:
    """The result of a ``once`` call whose probe found its effect."""
    return (
        f"{tool} took effect before the run was interrupted (its probe found the effect), so "
        "it was not run again; its own result was not recorded. Do not call it again for "
        "this; carry on with the rest of your task."
    )


def unknown_outcome_ask(tool: str, turn: int) -> Denial:
    """What a person is asked about a cut ``once`` call with no probe: run it again?"""
    return Denial(
        "resume",
        f"the run was interrupted while this {tool} call of turn {turn} ran, and nothing "
        "shows whether it took effect; approve to run it again (with the same idempotency "
        "key), deny to leave it unverified and tell the agent so",
        needs_approval=True,
        policies=("resume",),
    )


# -- the cut turn, as the store has it ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call of the cut turn as the killed run recorded it."""

    intent: ToolIntentEvent
    done: ToolCallEvent | None = None
    """Its completion, when it ended."""
    recovered: ToolRecoveredEvent | None = None
    """What an earlier resume did about it (a resume that was killed in turn)."""
    whole_input: Mapping[str, Any] | None = None
    """A person's edit the call ran with, whole (``intent.edited``)."""
    whole_result: str | None = None
    """The whole result of a ``once`` call, when the event's is clipped."""

    @property
    def result(self) -> str:
        assert self.done is not None
        return self.whole_result if self.whole_result is not None else self.done.result

    @property
    def unverified(self) -> bool:
        """An earlier resume left it unverified: its result says so, not what it did."""
        return self.recovered is not None and self.recovered.verdict == "unverified"


@dataclass(frozen=True, slots=True)
class CutTurn:
    """The turn a kill cut, to rebuild without asking the model again: its model call (as
    recorded, to count again), its reply, and the record of each call that began."""

    turn: int
    model_call: ModelCallEvent
    reply: ModelResponse
    reply_digest: str
    thinking: ThinkingEvent | None = None
    calls: Mapping[str, CallRecord] = field(default_factory=dict)
    """By tool use id: the calls that began (those that did not run again as new)."""
    too_deep: frozenset[str] = frozenset()
    """The calls refused for an input nested too deep: the reply holds their input cut."""


def cut_turn(events: Sequence[Event], read: Callable[[str], bytes]) -> CutTurn | None:
    """The cut turn from the killed run's events after its latest checkpoint (``read`` a
    blob by its hash); None when there is nothing to rebuild: the model's reply was never
    recorded, or no call of it began (asking the model again repeats nothing)."""
    typed = [as_typed(e) for e in events]
    model_call = next((e for e in typed if isinstance(e, ModelCallEvent)), None)
    if model_call is None:
        return None
    turn = model_call.turn
    intents = [e for e in typed if isinstance(e, ToolIntentEvent) and e.turn == turn]
    digest = next((e.reply for e in intents if e.reply), None)
    if digest is None:
        return None
    message = Message.from_json(json.loads(read(digest)))
    reply = ModelResponse(message.content, model_call.stop_reason, model=model_call.model)  # type: ignore[arg-type]
    done = {e.tool_use_id: e for e in typed if isinstance(e, ToolCallEvent) and e.turn == turn}
    recovered = {
        e.tool_use_id: e for e in typed if isinstance(e, ToolRecoveredEvent) and e.turn == turn
    }
    calls: dict[str, CallRecord] = {}
    for intent in intents:
        ended = done.get(intent.tool_use_id)
        if ended is not None and ended.seq < intent.seq:
            ended = None  # a refusal recorded before: not this call's end
        whole = json.loads(read(intent.input_hash)) if intent.edited else None
        result = read(ended.result_digest).decode() if ended and ended.result_digest else None
        calls[intent.tool_use_id] = CallRecord(
            intent, ended, recovered.get(intent.tool_use_id), whole, result
        )
    thinking = next((e for e in typed if isinstance(e, ThinkingEvent) and e.turn == turn), None)
    too_deep = frozenset(
        e.tool_use_id
        for e in done.values()
        if e.tool_use_id not in calls and e.result == too_deep_message(e.tool)
    )
    return CutTurn(turn, model_call, reply, digest, thinking, calls, too_deep)


def once_calls(events: Iterable[Event], *, since_seq: int = -1) -> list[dict[str, Any]]:
    """The ``once`` calls that began in ``events`` after ``since_seq``: tool, tool use id,
    turn, key, and whether each ended (``done``)."""
    calls: dict[str, dict[str, Any]] = {}
    began: dict[str, str] = {}
    for event in map(as_typed, events):
        if event.seq <= since_seq:
            continue
        if isinstance(event, ToolIntentEvent) and event.effect == "once":
            began[event.tool_use_id] = event.key
            calls.setdefault(
                event.key,
                {
                    "tool": event.tool,
                    "tool_use_id": event.tool_use_id,
                    "turn": event.turn,
                    "key": event.key,
                    "done": False,
                },
            )
        elif isinstance(event, ToolCallEvent) and event.tool_use_id in began:
            calls[began.pop(event.tool_use_id)]["done"] = True
    return list(calls.values())
