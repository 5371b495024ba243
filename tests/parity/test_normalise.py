"""The normalisation forgets the host's words and ids, and nothing a guardrail decided."""

from __future__ import annotations

from dataclasses import replace

from gr_notebook.events import ApprovalRequestedEvent, PolicyDecisionEvent
from tests.parity.normalise import guardrail_rows


def _ask(tool: str, tool_use_id: str, reason: str) -> list[object]:
    return [
        PolicyDecisionEvent(
            tool=tool,
            allowed=False,
            policy="approval",
            reason=reason,
            policies=["approval"],
            tool_use_id=tool_use_id,
            needs_approval=True,
        ),
        ApprovalRequestedEvent(
            request_id=f"approval-{tool_use_id}",
            tool=tool,
            tool_use_id=tool_use_id,
            input={"key": "r-1"},
            reason=reason,
            policies=["approval"],
            asked="confirmer",
        ),
    ]


def test_the_sdks_tool_name_ids_and_wording_are_forgotten() -> None:
    sdk = _ask("mcp__count__purge", "toolu_9", "mcp__count__purge is on the list")
    gr = _ask("purge", "toolu_s0000_0", "purge is on the list of tools a person approves")
    assert guardrail_rows(sdk) == guardrail_rows(gr)  # type: ignore[arg-type]
    assert guardrail_rows(gr) == (  # type: ignore[arg-type]
        ("policy", "live", "purge", "ask", "approval"),
        ("asked", "purge", '{"key": "r-1"}', "-"),
    )


def test_what_the_person_was_shown_is_kept() -> None:
    [_, edited] = _ask("lookup", "toolu_1", "asked")
    other = replace(edited, input={"key": "r-2"})  # type: ignore[type-var]
    assert guardrail_rows([edited]) != guardrail_rows([other])  # type: ignore[list-item]
