"""gr_notebook: guardrails that keep LLM agents on track during long tasks.

The core is plain Python: ``import gr_notebook`` pulls in neither IPython, ipywidgets,
pandas nor anthropic. The notebook face loads with ``%load_ext gr_notebook``.

The root holds what a notebook types. The rest has a home of its own: ``gr_notebook.errors``
(every error), ``.events`` (every event kind, the ``EventLog``), ``.guardrails`` (the
protocols and values behind policies, feedback, completion checks and budgets),
``.models`` (the ``Model`` protocol, requests and responses), ``.messages`` (content
blocks), ``.tools`` (tool outputs, the ``ToolContext`` a handler gets, the coding toolset),
``.workflow`` (plan, todos, phases), ``.labels`` (what the right verdict was at a recorded
point, read from a DataFrame or a CSV and kept in a store: ``gr.backtest`` scores against
them), ``.share`` (runs as one HTML file that opens anywhere: ``gr.share.export_html``) and
``.testing`` (local servers that speak the model APIs). What only an extension
reads stays in its home: a feedback provider's ``FeedbackContext`` and a ``confirm=``
callback's ``ConfirmationRequest`` are in ``.guardrails``.
"""

from __future__ import annotations

import logging
import typing

# The submodules that hold the rest of the public API, so that ``gr.events.EventLog``,
# ``gr.guardrails.ToolPolicy`` or ``gr.models.ModelResponse`` work after ``import gr_notebook``.
from gr_notebook import (  # noqa: F401
    errors,
    events,
    examples,
    guardrails,
    messages,
    models,
    share,
    tools,
    workflow,
)
from gr_notebook.agent import Agent
from gr_notebook.clock import FakeClock
from gr_notebook.display import reprs as _display_reprs
from gr_notebook.errors import ConfigError, GrNotebookError, RunError, ToolError
from gr_notebook.events import Event
from gr_notebook.guardrails import (
    ApprovalPolicy,
    Budget,
    BudgetTable,
    DeadlineFeedback,
    Feedback,
    FeedbackProviderConfig,
    FeedbackTrigger,
    FileCreatedTrigger,
    FileOutputChecker,
    InterventionConfig,
    Observation,
    PlanBasedChecker,
    PolicyDecision,
    ReadBeforeWritePolicy,
    SequentialDependencyPolicy,
    StaticFeedbackProvider,
)
from gr_notebook.guardrails.budget import set_advisor as _set_budget_advisor
from gr_notebook.history import labels  # noqa: F401 (gr.labels: reading and keeping labels)
from gr_notebook.history.adaptive import suggest_budget as _suggest_budget
from gr_notebook.history.analysis import runs_df
from gr_notebook.history.store import Store
from gr_notebook.models import (
    FunctionModel,
    Price,
    PriceTable,
    ScriptedModel,
    text,
    tool_call,
    tool_calls,
)
from gr_notebook.models.simulated.model import SimulatedModel
from gr_notebook.reprs import set_notebook_display as _set_notebook_display
from gr_notebook.review.backtest import backtest
from gr_notebook.review.compare import compare
from gr_notebook.review.guardrail_replay import replay_guardrails, sweep_guardrails
from gr_notebook.review.lint import lint_guidance
from gr_notebook.review.timetravel import fork, resume
from gr_notebook.review.timetravel import fork_run as _fork_run
from gr_notebook.run import Run, current_run
from gr_notebook.run import set_forker as _set_forker
from gr_notebook.run import set_sharer as _set_sharer
from gr_notebook.tools import Tool, Toolset
from gr_notebook.tools.mcp import MCPServer
from gr_notebook.workflow import Workspace

if typing.TYPE_CHECKING:
    from gr_notebook.experiments import Experiment
    from gr_notebook.jupyter.widgets import Dashboard
    from gr_notebook.models.anthropic_model import AnthropicModel
    from gr_notebook.models.openai_model import OpenAIModel

__version__ = "0.1.0"


def load_ipython_extension(ipython: typing.Any) -> None:
    """``%load_ext gr_notebook``: the magics module is imported only now."""
    from gr_notebook.jupyter.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: typing.Any) -> None:
    from gr_notebook.jupyter.magics import unload_ipython_extension as unload

    unload(ipython)


def _show_in_notebook(run: object) -> None:
    """A ``gr.Run`` shown in IPython: its card, live while the run is (ipywidgets loads now)."""
    from gr_notebook.jupyter.widgets import show_run

    show_run(run)


def _notebook_progress() -> typing.Any:
    """An experiment's live table in a Jupyter kernel (ipywidgets loads only then)."""
    from gr_notebook.jupyter.experiment_progress import notebook_progress

    return notebook_progress()


def __getattr__(name: str) -> typing.Any:
    if name == "Dashboard":  # ipywidgets loads on first use, never on import gr_notebook
        from gr_notebook.jupyter.widgets import Dashboard

        return Dashboard
    if name == "AnthropicModel":  # and so does the anthropic SDK
        from gr_notebook.models.anthropic_model import AnthropicModel

        return AnthropicModel
    if name == "Experiment":  # and the experiments, with their notebook progress hooked up
        from gr_notebook.experiments import Experiment
        from gr_notebook.experiments.progress import set_notebook_progress

        set_notebook_progress(_notebook_progress)
        globals()["Experiment"] = Experiment
        return Experiment
    if name == "OpenAIModel":  # and the openai SDK
        from gr_notebook.models.openai_model import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module 'gr_notebook' has no attribute {name!r}")


__all__ = [
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

# A library logs and the application decides where it goes: without a handler of its own,
# an intervention's warnings would reach stderr through logging's last resort.
logging.getLogger("gr_notebook").addHandler(logging.NullHandler())

# The upper layers plug into the lower ones' extension points here, the one module that may
# import every layer, so that no lower layer imports a higher one: the display layer draws
# the core's HTML reprs, the notebook face shows a run, history/adaptive.py answers
# Budget.suggest and review/timetravel.py Run.fork (and `gr.Experiment`, loaded on first use,
# gets the notebook face's progress widget the same way).
_display_reprs.install()
_set_notebook_display(_show_in_notebook)
_set_budget_advisor(_suggest_budget)
_set_forker(_fork_run)
_set_sharer(share)
