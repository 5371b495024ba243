"""The record of an order: what the model was told, with the state of the job at that
moment (its phase, the tasks and phases left, how much of each hard limit is used).

The run state makes one for every order it delivers (:meth:`RunState.guidance`);
:mod:`gr_notebook.review.lint` reads them back. It lives with the engine because it reads
the workflow and the budget, which the order itself (:class:`~gr_notebook.guidance.Directive`,
a shared value) must not know.
"""

from __future__ import annotations

from gr_notebook.eventdata import clip
from gr_notebook.events import GuidanceRecord
from gr_notebook.guardrails.budget import BudgetUsage
from gr_notebook.guidance import Directive
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import TodoList

__all__ = ["guidance_data", "limit_fractions"]


def limit_fractions(usage: BudgetUsage) -> dict[str, float | None]:
    """How much of each hard limit is used, in percent; None where no limit is set."""
    budget = usage.budget
    return {
        "tokens_pct": None
        if budget.max_tokens is None
        else round(100 * usage.tokens / budget.max_tokens, 1),
        "iterations_pct": round(100 * usage.iterations / budget.max_iterations, 1),
        "deadline_pct": None
        if budget.deadline_s is None
        else round(100 * usage.elapsed_s / budget.deadline_s, 1),
        "cost_pct": None
        if budget.max_cost_usd is None
        else (
            round(100 * usage.cost_usd / budget.max_cost_usd, 1) if budget.max_cost_usd else 100.0
        ),
    }


def guidance_data(
    directive: Directive,
    *,
    todos: TodoList,
    plan: Plan | None,
    usage: BudgetUsage,
    job_done: bool,
) -> GuidanceRecord:
    """The record of an order: the directive and the state of the job when it was given."""
    phases_left = sum(p.status != "complete" for p in plan.phases) if plan is not None else None
    fractions = limit_fractions(usage)
    used = [f for f in fractions.values() if f is not None]
    return GuidanceRecord(
        source=directive.source,
        action=directive.action,
        text=clip(directive.text),
        reads=directive.reads,  # tuples: no work for the garbage collector
        avoid_reads=directive.avoid_reads,
        from_limits=directive.from_limits,
        phase_name=todos.phase_name,
        phase_kind=todos.kind,
        tasks_left=todos.remaining,
        phases_left=phases_left,
        job_done=job_done,
        tokens_pct=fractions["tokens_pct"],
        iterations_pct=fractions["iterations_pct"],
        deadline_pct=fractions["deadline_pct"],
        limits_pct=max(used) if used else None,
        cost_pct=fractions["cost_pct"],
    )
