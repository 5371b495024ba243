"""What each Claude model can take in: its context window, and how a 1M window is reached.

A small frozen table beside the price table (:mod:`~gr_notebook.models.pricing`), keyed the
same way (snapshot suffixes dropped). A model it does not know has the default 200K window.
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
    "LONG_CONTEXT",
    "MODELS",
    "LongContext",
    "ModelFacts",
    "facts_of",
]

#: The ``anthropic-beta`` value that opens the 1M-token window where it is a beta.
CONTEXT_1M_BETA = "context-1m-2025-08-07"
LONG_CONTEXT = 1_000_000

LongContext: TypeAlias = Literal["none", "beta", "native"]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """``context_window`` is what a request gets without asking; ``long_context`` says
    whether 1M tokens are out of reach, behind the beta header, or the window already."""

    context_window: int = DEFAULT_CONTEXT_WINDOW
    long_context: LongContext = "none"


_200K = ModelFacts()
_BETA = ModelFacts(DEFAULT_CONTEXT_WINDOW, "beta")
_NATIVE = ModelFacts(LONG_CONTEXT, "native")

MODELS: Mapping[str, ModelFacts] = MappingProxyType(
    {
        "claude-fable-5-1": _NATIVE,
        "claude-fable-5": _NATIVE,
        "claude-opus-5-5": _NATIVE,
        "claude-sonnet-5-5": _NATIVE,
        "claude-haiku-5-5": _NATIVE,
        "claude-opus-5": _NATIVE,
        "claude-sonnet-5": _NATIVE,
        "claude-opus-4-8": _NATIVE,
        "claude-opus-4-7": _NATIVE,
        "claude-opus-4-6": _BETA,
        "claude-sonnet-4-6": _BETA,
        "claude-sonnet-4-5": _BETA,
        "claude-sonnet-4": _BETA,
        "claude-opus-4-5": _200K,
        "claude-opus-4-1": _200K,
        "claude-opus-4": _200K,
        "claude-haiku-4-5": _200K,
        "claude-3-7-sonnet": _200K,
        "claude-3-5-haiku": _200K,
        "claude-3-opus": _200K,
        "claude-3-haiku": _200K,
    }
)
"""Decision 188: checked against the models overview and context-window pages as reported in
November 2026; a model left out has 200K, and ``context_window=`` overrides any of it."""


def facts_of(model: str) -> ModelFacts:
    """The facts of ``model`` (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""
    return MODELS.get(price_key(model), _200K)
