"""Looks tools up by name and runs a call with validation and error capture."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gr_notebook.errors import ConfigError, GrNotebookError
from gr_notebook.models.base import INVALID_ARGUMENTS, ToolSpec
from gr_notebook.tools.base import Tool, ToolContext, ToolOutput
from gr_notebook.tools.schema import validate

__all__ = ["ToolRegistry"]


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ConfigError(f"two tools are named '{tool.name}'; give each a unique name")
            self._tools[tool.name] = tool
        self._specs = tuple(t.spec() for t in self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A registry with these tools after this one's; a name already taken is an error."""
        return ToolRegistry([*self._tools.values(), *tools])

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def check_call(self, name: str, params: Any) -> tuple[Tool | None, ToolOutput | None]:
        """Find the tool and validate the arguments; the output is the error, if any."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools))
            return None, ToolOutput(f"Unknown tool '{name}'. Available tools: {known}.", True)
        if isinstance(params, Mapping) and INVALID_ARGUMENTS in params:
            bad = params[INVALID_ARGUMENTS]
            problem = bad.get("problem", "") if isinstance(bad, Mapping) else ""
            return tool, ToolOutput(
                f"Not run: the arguments of {name} were not valid JSON: {problem}; call it "
                "again with a JSON object",
                True,
            )
        problems = validate(tool.input_schema, params)
        if problems:
            listed = "; ".join(problems)
            return tool, ToolOutput(f"Invalid arguments for {name}: {listed}.", True)
        return tool, None

    @staticmethod
    async def invoke(tool: Tool, context: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
        """Run the handler, awaiting it if it is async; a ToolError or any other library
        error becomes an is_error result the model can act on."""
        try:
            result = tool.handler(context, params)
            if inspect.isawaitable(result):
                result = await result
        except GrNotebookError as exc:
            return ToolOutput(f"Error: {exc}", True)
        return result if isinstance(result, ToolOutput) else ToolOutput(str(result))
