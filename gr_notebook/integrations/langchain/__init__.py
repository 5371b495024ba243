"""gr_notebook's guardrails inside LangChain v1 agents (the optional extra
``gr-notebook[langchain]``).

    mw = guardrail_middleware(agent)
    app = langchain.agents.create_agent(model, tools=[...], middleware=[mw])
    app.invoke({"messages": [{"role": "user", "content": "Fix the failing test"}]})
    mw.run.policy_df()

The policies, feedback providers, completion checker, budget, interventions and shadow
guardrails of a ``gr.Agent`` run, unchanged, in the middleware's hooks, and the session is a
``gr.Run``: the same events, store, DataFrames, lint and dashboard as a run of gr's own loop.
Importing this package does not import LangChain; :func:`guardrail_middleware` does.
"""

from __future__ import annotations

from gr_notebook.integrations.langchain.build import (
    EXTRA,
    FILE_TOOLS,
    guardrail_middleware,
    load_langchain,
)

__all__ = ["EXTRA", "FILE_TOOLS", "guardrail_middleware", "load_langchain"]
