"""Runtime 2: gr's loop with the Anthropic adapter, the real ``anthropic`` SDK against the
local Messages API server."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from tests.enforcement.gr_loop import GrLoopDriver, results_in_messages


class AnthropicBackend:
    def __init__(self) -> None:
        self._server: MessagesServer | None = None

    @contextmanager
    def model(self, script: Sequence[ModelResponse]) -> Iterator[AnthropicModel]:
        import anthropic

        with MessagesServer(script) as server:
            self._server = server
            client = anthropic.AsyncAnthropic(
                api_key="test-key", base_url=server.url, max_retries=0
            )
            yield AnthropicModel("claude-sonnet-4-6", client=client, retry=RetryPolicy(base_s=0))

    def told(self) -> Mapping[str, str]:
        bodies = (
            [r.body for r in self._server.requests if r.path == "/v1/messages"]
            if self._server
            else []
        )
        return results_in_messages(m for body in bodies for m in body.get("messages", ()))


DRIVER = GrLoopDriver("anthropic", "gr's loop, Anthropic adapter", AnthropicBackend)
