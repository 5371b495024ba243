"""A deterministic model that replays a script: for tests, tutorials and reproductions."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from gr_notebook.errors import ConfigError, ModelError, ScriptExhausted
from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelRequest, ModelResponse, finish_response

__all__ = ["KEEP_REQUESTS", "ScriptEntry", "ScriptedModel", "text", "tool_call", "tool_calls"]

KEEP_REQUESTS = 100
"""How many of the latest requests a ScriptedModel keeps by default. Each request holds the
whole conversation so far, so keeping every one costs memory quadratic in the turns."""

ScriptEntry: TypeAlias = (
    ModelResponse | Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
)


def tool_call(name: str, /, **input: Any) -> ModelResponse:
    """A response with one tool_use block."""
    return ModelResponse((ToolUseBlock("", name, dict(input)),), "tool_use")


def tool_calls(calls: Iterable[tuple[str, Mapping[str, Any]] | ModelResponse]) -> ModelResponse:
    """A response with several tool_use blocks, run in order in one turn."""
    blocks: list[ToolUseBlock] = []
    for call in calls:
        if isinstance(call, ModelResponse):
            blocks.extend(call.tool_uses)
        else:
            name, params = call
            blocks.append(ToolUseBlock("", name, dict(params)))
    return ModelResponse(tuple(blocks), "tool_use")


def text(message: str) -> ModelResponse:
    """A final text response that ends the turn."""
    return ModelResponse((TextBlock(message),), "end_turn")


class ScriptedModel:
    """Replays responses in order; a callable entry is called with the request (and
    awaited if it is async, which lets a script take time the way a real model does).

    Tool-use ids left empty by the builders are filled in deterministically, and usage is
    estimated from the request when the entry gives none, so scripted runs have realistic
    token figures.

    ``requests`` holds the latest ``keep_requests`` requests, oldest first (all of them
    with ``keep_requests=None``); ``calls`` counts every request.
    """

    def __init__(
        self,
        responses: Sequence[ScriptEntry],
        *,
        name: str = "scripted",
        keep_requests: int | None = KEEP_REQUESTS,
    ) -> None:
        if keep_requests is not None and (
            isinstance(keep_requests, bool)
            or not isinstance(keep_requests, int)
            or keep_requests < 1
        ):
            raise ConfigError(
                f"keep_requests is how many of the latest requests to keep (a whole number "
                f">= 1), or None to keep all of them; got {keep_requests!r}"
            )
        self._responses = list(responses)
        self._name = name
        self.requests: deque[ModelRequest] = deque(maxlen=keep_requests)
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self._responses)} responses, {self.remaining} left)"

    @property
    def remaining(self) -> int:
        return len(self._responses) - self.calls

    async def complete(self, request: ModelRequest) -> ModelResponse:
        index = self.calls
        self.calls += 1
        self.requests.append(request)
        if index >= len(self._responses):
            raise ScriptExhausted(
                f"ScriptedModel ran out of responses: it was given {len(self._responses)} and "
                f"asked for response {index + 1}; add more responses to the script"
            )
        entry = self._responses[index]
        response = entry(request) if callable(entry) else entry
        if inspect.isawaitable(response):
            response = await response
        if not isinstance(response, ModelResponse):
            raise ModelError(
                f"script entry {index} returned {type(response).__name__}; return a "
                "ModelResponse (use gr.tool_call, gr.tool_calls or gr.text)"
            )
        return finish_response(response, request, id_stem=f"s{index:04d}", model=self._name)
