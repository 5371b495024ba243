"""gr's own tools as LangChain tools: the middleware offers them (its ``tools``), so an app
keeps gr's file tools and the agent's own tools unchanged, run by gr's handlers in the
run's workspace, under the names the policies read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from gr_notebook.blocking import run_blocking
from gr_notebook.engine.state import RunState
from gr_notebook.tools.base import Tool
from gr_notebook.tools.registry import ToolRegistry

__all__ = ["as_langchain"]


def as_langchain(tools: Iterable[Tool], state: RunState) -> list[BaseTool]:
    return [_one(tool, state) for tool in tools]


def _one(tool: Tool, state: RunState) -> BaseTool:
    async def arun(**params: Any) -> str:
        return await _invoke(tool, state, params)

    def run(**params: Any) -> str:
        return run_blocking(_invoke(tool, state, params))

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=dict(tool.input_schema),
        func=run,
        coroutine=arun,
        handle_tool_error=True,
    )


async def _invoke(tool: Tool, state: RunState, params: Mapping[str, Any]) -> str:
    """The gr handler, with the run's tool context; an error result is LangChain's tool
    error (a ToolMessage with ``status="error"``)."""
    registry = ToolRegistry([tool])
    checked, problem = registry.check_call(tool.name, params)
    if problem is not None or checked is None:
        raise ToolException(problem.content if problem is not None else "Unknown tool.")
    output = await registry.invoke(checked, state.tool_context(), params)
    if output.is_error:
        raise ToolException(output.content)
    return output.content
