"""Which harness runs the model, so that every order is worded for what the model has there.

gr's own loop gives the model a phased workflow: a todo list, a plan file and gr's tools to
work them (``todo_write``, ``todo_complete``, ``todo_rewind``, ``job_complete``). Another
harness, such as a Claude Agent SDK session, runs the model with its own tools and none of
those. A model follows an order as written, so an order that asks for a list or a tool the
model lacks cannot be obeyed. The texts both harnesses send (a refused stop, a completion
check's feedback) take the harness as a parameter and word themselves for it, and the
dashboard shows the run as what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLAUDE_AGENT_SDK", "GR_LOOP", "LANGCHAIN", "Harness"]


@dataclass(frozen=True, slots=True)
class Harness:
    """What runs the model: a name, and whether the model works through gr's phased loop."""

    name: str
    """As the run's config records it (``harness``)."""
    phased: bool
    """The model has gr's todo list, plan and workflow tools (``todo_complete``,
    ``job_complete``); orders may ask for them."""
    label: str
    """The harness in a reader's words."""


GR_LOOP = Harness("gr", phased=True, label="gr's agent loop")
CLAUDE_AGENT_SDK = Harness("claude-agent-sdk", phased=False, label="a Claude Agent SDK session")
LANGCHAIN = Harness("langchain", phased=False, label="a LangChain agent")
