"""Test helpers that need no network: local servers speaking the Anthropic Messages API and
the OpenAI chat-completions API."""

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
