"""The public API: a complete, sorted ``__all__`` and a core free of heavy imports."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import gr_notebook as gr


def test_all_is_sorted_and_every_name_exists() -> None:
    assert list(gr.__all__) == sorted(gr.__all__)
    for name in gr.__all__:
        assert hasattr(gr, name), name


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(gr).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations", "load_ipython_extension", "unload_ipython_extension")
    }
    # Dashboard loads ipywidgets on use, AnthropicModel and OpenAIModel their SDKs
    assert public | {"Dashboard", "AnthropicModel", "OpenAIModel"} == set(gr.__all__)


# What a notebook types: the root stays this small; the rest has a home below.
ROOT = [
    "Agent",
    "AnthropicModel",
    "ApprovalPolicy",
    "Budget",
    "BudgetTable",
    "ConfigError",
    "Dashboard",
    "DeadlineFeedback",
    "Event",
    "Experiment",
    "FakeClock",
    "Feedback",
    "FeedbackProviderConfig",
    "FeedbackTrigger",
    "FileCreatedTrigger",
    "FileOutputChecker",
    "FunctionModel",
    "GrNotebookError",
    "InterventionConfig",
    "MCPServer",
    "Observation",
    "OpenAIModel",
    "PlanBasedChecker",
    "PolicyDecision",
    "Price",
    "PriceTable",
    "ReadBeforeWritePolicy",
    "Run",
    "RunError",
    "ScriptedModel",
    "SequentialDependencyPolicy",
    "SimulatedModel",
    "StaticFeedbackProvider",
    "Store",
    "Tool",
    "ToolError",
    "Toolset",
    "Workspace",
    "backtest",
    "compare",
    "current_run",
    "fork",
    "lint_guidance",
    "replay_guardrails",
    "resume",
    "runs_df",
    "sweep_guardrails",
    "text",
    "tool_call",
    "tool_calls",
]

# Every name that left the root, and the submodule that is its home.
HOMES = {
    "gr_notebook.errors": [
        "MCPServerError",
        "ModelError",
        "ModelSpecError",
        "PlanError",
        "ScriptExhausted",
        "StoreError",
        "TodoError",
        "WorkspaceError",
    ],
    "gr_notebook.events": ["EventLog"],
    "gr_notebook.guardrails": [
        "BudgetSuggestion",
        "CompositeChecker",
        "ConfirmationRequest",
        "FeedbackContext",
        "FeedbackProvider",
        "InterventionCheck",
        "PolicyContext",
        "PolicyState",
        "ProgressSummary",
        "ResourceReport",
        "TaskAssessment",
        "TaskBudget",
        "TaskCompletionChecker",
        "TaskCompletionContext",
        "TaskCompletionResult",
        "ToolPolicy",
    ],
    "gr_notebook.messages": [
        "Message",
        "RedactedThinkingBlock",
        "TextBlock",
        "ThinkingBlock",
        "ToolResultBlock",
        "ToolUseBlock",
        "Usage",
    ],
    "gr_notebook.models": ["Model", "ModelRequest", "ModelResponse", "Thinking"],
    "gr_notebook.tools": ["CodeTest", "CodingTask", "ToolContext", "ToolOutput", "coding_tools"],
    "gr_notebook.workflow": [
        "JobResult",
        "Phase",
        "Plan",
        "SameStateDetector",
        "Step",
        "StuckDetector",
        "TodoItem",
        "TodoList",
    ],
    "gr_notebook.guidance": ["Directive"],
    "gr_notebook.run": ["Limits"],
    "gr_notebook.review.lint": ["GuidanceConflict"],
}


def test_the_root_holds_what_a_notebook_types() -> None:
    assert gr.__all__ == ROOT


def test_every_name_that_left_the_root_is_public_in_its_home() -> None:
    for home, names in HOMES.items():
        module = importlib.import_module(home)
        for name in names:
            assert name in module.__all__, (home, name)
            assert hasattr(module, name), (home, name)
            assert not hasattr(gr, name), f"{name} is in {home}; the root keeps no second copy"


def test_each_home_lists_its_names_and_says_what_it_holds() -> None:
    for home in (*HOMES, "gr_notebook.testing"):
        module = importlib.import_module(home)
        for name in module.__all__:
            assert hasattr(module, name) or name in ("AnthropicModel", "OpenAIModel"), (home, name)
        first = (module.__doc__ or "").strip().splitlines()[0]
        assert first.endswith("."), f"{home} needs a one-line docstring: {first!r}"


def test_the_homes_read_as_attributes_of_the_root() -> None:
    assert gr.events.EventLog is importlib.import_module("gr_notebook.events").EventLog
    assert gr.models.ModelResponse.__module__ == "gr_notebook.models.base"
    assert gr.workflow.Plan.__module__ == "gr_notebook.workflow.plan"
    assert gr.errors.StoreError.__mro__[1] is gr.GrNotebookError


def test_contract_names_from_the_issue_are_public() -> None:
    for name in ("Workspace", "Agent", "Run", "ScriptedModel", "SimulatedModel", "runs_df"):
        assert name in gr.__all__
    for name in ("tool_call", "tool_calls", "text"):
        assert name in gr.__all__
    assert {"WorkspaceError", "ScriptExhausted"} <= set(gr.errors.__all__)
    assert "Plan" in gr.workflow.__all__


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = (
        "import sys, gr_notebook\n"
        "heavy = [m for m in ('IPython', 'ipywidgets', 'pandas', 'anthropic', 'openai',"
        # nor a patch of asyncio: a blocking wait runs on a loop of its own (decision 285)
        " 'nest_asyncio', 'nest_asyncio2')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_errors_share_one_base() -> None:
    for name in [*gr.__all__, *gr.errors.__all__]:
        value = getattr(gr, name, None) or getattr(gr.errors, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, gr.GrNotebookError), name
