"""The guardrails the parity scenarios put on every runtime: small policies, confirmers and a
checker, each doing one thing so that a difference between runtimes points at one cause."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import gr_notebook as gr
from gr_notebook.guardrails import ApprovalAnswer, ApprovalRequest


class DenyPurge:
    """Denies ``purge`` outright."""

    name = "no_purge"

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if tool.name == "purge":
            return gr.PolicyDecision.deny("purge destroys records; read them instead")
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


class DenyKey:
    """Denies a call on one record: the live policy an approver's edit must pass too."""

    name = "no_r2"

    def __init__(self, key: str = "r-2") -> None:
        self.key = key

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if params.get("key") == self.key:
            return gr.PolicyDecision.deny(f"record {self.key} is sealed")
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


class OncePerKey:
    """Denies looking a record up twice: its memory holds the keys of the calls that ran, so
    a shadow that edits a call's input in place shows up here as a wrong denial."""

    name = "once_per_key"

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if context.state.has_key(tool.name, str(params.get("key"))):
            return gr.PolicyDecision.deny(f"record {params.get('key')!r} was looked up already")
        return gr.PolicyDecision.allow()

    def on_result(
        self, tool: gr.Tool, params: Mapping[str, Any], result: Any, *, context: Any
    ) -> None:
        context.state.record(tool.name, str(params.get("key")))


class TrimKeys:
    """A shadow policy with a bug: it tidies the input it was only meant to read."""

    name = "trim_keys"

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        params["key"] = str(params["key"]).strip()  # type: ignore[index]
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


class Broken:
    """A shadow policy that raises on every call."""

    name = "broken_shadow"

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        raise RuntimeError("the rules service is down")

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


class Answers:
    """A confirmer that gives its answers in turn (the last one from then on)."""

    def __init__(self, *answers: ApprovalAnswer | bool) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer | bool:
        self.asked.append(request)
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


async def slow_confirmer(request: ApprovalRequest) -> bool:
    """Answers long after an approval's timeout."""
    await asyncio.sleep(30)
    return True


class RefuseOnce:
    """A completion checker that refuses the first stop and accepts the next."""

    def __init__(self) -> None:
        self.judged = 0

    def check(self, context: Any) -> Any:
        from gr_notebook.guardrails.completion import TaskCompletionResult

        self.judged += 1
        if self.judged == 1:
            return TaskCompletionResult.incomplete("Look record r-9 up before you stop.")
        return TaskCompletionResult.ok("Every record asked for was looked up.")


def done(context: Any) -> Any:
    """A completion checker that finds the job done."""
    from gr_notebook.guardrails.completion import TaskCompletionResult

    return TaskCompletionResult.ok("The records asked for were looked up.")


PRICE = gr.Price(3.0, 15.0, 3.75, 0.30)
"""Claude Sonnet's list price, which the CLI's own ``max_budget_usd`` backstop counts in too:
10,000 input tokens a reply cost $0.03 on every runtime."""

STUCK = gr.InterventionConfig(
    check_every=1,
    min_steps_before_intervention=1,
    grace_period_after_reset=0,
    consecutive_stuck_tolerance=1,
)
"""Seed 004's tiers at the first repeat: a strategy check, a second one, then stuck."""

WATCHFUL = gr.InterventionConfig(check_every=1, min_steps_before_intervention=100)
"""Checks every call and never fires: each check is a row, until the run winds down."""
