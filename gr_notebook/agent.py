"""``Agent``: the definition of a job runner (model, tools, limits), reusable across runs.

An agent holds no run state. Each :meth:`Agent.start` makes the run's
:class:`~gr_notebook.engine.definition.AgentDefinition` (one frozen value), a fresh
:class:`~gr_notebook.engine.state.RunState` (event log, workflow, guardrails, conversation),
the :class:`~gr_notebook.engine.loop.Loop` over the two, and the :class:`Run` handle, so one
definition can run many jobs, in a script, a service or a notebook, and behave the same in
each. How a run starts, executes, finishes and is recorded is
:mod:`gr_notebook.runner`'s.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from gr_notebook import runner
from gr_notebook.blocking import run_blocking
from gr_notebook.engine.definition import AgentDefinition
from gr_notebook.engine.loop import StuckDetector
from gr_notebook.errors import ConfigError, RunError, WorkspaceError
from gr_notebook.guardrails.budget import DEFAULT_MAX_ITERATIONS, Budget
from gr_notebook.guardrails.budget_table import BudgetTable
from gr_notebook.guardrails.completion import CheckerLike
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import InterventionConfig
from gr_notebook.guardrails.policy import ToolPolicy
from gr_notebook.guardrails.regulation import ConfirmerLike, RegulationSettings
from gr_notebook.guardrails.regulation_tools import REGULATION_PROMPT, regulation_tools
from gr_notebook.guardrails.shadow import ShadowSpec
from gr_notebook.guardrails.spec import DEFAULT_MAX_REFUSALS, GuardrailSpec
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, StoreLike, writable_path
from gr_notebook.models import resolve_model
from gr_notebook.models.base import Model
from gr_notebook.models.pricing import Price, Priced, price_key, price_of_model
from gr_notebook.run import Run
from gr_notebook.tools import CORE_TOOLS, Tool, ToolRegistry, Toolset, flatten_tools
from gr_notebook.tools.mcp import MCPServer, check_servers
from gr_notebook.validation import seconds, whole_number
from gr_notebook.workflow.prompts import system_prompt
from gr_notebook.workflow.workspace import Workspace, relative_path

__all__ = ["DEFAULT_RUNS_DIR", "Agent"]

DEFAULT_RUNS_DIR = Path("gr_runs")


class Agent:
    """What runs a job: a model, tools, limits and guardrails. Build once, run many times.

    The guardrails belong to the definition, not to a model adapter, so the same agent
    enforces the same policies, feedback and completion criteria on every model.
    ``shadow=[...]`` takes guardrails of any kind to try before trusting them: they decide
    at every call, stop and check, their decisions are recorded (``run.shadow_df()``), and
    nothing they decide reaches the run.
    """

    def __init__(
        self,
        model: Model | str | Callable[..., Any] | None = None,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        tools: Iterable[Tool | Toolset] = (),
        plan_file: str = "main_plan.md",
        budget: Budget | None = None,
        max_iterations: int | None = None,
        policies: Iterable[ToolPolicy] = (),
        feedback_providers: Iterable[FeedbackProviderConfig] = (),
        task_completion_checker: CheckerLike | None = None,
        max_refusals: int = DEFAULT_MAX_REFUSALS,
        interventions: InterventionConfig | None = InterventionConfig(),  # noqa: B008 (frozen)
        self_regulation: bool = True,
        budget_table: BudgetTable | None = None,
        confirm: ConfirmerLike | None = None,
        confirm_above_tokens: int | None = None,
        release_after_s: float | None = 3600.0,
        compaction: bool = True,
        store: StoreLike | Literal[False] | None = None,
        system_prompt: str = "",
        stuck_turns: int | None = 10,
        stuck_detector: StuckDetector | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "agent",
        checkpoints: bool = True,
        shadow: Iterable[object] = (),
        price: Price | None = None,
        mcp_servers: Iterable[MCPServer] = (),
    ) -> None:
        options = {k: v for k, v in locals().items() if k != "self"}
        # a generator reads once
        for key in ("tools", "policies", "feedback_providers", "shadow", "mcp_servers"):
            if isinstance(options[key], Iterator):
                options[key] = tuple(options[key])
        tools, policies, feedback_providers = (
            options["tools"],
            options["policies"],
            options["feedback_providers"],
        )
        self._options: dict[str, Any] = options
        self.budget = _budget_of(budget, max_iterations)
        try:  # exactly as a tool's path is checked, so every write of the plan succeeds
            plan_file = relative_path(plan_file)
        except WorkspaceError as exc:
            raise WorkspaceError(
                f"plan_file {plan_file!r} must be a path inside the workspace, e.g. "
                f"'main_plan.md': {exc}"
            ) from None
        self.model = resolve_model(model)
        if price is not None and not isinstance(price, Price):
            raise ConfigError(
                "price takes gr.Price(input, output, cache_write, cache_read), USD per million "
                f"tokens (e.g. gr.Price.standard(3.0, 15.0)); got {type(price).__name__}"
            )
        self.price = price
        """What every model call costs, whatever the model says; None: the model's own."""
        if model is not None:  # the default model is checked when a run starts
            self._check_priced()
        self.workspace = workspace
        self.user_tools = tuple(tools)
        self.regulation = _regulation_of(
            self_regulation, budget_table, confirm, confirm_above_tokens
        )
        self.confirm = confirm
        """Answers large assessments and, with no dashboard attending, the tool calls a
        policy asks about (it receives an ApprovalRequest for those)."""
        own = regulation_tools(self.regulation.table) if self.regulation else ()
        self.registry = ToolRegistry([*CORE_TOOLS, *own, *flatten_tools(self.user_tools)])
        self.mcp_servers = check_servers(options["mcp_servers"])
        """The MCP servers each run connects to when it starts; their tools are named
        ``mcp__<server>__<tool>``; the tools policies name are checked against theirs too,
        once the run has them."""
        if release_after_s is not None:
            seconds(release_after_s, "release_after_s", minimum=0, above=True)
        self.release_after_s = release_after_s
        self.guardrails = GuardrailSpec.build(
            tools=list(self.registry),
            toolsets=self.user_tools,
            policies=policies,
            feedback_providers=feedback_providers,
            checker=task_completion_checker,
            max_refusals=max_refusals,
            check_names=False,  # checked when it runs: a bridge's tools are not these
        )
        self.shadow = ShadowSpec.build(
            options["shadow"],
            tools=list(self.registry),
            max_refusals=max_refusals,
            check_names=False,
        )
        """Guardrails that decide on every call, stop and check, recorded with
        ``mode="shadow"``, and that nothing obeys: try one before you trust it."""
        if interventions is not None and not isinstance(interventions, InterventionConfig):
            raise ConfigError(
                "interventions takes gr.InterventionConfig(...) (or a preset such as "
                "gr.InterventionConfig.more_protective()), or None to turn them off; got "
                f"{type(interventions).__name__}"
            )
        self.interventions = interventions
        self.plan_file = plan_file
        self.compaction = compaction
        self.system_prompt = system_prompt
        self.stuck_turns = stuck_turns
        self.stuck_detector = stuck_detector
        self.clock = clock
        self.name = name
        if store is not False and not isinstance(store, (Store, str, os.PathLike, type(None))):
            raise ConfigError(
                f"store takes a gr.Store or the path of one (or False to keep no record), not "
                f"{type(store).__name__}"
            )
        if isinstance(store, (str, os.PathLike)):
            writable_path(store, make=False)  # a mistyped folder fails here, not at the run
        self._store_spec = store
        self._store: Store | None = None
        if not isinstance(checkpoints, bool):
            raise ConfigError(f"checkpoints takes True or False, got {checkpoints!r}")
        self.checkpoints = checkpoints
        """A checkpoint at every turn, in the store (none without one): resume and fork."""
        self._watchers: list[Callable[[Run], object]] = []
        self.admitted: tuple[Mapping[str, Any], ...] = ()
        """The evidence each guardrail made live by :meth:`with_live` was admitted on (a
        backtest's id, metrics, labels, when); every run records it at its start."""

    # -- running ----------------------------------------------------------------------------

    async def run(self, instructions: str) -> Run:
        """Run a job to its end and return the finished run."""
        return await self.start(instructions).wait()

    def run_sync(self, instructions: str) -> Run:
        """Like :meth:`run`, without ``await``; also inside a running loop (a Jupyter cell)."""
        return run_blocking(self.run(instructions))

    def start(
        self,
        instructions: str,
        *,
        context: contextvars.Context | None = None,
        confirm: ConfirmerLike | None = None,
    ) -> Run:
        """Start a job as a task on the running event loop and return its live handle.

        ``context`` is the :mod:`contextvars` context the run's task runs in; the default is
        a copy of the caller's. A notebook passes a fresh one so that output from the task
        is not attributed to the cell that launched it. ``confirm`` answers this run's large
        assessments and approvals when the agent has no confirmer of its own.
        """
        if not instructions.strip():
            raise RunError("instructions are empty; say what the job is")
        loop = runner.running_loop("agent.start()", "agent.run_sync(instructions)")
        run_id = runner.new_run_id()
        return runner.launch(
            self,
            run_id,
            self._workspace_for(run_id),
            instructions,
            loop,
            context=context,
            confirm=confirm,
        )

    def definition(
        self, *, confirm: ConfirmerLike | None = None, own_model: bool = True
    ) -> AgentDefinition:
        """What a run of this agent works under; ``confirm`` answers large assessments and
        approvals when the agent has no confirmer of its own. ``own_model=False``: the caller
        makes the model calls and holds the tools (a Claude Agent SDK session, a LangChain
        app), so the agent's model need no price, and the caller checks the tools policies
        name against its own."""
        if own_model:
            self._check_priced()
            if not self.mcp_servers:  # else when the run has the servers' tools too
                self.guardrails.check_tool_names(self.registry)
                self.shadow.guardrails.check_tool_names(self.registry)
        regulation = self.regulation
        if confirm is not None and regulation is not None and regulation.confirm is None:
            regulation = replace(regulation, confirm=confirm)
        return AgentDefinition(
            model=self.model,
            registry=self.registry,
            system_prompt=system_prompt(
                self.plan_file,
                "\n\n".join(
                    p for p in (REGULATION_PROMPT if regulation else "", self.system_prompt) if p
                ),
                regulated=regulation is not None,
            ),
            plan_file=self.plan_file,
            budget=self.budget,
            compaction=self.compaction,
            guardrails=self.guardrails,
            interventions=self.interventions,
            regulation=regulation,
            stuck_detector=self.stuck_detector,
            stuck_turns=self.stuck_turns,
            name=self.name,
            confirm=self.confirm or confirm,
            shadow=None if self.shadow.empty else self.shadow,
            price=self.price,
            mcp_servers=self.mcp_servers,
        )

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model.name,
            "plan_file": self.plan_file,
            "max_iterations": self.budget.max_iterations,
            "max_tokens": self.budget.max_tokens,
            "deadline_s": self.budget.deadline_s,
            **(
                {}
                if self.budget.max_cost_usd is None
                else {"max_cost_usd": self.budget.max_cost_usd}
            ),
            **self._price_config(),
            "compaction": self.compaction,
            "tools": [t.name for t in self.registry],
            **self.guardrails.describe(),
            "interventions": self.interventions.describe() if self.interventions else None,
            "self_regulation": self.regulation is not None,
            "shadow": self.shadow.describe(),
            **({"mcp_servers": [s.name for s in self.mcp_servers]} if self.mcp_servers else {}),
            **({"admitted": [dict(a) for a in self.admitted]} if self.admitted else {}),
        }

    def _price_config(self) -> dict[str, Any]:
        """The price in effect (the agent's, else the model's own), kept in the recorded
        configuration so that a shared run says what it was charged at."""
        price = self.price or price_of_model(self.model)
        if price is None:
            return {}
        return {
            "price": {
                k: getattr(price, k) for k in ("input", "output", "cache_write", "cache_read")
            }
        }

    def on_run(self, callback: Callable[[Run], object]) -> Callable[[], None]:
        """Call ``callback(run)`` with every run this agent starts from now on (its resumes
        and forks, its Claude Agent SDK and LangChain sessions too), before the run's first
        event, so a ``run.subscribe`` there misses none of them; returns a function that stops it. A
        callback that raises stops the run from starting. ``agent.replace()`` makes an agent
        without them."""
        self._watchers.append(callback)

        def stop() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)

        return stop

    @property
    def run_watchers(self) -> tuple[Callable[[Run], object], ...]:
        """The callbacks :meth:`on_run` registered, in order."""
        return tuple(self._watchers)

    @property
    def max_iterations(self) -> int:
        return self.budget.max_iterations

    def replace(self, **changes: Any) -> Agent:
        """A new agent built from this one's arguments with ``changes`` applied, as
        :func:`dataclasses.replace` does: an experiment gives each run its own model seed,
        workspace and store this way."""
        unknown = sorted(set(changes) - set(self._options))
        if unknown:
            raise ConfigError(
                f"Agent.replace() got {', '.join(unknown)}; it takes gr.Agent's own arguments: "
                f"{', '.join(self._options)}"
            )
        agent = Agent(**{**self._options, **changes})
        agent.admitted = self.admitted
        return agent

    def with_live(self, guardrail: object, *, admitted: Mapping[str, Any]) -> Agent:
        """A new agent with ``guardrail`` (a policy, a feedback configuration, a checker, an
        ``InterventionConfig``) live, taken out of ``shadow=`` if it was there (a shadow of
        the same name and kind), and ``admitted`` (the evidence it passed on, plain data)
        recorded in the configuration of every run it starts. A live checker or intervention
        configuration is replaced by it. ``gate.promote(agent)`` calls this once a backtest's
        gate has passed."""
        sorted_ = ShadowSpec.build([guardrail], tools=list(self.registry), check_names=False)
        options = self._options
        shadow = [s for s in options["shadow"] if not _same_guardrail(s, guardrail, sorted_)]
        changes: dict[str, Any] = {"shadow": shadow}
        if sorted_.policies:
            name = sorted_.policies[0].name
            kept = [p for p in options["policies"] if getattr(p, "name", None) != name]
            changes["policies"] = [*kept, guardrail]
        elif sorted_.feedback:
            changes["feedback_providers"] = [*options["feedback_providers"], guardrail]
        elif sorted_.interventions is not None:
            changes["interventions"] = guardrail
        else:
            changes["task_completion_checker"] = guardrail
        agent = self.replace(**changes)
        agent.admitted = (*self.admitted, dict(admitted))
        return agent

    # -- internals --------------------------------------------------------------------------

    def _check_priced(self) -> None:
        """A cost limit counts what each call costs: refused when nothing prices them."""
        cap = self.budget.max_cost_usd
        if cap is None or self.price is not None or price_of_model(self.model) is not None:
            return
        name = self.model.name
        own = ""
        if isinstance(self.model, Priced):
            key = price_key(name.partition(":")[2] or name)
            own = f", or prices={{{key!r}: gr.Price(...)}} to the model itself"
        raise ConfigError(
            f"budget=gr.Budget(max_cost_usd={cap!r}) counts what each model call costs, and "
            f"the model {name!r} has no price: pass price=gr.Price(input, output, "
            f"cache_write, cache_read) (USD per million tokens, e.g. gr.Price.standard(3.0, "
            f"15.0)) to gr.Agent(...){own}"
        )

    def _workspace_for(self, run_id: str) -> Workspace:
        if isinstance(self.workspace, Workspace):
            return self.workspace
        if self.workspace is None:
            return Workspace(DEFAULT_RUNS_DIR / run_id)
        return Workspace(self.workspace)

    def open_store(self) -> Store | None:
        """The store this agent's runs record into, opened at its first run; ``None`` with
        ``store=False``."""
        spec = self._store_spec
        if spec is False:
            return None
        if self._store is None:
            if isinstance(spec, Store):
                self._store = spec
            else:
                self._store = Store(DEFAULT_STORE_PATH if spec is None else spec)
        return self._store

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model.name!r}, tools={len(self.registry)}, "
            f"max_iterations={self.max_iterations}, compaction={self.compaction})"
        )


