"""The parity scenarios: what the model does, under which guardrails, and what must follow
on every runtime: the guardrail rows (:mod:`tests.parity.normalise`), the calls that ran
(with the record each ran on), and how the run ended.

The model's calls are the enforcement matrix's (:class:`tests.enforcement.scenarios.Call`,
an input ``{"key": ...}``); a script is its turns in order, a string being a final reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gr_notebook as gr
from gr_notebook.guardrails import ApprovalAnswer
from gr_notebook.messages import Usage
from tests.enforcement.scenarios import Call, Turn
from tests.parity.guardrails import (
    PRICE,
    STUCK,
    WATCHFUL,
    Answers,
    Broken,
    DenyKey,
    DenyPurge,
    OncePerKey,
    RefuseOnce,
    TrimKeys,
    done,
    slow_confirmer,
)
from tests.parity.normalise import Row

MODEL = "claude-sonnet-4-6"
"""The model every runtime's replies name: priced in gr's table, and known to the CLI."""
UNPRICED = "claude-next-9"
"""A model no price table knows."""
FINAL = "Done: the records are read."

Step = Turn | str
"""A model turn: its tool calls, or a final reply."""


@dataclass(frozen=True)
class Expected:
    """What must hold on every runtime."""

    rows: tuple[Row, ...]
    ran: Mapping[str, tuple[str, ...]]
    """The record (``key``) each execution of each tool ran on, in order."""
    reason: tuple[str, ...] = ()
    """Words the run's reason must hold."""
    spends: bool = True
    """False: the run must end before its first model call."""

    @property
    def status(self) -> str:
        return next(row[1] for row in self.rows if row[0] == "end")


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    script: tuple[Step, ...]
    guardrails: Callable[[], Mapping[str, Any]]
    """``gr.Agent``'s guardrail arguments, made afresh for each run (a confirmer counts)."""
    expected: Expected
    usage: Usage | None = None
    """Every reply's usage, for the limits' rows; None: each runtime's own estimate."""
    model: str = MODEL

    @property
    def id(self) -> str:
        return f"{self.key}-" + "-".join(self.title.replace("%", "pct").split())

    def agent_options(self) -> dict[str, Any]:
        return {"self_regulation": False, "interventions": None, **self.guardrails()}

    @property
    def asked_tools(self) -> frozenset[str]:
        """The tools an approval policy asks about (the SDK must not pre-approve them)."""
        policies = self.guardrails().get("policies", ())
        return frozenset(t for p in policies if isinstance(p, gr.ApprovalPolicy) for t in p.tools)


def lookup(key: str = "r-1", n: int = 1) -> Turn:
    return (Call(f"toolu_{key.strip()}_{n}", "lookup", key),)


def purge(key: str = "r-1") -> Turn:
    return (Call(f"toolu_purge_{key}", "purge", key),)


def _live(policy: str, tool: str = "lookup", verdict: str = "allow") -> Row:
    return ("policy", "live", tool, verdict, policy)


def _end(status: str = "ended") -> Row:
    return ("end", status)


def _asked(tool: str, key: str, problem: str = "-", **more: str) -> Row:
    return ("asked", tool, json.dumps({"key": key, **more}, sort_keys=True), problem)


def _answered(decision: str, by: str = "confirmer", problem: str = "-") -> Row:
    return ("answered", decision, by, problem)


def _approval(tools: list[str], **kwargs: Any) -> gr.ApprovalPolicy:
    return gr.ApprovalPolicy(tools=tools, **kwargs)


def _wrap_up_case(key: str, title: str, budget: gr.Budget, lookups: int, **more: Any) -> Case:
    """Lookups of 10,000 tokens a reply ($0.03 at :data:`PRICE`) until the limit is past 80%:
    the next turn starts with the order to wrap up, and from then on the calls are not
    watched for being stuck (the run is winding down, not stuck). A checker that finds the
    job done judges the stop everywhere (gr's loop would judge it by its own todo list)."""
    script: tuple[Step, ...] = (*(lookup(f"r-{i}") for i in range(1, lookups + 1)), FINAL)
    watched = tuple(("intervention", "live", "skip min_steps") for _ in range(9))
    return Case(
        key,
        title,
        script,
        lambda: {
            "budget": budget,
            "self_regulation": True,
            "interventions": WATCHFUL,
            "task_completion_checker": done,
            **more,
        },
        Expected(
            (*watched, ("wrap_up",), ("stop", "live", "bypassed"), _end("completed")),
            {"lookup": tuple(f"r-{i}" for i in range(1, lookups + 1)), "purge": ()},
        ),
        usage=Usage(10_000, 0),
    )


SHADOW_ROWS: tuple[Row, ...] = (
    _live("-"),
    ("error", "shadow:policy", "TypeError"),
    ("policy", "shadow", "lookup", "deny", "trim_keys"),
)

