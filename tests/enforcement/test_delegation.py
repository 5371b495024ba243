"""On the Claude Agent SDK, a policy governs the tool that starts a subagent too: denied, the
subagent never starts, and none of the calls it would have made runs. (The CLI's ``init``
message names that tool ``Task`` and its hooks ``Agent``; a policy bound only to the names
the session announced was never asked about it.)"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from tests.enforcement.drive_claude_sdk import DELEGATE, ClaudeAgentSDKDriver
from tests.enforcement.scenarios import BY_KEY, Scenario

# the SDK session pre-approves every tool, so that only the guardrails' hook can stop a call
pytestmark = pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")

REASON = "do the audit yourself, with the tools you have"


class NoDelegation:
    name = "no_delegation"

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if tool.name in ("Agent", "Task"):
            return gr.PolicyDecision.deny(REASON)
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


def no_delegation(_scenario: Scenario) -> NoDelegation:
    return NoDelegation()


async def test_a_denied_delegation_starts_no_subagent(tmp_path: Path) -> None:
    played = await ClaudeAgentSDKDriver(no_delegation).play(BY_KEY["f"], tmp_path)
    assert played.runs == {"purge": 0, "lookup": 0}  # the subagent never ran
    assert played.decisions == ((DELEGATE, False),)
    assert REASON in played.told["toolu_delegate"]  # the main thread read why