def _same_guardrail(item: object, guardrail: object, kind: ShadowSpec) -> bool:
    """Whether the shadow ``item`` is ``guardrail``, or one of its kind and name."""
    if item is guardrail:
        return True
    if kind.policies:
        return getattr(item, "name", None) == kind.policies[0].name and hasattr(item, "check")
    if kind.feedback:
        provider = getattr(item, "provider", None)
        name = getattr(kind.feedback[0].provider, "name", None)
        return provider is not None and getattr(provider, "name", None) == name
    if kind.interventions is not None:
        return isinstance(item, InterventionConfig)
    return not isinstance(item, (InterventionConfig, FeedbackProviderConfig)) and not all(
        hasattr(item, m) for m in ("name", "check", "on_result")
    )


def _budget_of(budget: Budget | None, max_iterations: int | None) -> Budget:
    """``max_iterations=N`` is shorthand for ``budget=gr.Budget(max_iterations=N)``."""
    if budget is not None and not isinstance(budget, Budget):
        raise ConfigError(
            "budget takes gr.Budget(max_tokens=..., max_iterations=..., deadline_s=..., "
            "max_cost_usd=...), "
            f"not {type(budget).__name__}"
        )
    if max_iterations is None:
        return budget or Budget()
    whole_number(max_iterations, "max_iterations")
    if budget is not None and budget.max_iterations != max_iterations:
        default = budget.max_iterations == DEFAULT_MAX_ITERATIONS
        whose = f" (whose max_iterations defaults to {DEFAULT_MAX_ITERATIONS})" if default else ""
        kept = _budget_call(replace(budget, max_iterations=max_iterations))
        raise ConfigError(
            f"max_iterations={max_iterations} and budget={_budget_call(budget)}{whose} "
            f"disagree; give the limit once: budget={kept} and no max_iterations="
        )
    return budget or Budget(max_iterations=max_iterations)


