"""The one interface every model implements, and the values that cross it.

A request carries the five context layers already assembled: system blocks tagged with their
layer (1 and 2), tool schemas (layer 3) and messages (layers 4 and 5). A plain async
function taking a request and returning a response is a model too.

A model that can count a request's input tokens before sending it also implements
:class:`TokenCounter`; the loop then checks the count, rather than the request's estimate,
against what the run's token budget has left.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from gr_notebook.messages import ContentBlock, Message, ToolUseBlock, Usage, block_tokens

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "INVALID_ARGUMENTS",
    "Model",
    "ModelFunction",
    "ModelRequest",
    "ModelResponse",
    "StopReason",
    "SystemBlock",
    "TokenCounter",
    "ToolSpec",
    "context_window_of",
    "finish_response",
    "invalid_arguments",
]

#: Tokens a model can take in one request, when the model does not say (Claude's window).
DEFAULT_CONTEXT_WINDOW = 200_000

#: The key of a tool use's input whose arguments were not valid JSON: the adapter keeps the
#: call (so the model gets a result for it) and the tool step refuses it with the reason.
INVALID_ARGUMENTS = "__invalid_json_arguments__"

StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"]


@dataclass(frozen=True, slots=True)
class SystemBlock:
    layer: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    system: tuple[SystemBlock, ...]
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    layer_tokens: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """Approximate tokens of layers 1-5, measured once by the context assembler."""
    turn: int = 0

    @property
    def estimated_tokens(self) -> int:
        return sum(self.layer_tokens)

    def layer_text(self, layer: int) -> str:
        return "\n".join(b.text for b in self.system if b.layer == layer)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason = "end_turn"
    usage: Usage | None = None
    model: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return self.message().tool_uses

    @property
    def text(self) -> str:
        return self.message().text

    def message(self) -> Message:
        return Message("assistant", self.content)


@runtime_checkable
class Model(Protocol):
    """Anything that turns a request into a response."""

    @property
    def name(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class TokenCounter(Protocol):
    """A model that can count a request's input tokens before it is sent (optional)."""

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        """The input tokens ``request`` needs; None when this model does not count."""
        ...


ModelFunction: TypeAlias = Callable[[ModelRequest], Awaitable[ModelResponse]]


def context_window_of(model: Model) -> int:
    """A model may declare ``context_window``; the protocol does not require it."""
    window = getattr(model, "context_window", None)
    return window if isinstance(window, int) and window > 0 else DEFAULT_CONTEXT_WINDOW


def finish_response(
    response: ModelResponse, request: ModelRequest, *, id_stem: str, model: str
) -> ModelResponse:
    """Fill what an offline model leaves out: tool-use ids, usage and the model name.

    Ids are deterministic (``toolu_<stem>_<i>``) so transcripts and notebook outputs are
    stable; usage is the request's token estimate plus the reply's.
    """
    content = tuple(
        ToolUseBlock(f"toolu_{id_stem}_{i}", b.name, b.input)
        if isinstance(b, ToolUseBlock) and not b.id
        else b
        for i, b in enumerate(response.content)
    )
    usage = response.usage or Usage(
        input_tokens=request.estimated_tokens,
        output_tokens=sum(block_tokens(b) for b in content),
    )
    return ModelResponse(content, response.stop_reason, usage, response.model or model)


def invalid_arguments(raw: str, problem: str) -> dict[str, Any]:
    """The input of a tool use whose arguments ``raw`` did not parse as a JSON object."""
    return {INVALID_ARGUMENTS: {"raw": raw, "problem": problem}}