CASES: tuple[Case, ...] = (
    Case(
        "1",
        "a policy denies purge",
        (purge(), lookup(), FINAL),
        lambda: {"policies": [DenyPurge()]},
        Expected(
            (_live("no_purge", "purge", "deny"), _live("-"), _end()),
            {"purge": (), "lookup": ("r-1",)},
        ),
    ),
    Case(
        "2",
        "an ask approved",
        (purge(), FINAL),
        lambda: {"policies": [_approval(["purge"])], "confirm": Answers(True)},
        Expected(
            (
                _live("approval", "purge", "ask"),
                _asked("purge", "r-1"),
                _answered("approve"),
                _end(),
            ),
            {"purge": ("r-1",), "lookup": ()},
        ),
    ),
    Case(
        "3",
        "an ask denied",
        (purge(), FINAL),
        lambda: {
            "policies": [_approval(["purge"])],
            "confirm": Answers(ApprovalAnswer.deny("look the record up instead")),
        },
        Expected(
            (
                _live("approval", "purge", "ask"),
                _asked("purge", "r-1"),
                _answered("deny"),
                _end(),
            ),
            {"purge": (), "lookup": ()},
        ),
    ),
    Case(
        "4",
        "an ask answered with an edit",
        (lookup(), FINAL),
        lambda: {
            "policies": [_approval(["lookup"])],
            "confirm": Answers(ApprovalAnswer.edit({"key": "r-2"})),
        },
        Expected(
            (
                _live("approval", "lookup", "ask"),
                _asked("lookup", "r-1"),
                _answered("edit"),
                _live("approval", "lookup", "ask"),  # the edit meets every policy: the asker's
                _end(),  # ask is the question the person just answered
            ),
            {"lookup": ("r-2",), "purge": ()},
        ),
    ),
    Case(
        "5",
        "an edit another live policy denies",
        (lookup(), FINAL),
        lambda: {
            "policies": [_approval(["lookup"]), DenyKey("r-2")],
            "confirm": Answers(ApprovalAnswer.edit({"key": "r-2"})),
        },
        Expected(
            (
                _live("approval", "lookup", "ask"),
                _asked("lookup", "r-1"),
                _answered("edit"),
                _live("no_r2", "lookup", "deny"),
                _end(),
            ),
            {"lookup": (), "purge": ()},
        ),
    ),
    Case(
        "6",
        "an edit the schema refuses then approved",
        (lookup(), FINAL),
        lambda: {
            "policies": [_approval(["lookup"])],
            "confirm": Answers(ApprovalAnswer.edit({"key": 2}), True),
        },
        Expected(
            (
                _live("approval", "lookup", "ask"),
                _asked("lookup", "r-1"),
                _answered("edit", problem="problem"),
                ("asked", "lookup", json.dumps({"key": 2}), "problem"),
                _answered("approve"),
                _end(),  # the approved edit is what runs, and the tool refuses it: nothing ran
            ),
            {"lookup": (), "purge": ()},
        ),
    ),
    Case(
        "7",
        "an ask that times out",
        (purge(), FINAL),
        lambda: {"policies": [_approval(["purge"], timeout_s=0.5)], "confirm": slow_confirmer},
        Expected(
            (
                _live("approval", "purge", "ask"),
                _asked("purge", "r-1"),
                _answered("deny", "timeout"),
                _end(),
            ),
            {"purge": (), "lookup": ()},
        ),
    ),
    Case(
        "8",
        "a shadow that edits the input in place",
        (lookup(" r-1 "), lookup("r-1", 2), FINAL),
        lambda: {"policies": [OncePerKey()], "shadow": [TrimKeys()]},
        Expected((*SHADOW_ROWS, *SHADOW_ROWS, _end()), {"lookup": (" r-1 ", "r-1"), "purge": ()}),
    ),
    Case(
        "9",
        "a shadow that raises",
        (lookup(), FINAL),
        lambda: {"policies": [OncePerKey()], "shadow": [Broken()]},
        Expected(
            (
                _live("-"),
                ("error", "shadow:policy", "RuntimeError"),
                ("policy", "shadow", "lookup", "deny", "broken_shadow"),
                _end(),
            ),
            {"lookup": ("r-1",), "purge": ()},
        ),
    ),
    Case(
        "10",
        "feedback every 2 calls",
        (*(lookup(f"r-{i}") for i in range(1, 5)), FINAL),
        lambda: {
            "feedback_providers": [
                gr.FeedbackProviderConfig(
                    gr.StaticFeedbackProvider("Note each record's date.", name="Dates"),
                    gr.FeedbackTrigger(every_n_calls=2),
                )
            ]
        },
        Expected(
            (("feedback", "live", "Dates", "lookup"),) * 2 + (_end(),),
            {"lookup": ("r-1", "r-2", "r-3", "r-4"), "purge": ()},
        ),
    ),
    # 90,000 of 112,000 tokens: the tenth lookup comes after the order, and is not watched
    _wrap_up_case("11a", "wrap-up at 80% of the tokens", gr.Budget(max_tokens=112_000), 10),
    _wrap_up_case("11b", "wrap-up at 80% of the turns", gr.Budget(max_iterations=11), 9),
    _wrap_up_case(
        "11c", "wrap-up at 80% of the cost", gr.Budget(max_cost_usd=0.33), 9, price=PRICE
    ),
    Case(
        "12",
        "a cost cap on an unpriced model",
        (lookup(), FINAL),
        lambda: {"budget": gr.Budget(max_cost_usd=1.0)},
        Expected(
            (_end("failed"),),
            {"lookup": (), "purge": ()},
            reason=("ConfigError", repr(UNPRICED), "price=gr.Price("),
            spends=False,
        ),
        model=UNPRICED,
    ),
    Case(
        "13",
        "a stop refused then accepted",
        (lookup(), "All done.", lookup("r-9"), FINAL),
        lambda: {"task_completion_checker": RefuseOnce()},
        Expected(
            (("stop", "live", "refused"), ("stop", "live", "complete"), _end("completed")),
            {"lookup": ("r-1", "r-9"), "purge": ()},
        ),
    ),
    Case(
        "14",
        "stuck on the same call",
        (*(lookup("r-1", n) for n in range(1, 7)), FINAL),
        lambda: {"interventions": STUCK},
        Expected(
            (
                ("intervention", "live", "tier 1"),
                ("intervention", "live", "tier 2"),
                ("intervention", "live", "skip not_stuck"),
                ("intervention", "live", "tier 3"),
                _end("stuck"),
            ),
            {"lookup": ("r-1",) * 4, "purge": ()},
        ),
    ),
)

BY_KEY: Mapping[str, Case] = {c.key: c for c in CASES}
