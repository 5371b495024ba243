"""``can_use_tool`` for a session under the guardrails: a person answers a policy's ask.

A policy's ask reaches the CLI as ``permissionDecision: "ask"`` (see
:mod:`~gr_notebook.integrations.claude_agent_sdk.hooks`), and the CLI then asks
``can_use_tool``. This callback answers those calls with the run's approvals, as gr's own
loop does: the dashboard's desk, the agent's ``confirm=``, or nobody (a denial saying so).
An approval is ``PermissionResultAllow`` (``updated_input`` for an edit), a denial
``PermissionResultDeny(message=...)``, which Claude reads. Permission requests no policy
made go to the person's own ``can_use_tool``; without one they are denied, as the SDK
denies them when nobody is there to ask.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.approval import ApprovalPolicy
from gr_notebook.guardrails.spec import GuardrailSpec
from gr_notebook.integrations.claude_agent_sdk.hooks import HookCallbacks

__all__ = ["CanUseTool", "check_asks_reach_a_person"]

CanUseToolLike = Callable[[str, dict[str, Any], Any], Awaitable[Any]]


class CanUseTool:
    """The session's ``can_use_tool``: gr's approvals for the calls a policy asked about,
    the person's own callback (``theirs``) for the rest."""

    def __init__(
        self, sdk: ModuleType, callbacks: HookCallbacks, theirs: CanUseToolLike | None
    ) -> None:
        self._sdk, self._callbacks, self.theirs = sdk, callbacks, theirs

    async def __call__(self, tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        sdk, callbacks = self._sdk, self._callbacks
        tool_use_id = getattr(context, "tool_use_id", None)
        if callbacks.held(tool_use_id, tool_name) is None:
            if self.theirs is not None:
                return await self.theirs(tool_name, tool_input, context)
            return sdk.PermissionResultDeny(
                message=f"Not run: {tool_name} needs permission, and this session has no "
                "can_use_tool to ask. Carry on without it."
            )
        edited, denied = await callbacks.approve(tool_use_id, tool_name, tool_input)
        if denied is not None:
            return sdk.PermissionResultDeny(message=denied)
        return sdk.PermissionResultAllow(updated_input=dict(edited or tool_input))


def check_asks_reach_a_person(spec: GuardrailSpec, fields: Mapping[str, Any]) -> None:
    """Refuse the options under which the CLI would settle an approval policy's ask
    without asking ``can_use_tool``: a permission mode that approves or denies without
    asking, or ``allowed_tools`` that pre-approve a tool the policy asks about."""
    asked = [p for b in spec.bindings if isinstance(p := b.policy, ApprovalPolicy)]
    if not asked:
        return
    mode = fields.get("permission_mode")
    if mode in ("bypassPermissions", "dontAsk"):
        raise ConfigError(
            f"permission_mode={mode!r} settles every permission without asking, so the "
            "approval policy's questions would never reach a person; use 'default' or "
            "'acceptEdits'"
        )
    tools = {t for p in asked for t in p.tools}
    allowed = _names(fields.get("allowed_tools") or ())
    swallowed = sorted(allowed & (tools | {_claude(t) for t in tools}))
    if swallowed:
        raise ConfigError(
            f"allowed_tools pre-approves {', '.join(swallowed)}, which the approval policy "
            "asks a person about; drop it from allowed_tools"
        )


def _names(tools: Iterable[str]) -> set[str]:
    return {t.split("(", 1)[0] for t in tools if isinstance(t, str)}


def _claude(gr_name: str) -> str:
    return {"read_file": "Read", "write_file": "Write", "edit_file": "Edit"}.get(gr_name, gr_name)
