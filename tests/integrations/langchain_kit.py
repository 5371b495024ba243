"""LangChain agents over a gr script, offline: the real ``create_agent`` and a fake chat
model that calls tools (LangChain's ``GenericFakeChatModel``, whose base ``bind_tools`` is
not implemented, with one that returns the model itself)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import ToolCall

import gr_notebook as gr
from gr_notebook.integrations.langchain import guardrail_middleware
from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models import ModelResponse


class ToolModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools (it calls what its script says)."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 (pydantic field, replaced per instance)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def ai_messages(script: Sequence[ModelResponse]) -> list[AIMessage]:
    """gr's script as the AIMessages a chat model returns: text, tool calls (with ids)."""
    out = []
    for turn, response in enumerate(script, 1):
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        calls = [
            ToolCall(name=b.name, args=dict(b.input), id=b.id or f"call_{turn}_{i}")
            for i, b in enumerate(response.content)
            if isinstance(b, ToolUseBlock)
        ]
        out.append(AIMessage(content=text, tool_calls=calls))
    return out


def tool_model(script: Sequence[ModelResponse]) -> ToolModel:
    return ToolModel(messages=iter(ai_messages(script)), seen=[])


@dataclass
class LangChainSession:
    middleware: Any
    model: ToolModel
    messages: list[BaseMessage]

    @property
    def run(self) -> gr.Run:
        return self.middleware.run


async def langchain_session(
    agent: gr.Agent,
    script: Sequence[ModelResponse],
    ws: Path,
    *,
    tools: Sequence[Any] = (),
    sync: bool = False,
    **options: Any,
) -> LangChainSession:
    """One LangChain agent session of ``agent``'s guardrails over the (gr) ``script``."""
    mw = guardrail_middleware(agent, cwd=ws, **options)
    model = tool_model(script)
    app = create_agent(model, tools=list(tools), middleware=[mw])
    prompt = {"messages": [{"role": "user", "content": "Do the job."}]}
    out = app.invoke(prompt) if sync else await app.ainvoke(prompt)
    return LangChainSession(mw, model, list(out["messages"]))
