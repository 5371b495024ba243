"""Models: one small protocol, offline implementations, and spec-string resolution."""

from __future__ import annotations

from gr_notebook.errors import ModelSpecError
from gr_notebook.models.base import (
    Model,
    ModelFunction,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    ToolSpec,
)
from gr_notebook.models.scripted import ScriptedModel, text, tool_call, tool_calls

__all__ = [
    "FunctionModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ScriptedModel",
    "SystemBlock",
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
            from gr_notebook.models.simulated import SimulatedModel

            return SimulatedModel(profile=arg or "diligent")
        if kind == "scripted":
            raise ModelSpecError(
                "'scripted' needs its responses; pass gr.ScriptedModel([...]) as model= instead"
            )
        raise ModelSpecError(
            f"unknown model spec {spec!r}; use 'simulated', 'simulated:<profile>', or pass a "
            "model object such as gr.ScriptedModel([...])"
        )
    if isinstance(spec, Model):
        return spec
    if callable(spec):
        return FunctionModel(spec)
    raise ModelSpecError(
        f"model= takes a spec string, a model object or an async function, not "
        f"{type(spec).__name__}"
    )
