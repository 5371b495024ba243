"""What each Claude model can take in: its context window, how a 1M window is reached, and
which kinds of extended thinking it accepts.

A small frozen table beside the price table (:mod:`~gr_notebook.models.pricing`), keyed the
same way (snapshot suffixes dropped). A model it does not know has the default 200K window,
and any kind of thinking (the API decides).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

from gr_notebook.models.base import DEFAULT_CONTEXT_WINDOW
from gr_notebook.models.pricing import price_key

__all__ = [
    "CONTEXT_1M_BETA",
    "INTERLEAVED_THINKING_BETA",
    "LONG_CONTEXT",
    "MODELS",
    "LongContext",
    "ModelFacts",
    "ThinkingSupport",
    "facts_of",
]

#: The ``anthropic-beta`` value that opens the 1M-token window where it is a beta.
CONTEXT_1M_BETA = "context-1m-2025-08-07"
LONG_CONTEXT = 1_000_000

#: The ``anthropic-beta`` value that lets a budgeted Claude 4 model think between tool calls.
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"

LongContext: TypeAlias = Literal["none", "beta", "native"]
ThinkingSupport: TypeAlias = Literal["none", "budget", "both", "adaptive"]
"""Which ``thinking`` a model takes: none; a token budget (``type: "enabled"``); a budget or
``type: "adaptive"``; or adaptive only (a budget is a 400 there)."""


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """``context_window`` is what a request gets without asking; ``long_context`` says
    whether 1M tokens are out of reach, behind the beta header, or the window already;
    ``thinking`` which kinds of extended thinking the model accepts, and
    ``interleaved_beta`` whether a budget thinks between tool calls only with
    :data:`INTERLEAVED_THINKING_BETA` (adaptive thinking interleaves by itself)."""

    context_window: int = DEFAULT_CONTEXT_WINDOW
    long_context: LongContext = "none"
    thinking: ThinkingSupport = "both"
    interleaved_beta: bool = True


def _facts(window: LongContext, thinking: ThinkingSupport) -> ModelFacts:
    size = LONG_CONTEXT if window == "native" else DEFAULT_CONTEXT_WINDOW
    return ModelFacts(size, window, thinking, interleaved_beta=thinking in ("budget", "both"))


_UNKNOWN = ModelFacts()

MODELS: Mapping[str, ModelFacts] = MappingProxyType(
    {
        "claude-fable-5-1": _facts("native", "adaptive"),
        "claude-fable-5": _facts("native", "adaptive"),
        "claude-opus-5-5": _facts("native", "adaptive"),
        "claude-sonnet-5-5": _facts("native", "adaptive"),
        "claude-haiku-5-5": _facts("native", "adaptive"),
        "claude-opus-5": _facts("native", "adaptive"),
        "claude-sonnet-5": _facts("native", "adaptive"),
        "claude-opus-4-8": _facts("native", "adaptive"),
        "claude-opus-4-7": _facts("native", "adaptive"),
        "claude-opus-4-6": _facts("beta", "both"),
        "claude-sonnet-4-6": _facts("beta", "both"),
        "claude-sonnet-4-5": _facts("beta", "budget"),
        "claude-sonnet-4": _facts("beta", "budget"),
        "claude-opus-4-5": _facts("none", "budget"),
        "claude-opus-4-1": _facts("none", "budget"),
        "claude-opus-4": _facts("none", "budget"),
        "claude-haiku-4-5": _facts("none", "budget"),
        # Claude 3.7 thinks only before its first tool call: no interleaving, no header.
        "claude-3-7-sonnet": ModelFacts(thinking="budget", interleaved_beta=False),
        "claude-3-5-haiku": _facts("none", "none"),
        "claude-3-opus": _facts("none", "none"),
        "claude-3-haiku": _facts("none", "none"),
    }
)
"""Windows checked against the models overview and context-window pages as reported in
November 2026; a model left out has 200K, and ``context_window=`` overrides any of it. The
kinds of thinking come from the extended- and adaptive-thinking pages."""


def facts_of(model: str) -> ModelFacts:
    """The facts of ``model`` (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""
    return MODELS.get(price_key(model), _UNKNOWN)
