"""Offline test helpers: local servers that speak the Anthropic and OpenAI APIs.

They answer the Anthropic Messages API and the OpenAI chat-completions API on this machine, so
no test needs the network."""

from __future__ import annotations

from gr_notebook.testing.chat_server import ChatServer, bad_arguments, empty_reply
from gr_notebook.testing.messages_server import Fault, MessagesServer, RecordedRequest, Turn

__all__ = [
    "ChatServer",
    "Fault",
    "MessagesServer",
    "RecordedRequest",
    "Turn",
    "bad_arguments",
    "empty_reply",
]
