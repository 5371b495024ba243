"""A run's guardrail events as rows that mean the same on every runtime.

:func:`guardrail_rows` is the one place where host differences are forgotten. It keeps, in
the order the run recorded them, each event a guardrail decided, as a tuple of plain words:

- ``("policy", mode, tool, allow|ask|deny, policy)``: a policy decision (live or shadow);
- ``("asked", tool, input, problem|-)``: a person asked about a call: the input they were
  shown, and whether a refused edit came with it;
- ``("answered", approve|deny|edit, by, problem|-)``: their answer, who gave it (the
  confirmer, or the timeout that ended the wait), and whether the edit was refused;
- ``("feedback", mode, provider, tool)``, ``("stop", mode, complete|refused|bypassed)``;
- ``("intervention", mode, tier N | skip <reason>)``: every intervention check;
- ``("wrap_up",)``: the first order to wrap up because a limit runs low;
- ``("error", source, error type)``; ``("end", status)``: how the run ended.

What it forgets, and why:

- ids, turns, times and durations: each host numbers and times its calls its own way (the
  Claude Code CLI makes side requests, and a session counts turns from its stream);
- reasons, feedback and order texts: the bridges word them in the host's terms (Claude's
  tool names, absolute paths), so the policy's or provider's *name* stands for its reason;
- the ``mcp__<server>__`` prefix of a tool name: the Claude Agent SDK calls the local tool
  ``mcp__count__lookup``, gr and LangChain call it ``lookup``;
- the action of an intervention's tier: gr's loop rewinds its todo list at tier 2, where a
  session (no todo list) gives a second strategy check; the tier is the same decision;
- where a wrap-up order came from, and repeats of it: gr's loop says it on its todo layer
  (and, under a cost limit, once more in words), a session says it once, as a message;
- model calls and tool-call events: what ran is proven by the tools' own counts, not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from gr_notebook.events import (
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    PolicyDecisionEvent,
    RunFinishedEvent,
    as_typed,
    directive_of,
)

Row = tuple[str, ...]

_MCP = re.compile(r"^mcp__[^_].*?__")


def guardrail_rows(events: Iterable[Event]) -> tuple[Row, ...]:
    """The guardrails' decisions of a run, in order, as the module docstring says."""
    rows: list[Row] = []
    wrapped = False
    for event in map(as_typed, events):
        mode = "shadow" if getattr(event, "mode", None) == "shadow" else "live"
        if isinstance(event, PolicyDecisionEvent):
            verdict = "allow" if event.allowed else "ask" if event.needs_approval else "deny"
            rows.append(("policy", mode, _tool(event.tool), verdict, event.policy or "-"))
        elif isinstance(event, ApprovalRequestedEvent):
            rows.append(("asked", _tool(event.tool), _json(event.input), _flag(event.problem)))
        elif isinstance(event, ApprovalAnsweredEvent):
            rows.append(("answered", event.decision, event.by, _flag(event.problem)))
        elif isinstance(event, FeedbackEvent):
            rows.append(("feedback", mode, event.provider, _tool(event.tool)))
        elif isinstance(event, CompletionCheckEvent):
            verdict = "bypassed" if event.bypassed else "complete" if event.complete else "refused"
            rows.append(("stop", mode, verdict))
        elif isinstance(event, InterventionCheckEvent):
            what = f"tier {event.tier}" if event.fired else f"skip {event.skip_reason}"
            rows.append(("intervention", mode, what))
        elif isinstance(event, ErrorEvent):
            rows.append(("error", event.source, event.error_type or "-"))
        elif isinstance(event, RunFinishedEvent):
            rows.append(("end", event.status))
        else:
            order = directive_of(event)
            if order is not None and order.action == "wrap_up" and not wrapped:
                wrapped = True
                rows.append(("wrap_up",))
    return tuple(rows)


def _tool(name: str) -> str:
    return _MCP.sub("", name)


def _json(value: Any) -> str:
    return json.dumps(dict(value), sort_keys=True)


def _flag(problem: str | None) -> str:
    return "problem" if problem else "-"
