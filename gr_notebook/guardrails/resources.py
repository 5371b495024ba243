"""What ``check_resources`` reports (seed 003): usage against the phase's allotment, else the
run's hard limits, with the seed's recommendation; and what reading a file is likely to cost.

An allotment the phase has outgrown is extended while the hard limits leave room, and past
that the report measures the hard limits: no report says more than 100% of the budget it
measures while the run is within its limits, since telling a model that obeys "120% used"
asks it to cut work the limits do not call for.

A value and its wording, apart from the session state in
:mod:`~gr_notebook.guardrails.regulation` that keeps the assessment they are measured
against, so the meters, the loop and the tools read one report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gr_notebook.eventdata import fields_json
from gr_notebook.guardrails.budget import BudgetUsage
from gr_notebook.guardrails.budget_table import TaskAssessment
from gr_notebook.guidance import Directive
from gr_notebook.limits import usd
from gr_notebook.workflow.todos import ARCHIVE_DIR
from gr_notebook.workflow.workspace import TOOL_DOCS_DIR, Workspace

__all__ = [
    "CAUTION",
    "HEALTHY",
    "WARNING",
    "WRAP_UP_AT",
    "ResourceReport",
    "allotment_in_force",
    "recommendation_for",
    "typical_file_tokens",
]

WARNING = "WARNING: Low on resources. Summarize and wrap up."
CAUTION = "CAUTION: Monitor usage carefully."
HEALTHY = "Resources healthy, continue."
WRAP_UP_AT = 80.0
"""Percent of a hard limit past which the run is told to wrap up (seed 003's 80% mark)."""
CHARS_PER_TOKEN = 4


def recommendation_for(percentage_used: float) -> str:
    """Seed 003's wording: above 80%, above 50%, otherwise."""
    if percentage_used > WRAP_UP_AT:
        return WARNING
    if percentage_used > 50:
        return CAUTION
    return HEALTHY


def allotment_in_force(
    usage: BudgetUsage, assessment: TaskAssessment | None
) -> TaskAssessment | None:
    """The allotment usage is measured against now: the assessment, extended as far as the
    phase has outgrown it within what the hard limits leave before their wrap-up mark. None
    without an assessment, or when the phase has outgrown even that."""
    if assessment is None:
        return None
    hard = usage.budget
    return assessment.covering(
        usage.tokens - assessment.tokens_at,
        usage.iterations - assessment.iterations_at,
        max_tokens=None
        if hard.max_tokens is None
        else int(hard.max_tokens * WRAP_UP_AT / 100) - assessment.tokens_at,
        max_iterations=int(hard.max_iterations * WRAP_UP_AT / 100) - assessment.iterations_at,
    )


def _recommend(percentage: float, limits: float, scope: str, *, last_turn: bool) -> str:
    """Only the hard limits can order a wrap-up: an allotment spent early while the limits
    have room asks for pace, not for the end of the job. A limit with one
    turn left orders it too, whatever its percentage: a wrap-up takes a turn."""
    if last_turn:
        return WARNING
    if limits > WRAP_UP_AT or percentage <= WRAP_UP_AT:
        return recommendation_for(max(percentage, limits))
    return (
        f"{CAUTION} {scope[:1].upper()}{scope[1:]} has used {percentage:.0f}% of its "
        f"allotment and the run's hard limits are {limits:.0f}% used: keep to your todo list, "
        "skip extra reads, and call summarize_progress at the next task boundary."
    )


@dataclass(frozen=True, slots=True)
class ResourceReport:
    """``check_resources``' answer. ``percentage_used`` is the larger of the token and the
    iteration fractions of the budget the agent is measured against (the assessed
    allotment in force, counted from the assessment, else the run's limits): whichever runs
    out first is the one to plan around. ``limits_percentage_used`` is the same for the
    run's hard limits, over the whole job, and only it can call for a wrap-up."""

    tokens_used: int
    tokens_budget: int | None
    tokens_remaining: int | None
    percentage_used: float
    iterations_used: int
    iterations_max: int
    iterations_remaining: int
    recommendation: str
    budget_source: str
    """``assessment`` when assess_task set the budget, ``limits`` for the run's own."""
    scope: str = "the run"
    limits_percentage_used: float = 0.0
    job_tokens_used: int = 0
    job_iterations_used: int = 0
    cost_used_usd: float | None = None
    """Dollars spent over the whole job; None without a cost limit."""
    cost_limit_usd: float | None = None

    @classmethod
    def of(cls, usage: BudgetUsage, assessment: TaskAssessment | None) -> ResourceReport:
        hard = usage.budget
        cap = hard.max_cost_usd
        limits = [usage.iterations / hard.max_iterations]
        if hard.max_tokens:
            limits.append(usage.tokens / hard.max_tokens)
        if hard.deadline_s:
            limits.append(usage.elapsed_s / hard.deadline_s)
        cost_fraction = None if cap is None else (usage.cost_usd / cap if cap else 1.0)
        if cost_fraction is not None:
            limits.append(cost_fraction)
        limits_pct = round(100 * max(limits), 1)
        per_turn = usage.tokens / usage.iterations if usage.iterations else 0.0
        cost_per_turn = usage.cost_usd / usage.iterations if usage.iterations else 0.0
        cost_last = cap is not None and cap - usage.cost_usd <= cost_per_turn
        last_turn = (
            hard.max_iterations - usage.iterations <= 1
            or (hard.max_tokens is not None and hard.max_tokens - usage.tokens <= per_turn)
            or cost_last
        )
        tokens_budget: int | None
        allotment = allotment_in_force(usage, assessment)
        if allotment is not None:
            tokens_used = usage.tokens - allotment.tokens_at
            iterations_used = usage.iterations - allotment.iterations_at
            tokens_budget, iterations_max = allotment.token_budget, allotment.max_iterations
            source, scope = "assessment", allotment.scope
        else:
            tokens_used, iterations_used = usage.tokens, usage.iterations
            tokens_budget, iterations_max, source = hard.max_tokens, hard.max_iterations, "limits"
            scope = "the run"
        fractions = [iterations_used / iterations_max]
        if tokens_budget:
            fractions.append(tokens_used / tokens_budget)
        percentage = round(100 * max(fractions), 1) if source == "assessment" else limits_pct
        recommendation = _recommend(percentage, limits_pct, scope, last_turn=last_turn)
        if (
            recommendation == WARNING
            and cap is not None
            and cost_fraction is not None
            and (cost_last or round(100 * cost_fraction, 1) >= limits_pct)
        ):
            recommendation = (
                f"{WARNING} The cost limit is {min(100 * cost_fraction, 100):.0f}% spent: "
                f"{usd(usage.cost_usd)} of {usd(cap)}."
            )
        return cls(
            tokens_used=tokens_used,
            tokens_budget=tokens_budget,
            tokens_remaining=None if tokens_budget is None else tokens_budget - tokens_used,
            percentage_used=percentage,
            iterations_used=iterations_used,
            iterations_max=iterations_max,
            iterations_remaining=iterations_max - iterations_used,
            recommendation=recommendation,
            budget_source=source,
            scope=scope,
            limits_percentage_used=limits_pct,
            job_tokens_used=usage.tokens,
            job_iterations_used=usage.iterations,
            cost_used_usd=None if cap is None else round(usage.cost_usd, 6),
            cost_limit_usd=cap,
        )

    @property
    def wrap_up(self) -> bool:
        """The report orders a wrap-up: a hard limit is nearly spent (under a cost limit
        the order names it)."""
        return self.recommendation.startswith(WARNING)

    def named_order(self) -> Directive | None:
        """The wrap-up order in words that name its limit, when they name one (the cost
        limit, which the model never sees otherwise): what the loop says when it orders the
        wrap-up itself. None otherwise."""
        if not self.wrap_up or self.recommendation == WARNING:
            return None
        return Directive(self.recommendation, "limits", "wrap_up", from_limits=True)

    def to_json(self) -> dict[str, Any]:
        """Every field; the cost ones only under a cost limit."""
        data = fields_json(self)
        if self.cost_limit_usd is None:
            del data["cost_used_usd"], data["cost_limit_usd"]
        return data


def typical_file_tokens(workspace: Workspace) -> float:
    """The mean size of the job's files, in tokens (four characters each), leaving out the
    system's own tool docs and archive; what reading one more file is likely to cost."""
    sizes = []
    for path in workspace.files():
        if workspace.relative(path).startswith((f"{TOOL_DOCS_DIR}/", f"{ARCHIVE_DIR}/")):
            continue
        try:
            sizes.append(path.stat().st_size)
        except OSError:  # removed while counting: it costs nothing to read
            continue
    return sum(sizes) / len(sizes) / CHARS_PER_TOKEN if sizes else 0.0
