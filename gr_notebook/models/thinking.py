"""Claude's extended thinking, as :class:`~gr_notebook.models.AnthropicModel` asks for it.

``thinking=4096`` gives each response a budget of thinking tokens (``type: "enabled"``);
``thinking="adaptive"`` lets the model decide how much to think, where it can; a
:class:`Thinking` value says the same and can also choose the ``display``. Which model takes
which is in the catalog (:mod:`~gr_notebook.models.catalog`); a request the API would refuse
is refused here first, with a line that says what to pass instead, so a notebook cell fails
at the line that is wrong, not at the first request.

The blocks themselves are plain values of the conversation
(:class:`~gr_notebook.messages.ThinkingBlock`), kept and sent back whatever this says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from gr_notebook.errors import ConfigError
from gr_notebook.models.catalog import INTERLEAVED_THINKING_BETA, MODELS, ModelFacts

__all__ = ["MIN_BUDGET", "Display", "Thinking", "as_thinking", "check_thinking"]

MIN_BUDGET = 1024
"""The smallest ``budget_tokens`` the API takes."""

Display: TypeAlias = Literal["summarized", "omitted"]
_DISPLAYS: tuple[Display, ...] = ("summarized", "omitted")


@dataclass(frozen=True, slots=True)
class Thinking:
    """``gr.models.Thinking(4096)``: a budget of thinking tokens per response;
    ``gr.models.Thinking("adaptive")``: the model decides. ``display`` asks for the thinking text
    ``"summarized"`` (the default: what the dashboard shows) or ``"omitted"`` (signature
    only); None sends nothing, and the model's default holds, which is ``"omitted"`` from
    Claude Opus 4.7 on."""

    budget: int | Literal["adaptive"] = "adaptive"
    display: Display | None = "summarized"

    def __post_init__(self) -> None:
        budget = self.budget
        if budget != "adaptive" and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigError(
                f"thinking takes a token budget (e.g. thinking=4096) or 'adaptive', got {budget!r}"
            )
        if isinstance(budget, int) and budget < MIN_BUDGET:
            raise ConfigError(
                f"thinking={budget}: the API's smallest thinking budget is {MIN_BUDGET} "
                f"tokens; pass thinking={MIN_BUDGET} or more"
            )
        if self.display is not None and self.display not in _DISPLAYS:
            raise ConfigError(
                f"display is 'summarized' or 'omitted' (or None: the model's default), "
                f"got {self.display!r}"
            )

    @property
    def adaptive(self) -> bool:
        return self.budget == "adaptive"

    def param(self) -> dict[str, Any]:
        """The request's ``thinking`` value."""
        value: dict[str, Any] = (
            {"type": "adaptive"}
            if self.budget == "adaptive"
            else {"type": "enabled", "budget_tokens": self.budget}
        )
        if self.display is not None:
            value["display"] = self.display
        return value


def as_thinking(value: object) -> Thinking | None:
    """``thinking=`` as given (None, a budget, ``"adaptive"`` or a :class:`Thinking`)."""
    if value is None or isinstance(value, Thinking):
        return value
    if isinstance(value, str) and value != "adaptive":
        raise ConfigError(f"thinking is a token budget (e.g. 4096) or 'adaptive', got {value!r}")
    return Thinking(value)  # type: ignore[arg-type]  # checked there, with its own message


def check_thinking(
    model: str, thinking: Thinking, facts: ModelFacts, *, max_tokens: int
) -> tuple[str, ...]:
    """Refuse what the API would refuse for ``model``, one line saying what to pass instead;
    the ``anthropic-beta`` values the request then needs (interleaved thinking)."""
    support = facts.thinking
    if support == "none":
        raise ConfigError(
            f"{model} has no extended thinking; use a model that has it, e.g. "
            f"AnthropicModel('claude-sonnet-4-6', thinking=4096), or leave thinking off"
        )
    if thinking.adaptive and support == "budget":
        raise ConfigError(
            f"{model} has no adaptive thinking; give it a budget (e.g. thinking=4096), or use "
            f"a model that thinks adaptively: {', '.join(_models_with('adaptive'))}"
        )
    if not thinking.adaptive and support == "adaptive":
        raise ConfigError(
            f"{model} takes only adaptive thinking, not a budget; pass thinking='adaptive'"
        )
    if isinstance(thinking.budget, int) and thinking.budget >= max_tokens:
        raise ConfigError(
            f"thinking={thinking.budget} must be below max_tokens ({max_tokens}), which "
            f"covers the thinking and the reply: raise max_tokens (e.g. "
            f"max_tokens={thinking.budget + 8192}) or lower the budget"
        )
    if not thinking.adaptive and facts.interleaved_beta:
        return (INTERLEAVED_THINKING_BETA,)
    return ()


def _models_with(kind: Literal["adaptive"]) -> list[str]:
    return [name for name, facts in MODELS.items() if facts.thinking in (kind, "both")]
