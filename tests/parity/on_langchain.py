"""Runtime 3: LangChain's ``create_agent`` with the agent's guardrails as middleware, a fake
chat model that calls tools, and the counting tools as LangChain tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.integrations.langchain import guardrail_middleware
from tests.enforcement.counting import Counter
from tests.enforcement.drive_langchain import langchain_tools
from tests.integrations.langchain_kit import ToolModel, ai_messages
from tests.parity.runtime import Observed, observed, refused, script
from tests.parity.scenarios import Case


class LangChain:
    key = "langchain"
    name = "LangChain create_agent"

    async def play(self, case: Case, root: Path) -> Observed:
        from langchain.agents import create_agent

        counter = Counter(root / "counts")
        (root / "ws").mkdir(parents=True, exist_ok=True)
        try:  # the agent's own model makes no call here: None needs no price
            agent = gr.Agent(None, workspace=root / "ws", store=False, **case.agent_options())
            middleware = guardrail_middleware(
                agent, cwd=root / "ws", gr_tools=False, model=case.model
            )
        except ConfigError as exc:
            return refused(exc, counter)
        model = ToolModel(messages=iter(replies(case)), seen=[])
        app = create_agent(model, tools=langchain_tools(counter), middleware=[middleware])
        prompt: Any = {"messages": [{"role": "user", "content": "Do the job."}]}
        try:
            await app.ainvoke(prompt)
        except Exception as exc:  # the run records how it ended; the cell shows it
            if not middleware.run.done:
                raise
            del exc
        return observed(middleware.run, counter)


def replies(case: Case) -> list[Any]:
    """The script as the chat model's replies, naming the case's model and, for the limits'
    rows, reporting the case's usage."""
    out = ai_messages(script(case))
    for message in out:
        message.response_metadata = {"model_name": case.model}
        if case.usage is not None:
            tokens = case.usage.input_tokens, case.usage.output_tokens
            message.usage_metadata = {
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
                "total_tokens": sum(tokens),
            }
    return out


RUNTIME = LangChain()
