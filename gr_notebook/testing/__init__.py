"""Test helpers that need no network: a local server speaking the Anthropic Messages API."""

from __future__ import annotations

from gr_notebook.testing.messages_server import Fault, MessagesServer, RecordedRequest, Turn

__all__ = ["Fault", "MessagesServer", "RecordedRequest", "Turn"]
