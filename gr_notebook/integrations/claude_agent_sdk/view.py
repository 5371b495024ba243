"""The run as an SDK session's guardrails read it: the run state, with what they record put
in Claude's terms.

Policies judge a call under gr's tool names and relative paths
(:class:`~gr_notebook.integrations.claude_agent_sdk.tools.ToolNames`); the events say what
Claude called, and what it was told. So the decision and feedback events pass through here
on their way to the log: the SDK tool name, and the reply as Claude read it.
"""

from __future__ import annotations

from dataclasses import replace

from gr_notebook.engine.state import RunState
from gr_notebook.events import Event, FeedbackEvent, PolicyDecisionEvent
from gr_notebook.guardrails.view import RelayView
from gr_notebook.integrations.claude_agent_sdk.tools import Call, ToolNames

__all__ = ["ClaudeView"]


class ClaudeView(RelayView):
    """A :class:`~gr_notebook.guardrails.view.RunView` over the run state; ``call`` is the
    call being judged."""

    def __init__(self, state: RunState, names: ToolNames) -> None:
        super().__init__(state)
        self.names = names
        self.call: Call | None = None

    def emit(self, event: Event) -> None:
        call, names = self.call, self.names
        if isinstance(event, PolicyDecisionEvent) and call is not None:
            reason = None if event.reason is None else names.in_claude_terms(event.reason, call)
            event = replace(event, tool=call.sdk_name, reason=reason)
        elif isinstance(event, FeedbackEvent):
            tool = call.sdk_name if call is not None else event.tool
            event = replace(event, text=names.in_claude_terms(event.text), tool=tool)
        self.run.emit(event)
