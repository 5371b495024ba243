"""What a model call costs, from a price table the user can override.

Prices are USD per million tokens, from Anthropic's pricing page. A model the
table does not know costs NaN: a cost column that guesses would be worse than a blank one.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from gr_notebook.errors import ConfigError
from gr_notebook.messages import Usage

__all__ = [
    "DEFAULT_PRICES",
    "Price",
    "PriceTable",
    "Priced",
    "price_key",
    "price_of_model",
    "warn_unpriced",
]

logger = logging.getLogger("gr_notebook")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. Cache writes are the 5-minute kind, the only one used.

    ``long_prompt`` is a tier some models have (Claude Haiku 5.5): a request whose prompt
    (input, cache writes and cache reads) is over ``long_prompt[0]`` tokens is billed, output
    included, at ``long_prompt[1]``. Each call is priced on its own, so the tier is exact.
    """

    input: float
    output: float
    cache_write: float
    cache_read: float
    long_prompt: tuple[int, Price] | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_write", "cache_read"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):  # a NaN price would cost NaN, and a NaN cost is under no cap
                raise ConfigError(
                    f"Price.{name} is USD per million tokens, a finite number >= 0 such as "
                    f"gr.Price.standard(3.0, 15.0); got {value!r}"
                )
        tier = self.long_prompt
        if tier is not None and not (
            isinstance(tier, tuple)
            and len(tier) == 2
            and isinstance(tier[0], int)
            and tier[0] > 0
            and isinstance(tier[1], Price)
        ):
            raise ConfigError(
                "Price.long_prompt is (prompt tokens, Price) for prompts over that many tokens, "
                f"e.g. (100_000, Price(0.5, 2.5, 0.625, 0.05)); got {tier!r}"
            )

    def __repr__(self) -> str:
        tier = "" if self.long_prompt is None else f", long_prompt={self.long_prompt!r}"
        return (
            f"Price(input={self.input}, output={self.output}, cache_write={self.cache_write}, "
            f"cache_read={self.cache_read}{tier})"
        )

    @classmethod
    def standard(cls, input: float, output: float) -> Price:
        """Anthropic's usual ratios: cache writes 1.25x input, cache reads 0.1x."""
        return cls(input, output, input * 1.25, input * 0.1)

    def cost(self, usage: Usage) -> float:
        if self.long_prompt is not None:
            threshold, over = self.long_prompt
            prompt = (
                usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens
            )
            if prompt > threshold:
                return over.cost(usage)
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000

    def input_cost(self, usage: Usage) -> float:
        """What the prompt cost: everything but the output."""
        return self.cost(replace(usage, output_tokens=0))

    def request_cost(
        self, input_tokens: int, max_output_tokens: int, previous: Usage | None = None
    ) -> float:
        """The most a request could cost before it is sent: its input, and all the output
        it may write. When the ``previous`` call used the prompt cache, what it cached is
        read back at the cache-read price and the rest of the prompt is written to the
        cache; otherwise the prompt is plain input."""
        cached = 0
        if previous is not None:
            cached = previous.cache_read_input_tokens + previous.cache_creation_input_tokens
        if cached:
            cached = min(cached, input_tokens)
            usage = Usage(
                input_tokens=0,
                output_tokens=max_output_tokens,
                cache_creation_input_tokens=input_tokens - cached,
                cache_read_input_tokens=cached,
            )
        else:
            usage = Usage(input_tokens=input_tokens, output_tokens=max_output_tokens)
        return self.cost(usage)


_OPUS_LEGACY = Price(15.0, 75.0, 18.75, 1.50)
_OPUS = Price(5.0, 25.0, 6.25, 0.50)
_SONNET = Price(3.0, 15.0, 3.75, 0.30)
_FABLE = Price(10.0, 50.0, 12.50, 1.00)

DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        "claude-fable-5-1": replace(_FABLE, cache_read=0.25),
        "claude-fable-5": _FABLE,
        "claude-opus-5-5": Price(4.0, 20.0, 5.0, 0.20),
        "claude-opus-5": _OPUS,
        "claude-opus-4-8": _OPUS,
        "claude-opus-4-7": _OPUS,
        "claude-opus-4-6": _OPUS,
        "claude-opus-4-5": _OPUS,
        "claude-opus-4-1": _OPUS_LEGACY,
        "claude-opus-4": _OPUS_LEGACY,
        "claude-3-opus": _OPUS_LEGACY,
        "claude-sonnet-5-5": Price(2.0, 10.0, 2.50, 0.10),
        "claude-sonnet-5": Price(2.0, 10.0, 2.50, 0.20),
        "claude-sonnet-4-6": _SONNET,
        "claude-sonnet-4-5": _SONNET,
        "claude-sonnet-4": _SONNET,
        "claude-3-7-sonnet": _SONNET,
        "claude-haiku-5-5": Price(
            0.10, 0.50, 0.125, 0.01, long_prompt=(100_000, Price(0.50, 2.50, 0.625, 0.05))
        ),
        "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
        "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
        "claude-3-haiku": Price(0.25, 1.25, 0.30, 0.03),
    }
)
"""Checked against https://platform.claude.com/docs/en/about-claude/pricing and the models'
pages; a model left out costs NaN, and ``prices=`` adds or overrides any."""

_SNAPSHOT = re.compile(r"-(\d{8}|latest)$")


def price_key(model: str) -> str:
    """``claude-sonnet-4-5-20250929`` and ``claude-sonnet-4-5-latest`` price as
    ``claude-sonnet-4-5``."""
    return _SNAPSHOT.sub("", model.strip())


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model id; ``PriceTable({"my-model": Price(...)})`` adds to or overrides the
    defaults."""

    prices: Mapping[str, Price] = field(default_factory=lambda: DEFAULT_PRICES)

    def __post_init__(self) -> None:
        if not isinstance(self.prices, Mapping):
            raise ConfigError("prices maps model ids to gr.Price(input, output, ...)")
        merged = {**DEFAULT_PRICES}
        for name, price in self.prices.items():
            if not isinstance(price, Price):
                raise ConfigError(
                    f"prices[{name!r}] must be a gr.Price (USD per million tokens), e.g. "
                    f"Price.standard(3.0, 15.0); got {price!r}"
                )
            merged[price_key(str(name))] = price
        object.__setattr__(self, "prices", MappingProxyType(merged))

    def price_of(self, model: str) -> Price | None:
        return self.prices.get(price_key(model))

    def cost(self, model: str, usage: Usage) -> float:
        """USD for one call, or NaN when the model has no price."""
        price = self.price_of(model)
        return price.cost(usage) if price else math.nan


@runtime_checkable
class Priced(Protocol):
    """A model that knows what its calls cost: the adapters, from their price table."""

    def price(self) -> Price | None:
        """The price of this model's calls; None when its table does not know the model."""
        ...


def price_of_model(model: object) -> Price | None:
    """The model's own price, when it has one (:class:`Priced`)."""
    if isinstance(model, Priced):
        price = model.price()
        return price if isinstance(price, Price) else None
    return None


def warn_unpriced(model: str, warned: set[str]) -> None:
    """Say once per adapter and model id that its cost is NaN, and how to price it: a
    warning on every call would drown the log, and silence hides a blank cost column."""
    if model in warned:
        return
    warned.add(model)
    logger.warning(
        "no price for model %r: its cost is NaN (shown blank); pass prices={%r: "
        "gr.Price(input, output, cache_write, cache_read)} (USD per million tokens) to price it",
        model,
        price_key(model),
    )
