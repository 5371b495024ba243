"""Guardrails: tool policies, feedback providers, task-completion checks and budgets.

Seed 002's three mechanisms, declared on the agent definition (``gr.Agent(policies=...,
feedback_providers=..., task_completion_checker=...)``) so they hold on every model, and
the :class:`Budget` they are bypassed or bounded by.
"""

from __future__ import annotations

from gr_notebook.guardrails.approval import (
    ApprovalAnswer,
    ApprovalDesk,
    ApprovalPolicy,
    ApprovalRequest,
)
from gr_notebook.guardrails.budget import Budget, BudgetSuggestion, BudgetUsage, Deadline
from gr_notebook.guardrails.budget_table import BudgetTable, TaskAssessment, TaskBudget
from gr_notebook.guardrails.completion import (
    CompositeChecker,
    FileOutputChecker,
    PlanBasedChecker,
    TaskCompletionChecker,
    TaskCompletionContext,
    TaskCompletionResult,
)
from gr_notebook.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    FeedbackProvider,
    FeedbackProviderConfig,
    FeedbackTrigger,
    FileCreatedTrigger,
    Observation,
    ToolCallRecord,
    render_feedback,
)
from gr_notebook.guardrails.feedback_providers import DeadlineFeedback, StaticFeedbackProvider
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionConfig,
    InterventionEngine,
    ProgressSignal,
    ProgressTracker,
    ToolStep,
    pass_count_and_todos,
    pass_count_todos_and_first_reads,
)
from gr_notebook.guardrails.paths import canonical_path
from gr_notebook.guardrails.policies import ReadBeforeWritePolicy, SequentialDependencyPolicy
from gr_notebook.guardrails.policy import (
    PolicyContext,
    PolicyDecision,
    PolicyMemory,
    PolicyState,
    ToolPolicy,
)
from gr_notebook.guardrails.regulation import (
    ConfirmationRequest,
    Confirmer,
    ProgressSummary,
    ResourceReport,
)
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.shadow import Shadow, ShadowSpec
from gr_notebook.guardrails.spec import GuardrailSpec

__all__ = [
    "ApprovalAnswer",
    "ApprovalDesk",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Budget",
    "BudgetSuggestion",
    "BudgetTable",
    "BudgetUsage",
    "CompositeChecker",
    "ConfirmationRequest",
    "Confirmer",
    "Deadline",
    "DeadlineFeedback",
    "Feedback",
    "FeedbackContext",
    "FeedbackProvider",
    "FeedbackProviderConfig",
    "FeedbackTrigger",
    "FileCreatedTrigger",
    "FileOutputChecker",
    "GuardrailSpec",
    "Guardrails",
    "InterventionCheck",
    "InterventionConfig",
    "InterventionEngine",
    "Observation",
    "PlanBasedChecker",
    "PolicyContext",
    "PolicyDecision",
    "PolicyMemory",
    "PolicyState",
    "ProgressSignal",
    "ProgressSummary",
    "ProgressTracker",
    "ReadBeforeWritePolicy",
    "ResourceReport",
    "SequentialDependencyPolicy",
    "Shadow",
    "ShadowSpec",
    "StaticFeedbackProvider",
    "TaskAssessment",
    "TaskBudget",
    "TaskCompletionChecker",
    "TaskCompletionContext",
    "TaskCompletionResult",
    "ToolCallRecord",
    "ToolPolicy",
    "ToolStep",
    "canonical_path",
    "pass_count_and_todos",
    "pass_count_todos_and_first_reads",
    "render_feedback",
]
