"""Runtime 3: gr's loop with the OpenAI-compatible adapter, the real ``openai`` SDK against
the local chat-completions server."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from gr_notebook.models import ModelResponse
from gr_notebook.models.openai_model import OpenAIModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import ChatServer, MessagesServer
from tests.enforcement.gr_loop import GrLoopDriver, text_of


class OpenAIBackend:
    def __init__(self) -> None:
        self._server: MessagesServer | None = None  # a ChatServer

    @contextmanager
    def model(self, script: Sequence[ModelResponse]) -> Iterator[OpenAIModel]:
        with ChatServer(script) as server:
            self._server = server
            yield OpenAIModel(
                "qwen2.5:7b", base_url=f"{server.url}/v1", retry=RetryPolicy(base_s=0)
            )

    def told(self) -> Mapping[str, str]:
        found: dict[str, str] = {}
        for request in self._server.requests if self._server else ():
            body = request.body if isinstance(request.body, dict) else {}
            for message in body.get("messages", ()):
                if message.get("role") == "tool":
                    found[str(message["tool_call_id"])] = text_of(message.get("content"))
        return found


DRIVER = GrLoopDriver("openai", "gr's loop, OpenAI adapter", OpenAIBackend)
