"""Models: the ``Model`` protocol, its requests and responses, and the models themselves.

Offline ones (scripted, function), the Anthropic and OpenAI-compatible adapters, and
spec-string resolution.

``ALLOW_NETWORK`` is the network guard: set it to False (or start Python with
``GR_NOTEBOOK_ALLOW_NETWORK=0``) and any model request to a host other than this machine
fails at once.
"""

from __future__ import annotations

import typing

from gr_notebook.errors import ModelSpecError
from gr_notebook.models.base import (
    Model,
    ModelFunction,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    ToolSpec,
)
from gr_notebook.models.network import allow_network_default, follow_switch
from gr_notebook.models.pricing import Price, PriceTable
from gr_notebook.models.scripted import ScriptedModel, text, tool_call, tool_calls
from gr_notebook.models.thinking import Thinking

if typing.TYPE_CHECKING:
    from gr_notebook.models.anthropic_model import AnthropicModel
    from gr_notebook.models.openai_model import OpenAIModel

ALLOW_NETWORK: bool = allow_network_default()


def _network_allowed() -> bool:
    return ALLOW_NETWORK  # read at each request, so that setting the attribute takes effect


follow_switch(_network_allowed)

__all__ = [
    "ALLOW_NETWORK",
    "AnthropicModel",
    "FunctionModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAIModel",
    "Price",
    "PriceTable",
    "ScriptedModel",
    "SystemBlock",
    "Thinking",
    "ToolSpec",
    "resolve_model",
    "text",
    "tool_call",
    "tool_calls",
]


class FunctionModel:
    """Wraps a plain ``async def f(request) -> ModelResponse`` as a model."""

    def __init__(self, function: ModelFunction, *, name: str | None = None) -> None:
        self._function = function
        self._name: str = name or str(getattr(function, "__name__", "function"))

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._function(request)


def resolve_model(spec: object) -> Model:
    """Turn ``None``, a spec string, a model object or an async function into a model."""
    if spec is None:
        spec = "simulated"
    if isinstance(spec, str):
        kind, _, arg = spec.partition(":")
        if kind == "simulated":
            from gr_notebook.models.simulated.model import SimulatedModel

            return SimulatedModel(profile=arg or "diligent")
        if kind == "anthropic":
            if not arg.strip():
                raise ModelSpecError(
                    "'anthropic' needs a model id: 'anthropic:<model-id>', e.g. "
                    "'anthropic:claude-sonnet-4-6'"
                )
            from gr_notebook.models.anthropic_model import AnthropicModel

            return AnthropicModel(arg)
        if kind == "openai":
            model_id, _, base_url = arg.partition("@")
            if not model_id.strip():
                raise ModelSpecError(
                    "'openai' needs a model id: 'openai:<model-id>' or "
                    "'openai:<model-id>@<base_url>', e.g. "
                    "'openai:qwen2.5:7b@http://localhost:11434/v1'"
                )
            from gr_notebook.models.openai_model import OpenAIModel

            return OpenAIModel(model_id, base_url=base_url.strip() or None)
        if kind == "scripted":
            raise ModelSpecError(
                "'scripted' needs its responses; pass gr.ScriptedModel([...]) as model= instead"
            )
        raise ModelSpecError(
            f"unknown model spec {spec!r}; use 'simulated', 'simulated:<profile>', "
            "'anthropic:<model-id>', 'openai:<model-id>[@<base_url>]', or pass a model object "
            "such as gr.ScriptedModel([...])"
        )
    if isinstance(spec, Model):
        return spec
    if callable(spec):
        return FunctionModel(spec)
    raise ModelSpecError(
        f"model= takes a spec string, a model object or an async function, not "
        f"{type(spec).__name__}"
    )


def __getattr__(name: str) -> typing.Any:
    if name == "AnthropicModel":  # the SDK loads on first use, never on import gr_notebook
        from gr_notebook.models.anthropic_model import AnthropicModel

        return AnthropicModel
    if name == "OpenAIModel":  # and the openai SDK likewise
        from gr_notebook.models.openai_model import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module 'gr_notebook.models' has no attribute {name!r}")