def _budget_call(budget: Budget) -> str:
    """The budget as the shortest call that makes it."""
    limits = {
        "max_tokens": budget.max_tokens,
        "max_iterations": budget.max_iterations,
        "deadline_s": budget.deadline_s,
        "max_cost_usd": budget.max_cost_usd,
    }
    given = {k: v for k, v in limits.items() if v != getattr(Budget(), k)}
    return "gr.Budget(" + ", ".join(f"{k}={v}" for k, v in given.items()) + ")"


def _regulation_of(
    on: bool, table: BudgetTable | None, confirm: ConfirmerLike | None, above: int | None
) -> RegulationSettings | None:
    if not isinstance(on, bool):
        raise ConfigError(f"self_regulation takes True or False, got {on!r}")
    if table is not None and not isinstance(table, BudgetTable):
        raise ConfigError(
            "budget_table takes gr.BudgetTable({...}), e.g. gr.BudgetTable().with_type("
            f"'data_cleaning', tokens=50_000, iterations=12); got {type(table).__name__}"
        )
    if confirm is not None and not callable(confirm):
        raise ConfigError(
            "confirm takes a function request -> bool (it may be async), got "
            f"{type(confirm).__name__}"
        )
    if above is not None:
        whole_number(above, "confirm_above_tokens")
    if not on:
        if table is not None or above is not None:
            raise ConfigError(
                "budget_table and confirm_above_tokens belong to self-regulation; drop them, "
                "or set self_regulation=True"
            )
        return None
    return RegulationSettings(table or BudgetTable(), confirm, above)
