"""gr_notebook's guardrails inside the Claude Agent SDK (the optional extra
``gr-notebook[claude-agent-sdk]``).

    hooks = guardrail_hooks(agent, cwd="project")
    async for message in hooks.query("Fix the failing test", permission_mode="acceptEdits"):
        ...
    hooks.run.policy_df()

The policies, feedback providers, completion checker, budget and interventions of a
``gr.Agent`` run, unchanged, in the session's ``PreToolUse``, ``PostToolUse`` and ``Stop``
hooks, and the session is a ``gr.Run``: the same events, store, DataFrames, lint and
dashboard as a run of gr's own loop.
"""

from __future__ import annotations

from gr_notebook.integrations.claude_agent_sdk.bridge import (
    EXTRA,
    GuardrailHooks,
    guardrail_hooks,
    load_sdk,
)
from gr_notebook.integrations.claude_agent_sdk.local import (
    ClaudeOrStandIn,
    claude_script,
    local_env,
    side_request,
)
from gr_notebook.integrations.claude_agent_sdk.tools import (
    CLAUDE_CODE_FILE_TOOLS,
    CLAUDE_CODE_TOOLS,
    ToolAlias,
)

__all__ = [
    "CLAUDE_CODE_FILE_TOOLS",
    "CLAUDE_CODE_TOOLS",
    "EXTRA",
    "ClaudeOrStandIn",
    "GuardrailHooks",
    "ToolAlias",
    "claude_script",
    "guardrail_hooks",
    "load_sdk",
    "local_env",
    "side_request",
]
