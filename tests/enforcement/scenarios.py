"""The scenarios of the matrix, in gr's terms: what the model calls, turn by turn, under
which policy, and which call must not run.

Every scenario has one call the policy refuses and one it allows, so that a zero is seen
beside a one: a tool that never counted anything proves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import gr_notebook as gr
from tests.enforcement.counting import mcp_name


@dataclass(frozen=True)
class Call:
    """One tool call the model makes: its id, the tool (gr's name), its input."""

    id: str
    tool: str
    key: str = "r-1"

    @property
    def input(self) -> dict[str, Any]:
        return {"key": self.key}

    @property
    def counted_as(self) -> str:
        """The tool's own name, which its count file bears (an MCP tool's, without the
        ``mcp__<server>__`` prefix)."""
        return self.tool.rsplit("__", 1)[-1]


Turn = tuple[Call, ...]

PolicyKind = Literal["refuse", "raise"]


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    turns: tuple[Turn, ...]
    """The model's tool turns (then a final answer); after a resume, the first session's."""
    denied: str
    allowed: str
    resumed: tuple[Turn, ...] = ()
    """The resumed session's tool turns, for a scenario that resumes."""
    delegated: bool = False
    """The main thread hands ``turns`` to a subagent, which makes the calls."""
    policy: PolicyKind = "refuse"
    mcp: bool = False
    """The calls go to tools of a real MCP server."""

    @property
    def id(self) -> str:
        return f"{self.key}-{self.title.replace(' ', '-').replace(',', '')}"

    @property
    def tools(self) -> tuple[str, str]:
        return (self.denied, self.allowed)

    @property
    def denied_calls(self) -> tuple[Call, ...]:
        calls = (c for turn in (*self.turns, *self.resumed) for c in turn)
        return tuple(c for c in calls if c.counted_as == self.denied)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "a",
        "a denied call",
        turns=((Call("toolu_a1", "purge"),), (Call("toolu_a2", "lookup"),)),
        denied="purge",
        allowed="lookup",
    ),
    Scenario(
        "b",
        "two calls in one turn, one denied",
        turns=((Call("toolu_b1", "purge"), Call("toolu_b2", "lookup")),),
        denied="purge",
        allowed="lookup",
    ),
    Scenario(
        "c",
        "a denied call after a resume",
        turns=((Call("toolu_c1", "lookup"),),),
        resumed=((Call("toolu_c2", "purge"),),),
        denied="purge",
        allowed="lookup",
    ),
    Scenario(
        "d",
        "a policy that raises",
        turns=((Call("toolu_d1", "purge"),), (Call("toolu_d2", "lookup"),)),
        denied="purge",
        allowed="lookup",
        policy="raise",
    ),
    Scenario(
        "e",
        "an MCP tool denied",
        turns=((Call("toolu_e1", mcp_name("drop_table")), Call("toolu_e2", mcp_name("query"))),),
        denied="drop_table",
        allowed="query",
        mcp=True,
    ),
    Scenario(
        "f",
        "a call made from a subagent",
        turns=((Call("toolu_f1", "purge"),), (Call("toolu_f2", "lookup"),)),
        denied="purge",
        allowed="lookup",
        delegated=True,
    ),
)

BY_KEY: Mapping[str, Scenario] = {s.key: s for s in SCENARIOS}


# -- the policies -----------------------------------------------------------------------------


class Refuse:
    """Refuses the destructive tools outright, and says what to do instead."""

    name = "no_destructive_tools"
    TOOLS = frozenset({"purge", mcp_name("drop_table")})

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if tool.name in self.TOOLS:
            return gr.PolicyDecision.deny(
                f"{tool.name} destroys records and is not allowed in this job; read them "
                "instead, and report what you found."
            )
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


class RulesLookup:
    """A policy with a bug: it looks every tool up in its table of rules, and a tool the
    table lacks raises KeyError. gr must fail closed: the call is not run."""

    name = "rules_table"
    RULES: Mapping[str, bool] = {"lookup": True, "Agent": True, "Task": True}

    def check(self, tool: gr.Tool, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if self.RULES[tool.name]:
            return gr.PolicyDecision.allow()
        return gr.PolicyDecision.deny(f"{tool.name} is off in the rules table")

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


def policy_for(scenario: Scenario) -> Refuse | RulesLookup:
    return RulesLookup() if scenario.policy == "raise" else Refuse()


TOLD = {
    "refuse": "destroys records and is not allowed in this job",
    "raise": "the policy failed while checking (KeyError",
}
"""What the model must read as the denied call's result, by the scenario's policy."""
