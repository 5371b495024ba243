"""``Toolset``: tools that belong together, with the policies that govern them.

Apart from :mod:`gr_notebook.tools.base` because a policy names the tools it checks: the
tool definitions sit below the guardrails, and a toolset, which holds both, above them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gr_notebook.errors import ConfigError
from gr_notebook.tools.base import Tool

if TYPE_CHECKING:
    from gr_notebook.guardrails.policy import ToolPolicy

__all__ = ["Toolset", "flatten_tools"]


@dataclass(frozen=True, slots=True)
class Toolset:
    """Tools that belong together, passed to ``gr.Agent(tools=...)`` as one unit, with the
    policies that govern them: a policy given here applies to these tools only."""

    tools: Sequence[Tool]
    name: str = ""
    policies: Sequence[ToolPolicy] = ()


def flatten_tools(items: Iterable[Tool | Toolset]) -> list[Tool]:
    tools: list[Tool] = []
    for item in items:
        if isinstance(item, Toolset):
            tools.extend(item.tools)
        elif isinstance(item, Tool):
            tools.append(item)
        else:
            raise ConfigError(
                f"tools= takes gr.Tool or gr.Toolset objects, got {type(item).__name__}"
            )
    return tools
