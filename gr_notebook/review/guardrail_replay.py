"""Replay any guardrail on recorded runs, with no model call: what a policy would have
denied, a checker refused, a feedback provider said, an intervention setting done.

The real :class:`~gr_notebook.guardrails.runtime.Guardrails` and
:class:`~gr_notebook.guardrails.interventions.InterventionEngine` are driven again along
the record through a :class:`~gr_notebook.review.replay_view.ReplayView`, so a guardrail
decides in a replay as it decides live, and replaying one on a run where it was live gives
the decisions it made, row for row. Guardrails that read the workspace read the files as
they were, rebuilt from the run's checkpoints
(:class:`~gr_notebook.review.replay_workspace.ReplayWorkspace`); where those cannot say
(a run without checkpoints, a file another call changed earlier in the same turn) the row
says "cannot tell".

The trajectory is taken as recorded. Once a replayed guardrail would have acted otherwise
than what happened (the first divergence), the agent would have seen something else and
the record no longer shows what it would have done: later rows are marked
``after_divergence``. To see what happens for real, fork the run where it diverged, with
the guardrail live::

    replay = gr.replay_guardrails(run, policies=[policy])
    where = replay.first_divergence(run)
    if where is not None:
        forked = run.fork(turn=where.turn, agent=gr.Agent(model, policies=[policy]))

``run.fork`` starts from the checkpoint of ``where.turn``, the state as that turn began,
and plays that turn again with the new agent (``gr.fork(run_id, turn, agent)`` for a
stored run).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError, GrNotebookError, TodoError
from gr_notebook.eventdata import MAX_EVENT_ITEMS, MAX_EVENT_TEXT
from gr_notebook.events import (
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    JobCompleteEvent,
    ModelCallEvent,
    PoliciesResetEvent,
    PolicyDecisionEvent,
    RewindEvent,
    RunPausedEvent,
    RunStartedEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
    as_typed,
)
from gr_notebook.guardrails.budget import Budget
from gr_notebook.guardrails.completion import (
    PLAN_FILE,
    STOP_BY_TOOL,
    CompositeChecker,
    FileOutputChecker,
    PlanBasedChecker,
    TaskCompletionChecker,
    as_checker,
)
from gr_notebook.guardrails.feedback import FeedbackProviderConfig
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionConfig,
    InterventionEngine,
    replay_steps,
)
from gr_notebook.guardrails.policies import ReadBeforeWritePolicy
from gr_notebook.guardrails.policy import PolicyContext, PolicyDecision, ToolPolicy
from gr_notebook.guardrails.runtime import Guardrails
from gr_notebook.guardrails.spec import DEFAULT_MAX_REFUSALS, GuardrailSpec
from gr_notebook.harness import CLAUDE_AGENT_SDK, GR_LOOP, LANGCHAIN
from gr_notebook.review.replay_view import ReplayView
from gr_notebook.review.replay_workspace import ReplayWorkspace
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.workflow.todos import TODOS_FILE, TodoList

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.checkpoint_store import Checkpoint
    from gr_notebook.history.store import Store

__all__ = [
    "CANNOT_TELL",
    "COLUMNS",
    "Divergence",
    "GuardrailReplay",
    "replay_guardrails",
    "sweep_guardrails",
]

CANNOT_TELL = "cannot tell"
COLUMNS = [
    "run",
    "turn",
    "seq",
    "point",
    "tool",
    "tool_use_id",
    "kind",
    "guardrail",
    "decision",
    "reason",
    "error",
    "recorded",
    "differs",
    "after_divergence",
    "full_input",
]
"""The columns of :attr:`GuardrailReplay.df`: one row per recorded tool call, stop attempt
or intervention check, and guardrail. ``kind`` is policy, feedback, checker or
intervention; ``recorded`` is what happened live at that point in the same words as
``decision``; ``full_input`` is False where the call's input is known only clipped."""

_EFFECT = {"allow": "run", "deny": "not run", "would ask": "ask"}
_STOPPED = {"complete": "stop", "bypassed": "stop", "refuse": "go on"}


# -- the result -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where the replayed guardrails would have acted otherwise than what
    happened: from here on the record no longer shows what the agent would have done."""

    run: str
    turn: int
    seq: int
    point: str
    tool: str | None
    guardrail: str
    decision: str
    recorded: str
    reason: str | None

    def __str__(self) -> str:
        at = f"{self.point} {self.tool}" if self.tool else self.point
        why = f": {self.reason}" if self.reason else ""
        return (
            f"turn {self.turn}, {at}: {self.guardrail} would {self.decision} where the run "
            f"recorded {self.recorded}{why}"
        )


@dataclass(frozen=True, eq=False)
class GuardrailReplay:
    """What replayed guardrails would have decided on recorded runs (see
    :func:`replay_guardrails`)."""

    df: pd.DataFrame = field(repr=False)
    runs: tuple[str, ...]
    guardrails: tuple[str, ...]
    divergences: Mapping[str, Divergence | None] = field(repr=False)

    def first_divergence(self, run: object) -> Divergence | None:
        """The first point in ``run`` (a run, its id, or its label in a mapping) where the
        replayed guardrails would have acted otherwise than what happened; None if none."""
        key = str(getattr(run, "run_id", run))
        if key not in self.divergences:
            known = ", ".join(self.runs[:5]) + (", ..." if len(self.runs) > 5 else "")
            raise ConfigError(f"run {key!r} was not replayed here; the runs replayed: {known}")
        return self.divergences[key]

    def summary(self) -> pd.DataFrame:
        """Counts per run and guardrail: rows, each decision, the rows that differ from
        what happened, and the turn of the run's first divergence."""
        import pandas as pd

        frame = self.df
        if frame.empty:
            return pd.DataFrame(columns=["run", "kind", "guardrail", "rows", "differs"])
        counts = (
            pd.crosstab([frame["run"], frame["kind"], frame["guardrail"]], frame["decision"])
            .rename_axis(columns=None)
            .reset_index()
        )
        grouped = frame.groupby(["run", "kind", "guardrail"], sort=False)
        counts = counts.merge(
            grouped.agg(rows=("decision", "size"), differs=("differs", "sum")).reset_index(),
            on=["run", "kind", "guardrail"],
        )
        counts["first_divergence_turn"] = [
            d.turn if (d := self.divergences.get(r)) is not None else None for r in counts["run"]
        ]
        head = ["run", "kind", "guardrail", "rows"]
        rest = [c for c in counts.columns if c not in head]
        order = {r: i for i, r in enumerate(self.runs)}
        counts = counts.sort_values("run", key=lambda s: s.map(order), kind="stable")
        return counts[head + rest].reset_index(drop=True)

    def __repr__(self) -> str:
        diverged = sum(d is not None for d in self.divergences.values())
        return (
            f"<GuardrailReplay of {', '.join(self.guardrails)} on {_count(len(self.runs), 'run')}:"
            f" {_count(len(self.df), 'decision')}, {int(self.df['differs'].sum())} differ from "
            f"the record, {diverged} of {len(self.runs)} runs diverge>"
        )

    def _repr_html_(self) -> str:
        from html import escape

        head = f"<p><b>{escape(repr(self)[1:-1])}</b></p>"
        return head + self.summary().to_html(index=False, na_rep="")


# -- the guardrails to replay ------------------------------------------------------------------


@dataclass(frozen=True)
class _Set:
    policies: tuple[ToolPolicy, ...] = ()
    feedback: tuple[FeedbackProviderConfig, ...] = ()
    checker: TaskCompletionChecker | None = None
    interventions: InterventionConfig | None = None

    @property
    def names(self) -> tuple[str, ...]:
        names = [f"policy {p.name}" for p in self.policies]
        names += [f"feedback {_provider_name(c)}" for c in self.feedback]
        if self.checker is not None:
            names.append(f"checker {_checker_name(self.checker)}")
        if self.interventions is not None:
            names.append("interventions")
        return tuple(names)


def _guardrail_set(
    policies: object,
    feedback_providers: object,
    task_completion_checker: object,
    interventions: object,
) -> _Set:
    policy_list = _listed(policies, "policies")
    configs = _listed(feedback_providers, "feedback_providers")
    for config in configs:
        if not isinstance(config, FeedbackProviderConfig):
            raise ConfigError(
                "feedback_providers takes gr.FeedbackProviderConfig(provider=..., "
                f"trigger=gr.FeedbackTrigger(...)) items, not {type(config).__name__}"
            )
    checker = None
    if task_completion_checker is not None:
        checker = as_checker(task_completion_checker)  # type: ignore[arg-type]
    if interventions is not None and not isinstance(interventions, InterventionConfig):
        raise ConfigError(
            "interventions takes gr.InterventionConfig(...), not " + type(interventions).__name__
        )
    for policy in policy_list:
        missing = [m for m in ("name", "check", "on_result") if not hasattr(policy, m)]
        if missing or isinstance(policy, type):
            raise ConfigError(
                f"{getattr(policy, '__name__', type(policy).__name__)} is not a tool policy: "
                "policies takes instances with name, check(tool, params, *, context) and "
                "on_result(...), e.g. policies=[gr.ReadBeforeWritePolicy()]"
            )
    chosen = _Set(
        tuple(policy_list),  # type: ignore[arg-type]
        tuple(configs),  # type: ignore[arg-type]
        checker,
        interventions,
    )
    if not chosen.names:
        raise ConfigError(
            "replay_guardrails needs a guardrail to replay: policies=[...], "
            "feedback_providers=[...], task_completion_checker=... or interventions=..."
        )
    return chosen


def _listed(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError(f"{what} takes a list, e.g. {what}=[...], not {type(value).__name__}")
    return list(value)


class _Watched:
    """A policy as the guardrails ask it, keeping its last answer (or error) for the row."""

    def __init__(self, policy: ToolPolicy) -> None:
        self.policy = policy
        self.name = policy.name
        self.answer: object = None
        self.error: str | None = None

    def check(self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext) -> Any:
        self.answer, self.error = None, None
        try:
            self.answer = self.policy.check(tool, params, context=context)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            raise
        return self.answer

    def on_result(
        self, tool: Tool, params: Mapping[str, Any], result: ToolOutput, *, context: PolicyContext
    ) -> None:
        self.policy.on_result(tool, params, result, context=context)


# -- what a guardrail reads of the workspace ---------------------------------------------------

_NOTHING: tuple[str, ...] = ()


def _policy_reads(
    policy: object, tool: str, params: Mapping[str, Any], *, after: bool = False
) -> Sequence[str] | None:
    """The files ``policy`` reads deciding on a call of ``tool`` (``after``: recording its
    result): a tuple of paths, or None for the whole workspace (a guardrail of one's own
    that says ``reads_workspace = True``)."""
    if isinstance(policy, ReadBeforeWritePolicy):
        stamped = {*policy.write_tools, *(policy.read_tools if after else ())}
        if tool not in stamped:
            return _NOTHING
        raw = next(
            (v for name in policy.path_params if isinstance(v := params.get(name), str)), None
        )
        return _NOTHING if raw is None else (raw,)
    return None if getattr(policy, "reads_workspace", False) else _NOTHING


def _checker_reads(checker: object, plan_file: str) -> Sequence[str] | None:
    inner = getattr(checker, "function", None)
    if isinstance(checker, FileOutputChecker):
        return checker.files
    if isinstance(checker, PlanBasedChecker):
        return (plan_file,)
    if isinstance(checker, CompositeChecker):
        paths: list[str] = []
        for part in checker.checkers:
            found = _checker_reads(part, plan_file)
            if found is None:
                return None
            paths += found
        return tuple(paths)
    owner = inner if inner is not None else checker
    return None if getattr(owner, "reads_workspace", False) else _NOTHING


def _feedback_reads(config: FeedbackProviderConfig) -> Sequence[str] | None:
    if getattr(config.provider, "reads_workspace", False):
        return None
    created = config.trigger.on_file_created
    return (created.filename,) if created is not None else _NOTHING


def _provider_name(config: FeedbackProviderConfig) -> str:
    return str(getattr(config.provider, "name", type(config.provider).__name__))


def _checker_name(checker: object) -> str:
    inner = getattr(checker, "function", None)
    if inner is not None:
        return str(getattr(inner, "__name__", type(inner).__name__))
    return type(checker).__name__


# -- the runs to replay ------------------------------------------------------------------------


@dataclass
class _Source:
    label: str
    run_id: str
    events: list[Event]
    store: Store | None

    def checkpoints(self) -> Callable[[int], Checkpoint | None]:
        """The run's checkpoint of a turn (its files and state, not its messages), or None."""
        store = self.store
        if store is None:
            return lambda turn: None
        from gr_notebook.history.checkpoint_store import checkpoint_turns, load_checkpoint

        turns = set(checkpoint_turns(store, self.run_id))
        cache: dict[int, Checkpoint | None] = {}

        def at(turn: int) -> Checkpoint | None:
            if turn not in turns:
                return None
            if turn not in cache:
                for old in [t for t in cache if t < turn - 1]:
                    del cache[old]
                cache[turn] = load_checkpoint(store, self.run_id, turn, with_history=False)
            return cache[turn]

        return at

    def messages(self, turn: int) -> Iterator[Any]:
        """The conversation as the checkpoint of ``turn`` holds it, newest first, each
        message read from the store only when asked for (none without a checkpoint)."""
        if self.store is None:
            return
        from gr_notebook.history.checkpoint_store import blob, checkpoint_turns, load_checkpoint

        store = self.store
        if turn not in checkpoint_turns(store, self.run_id):
            return
        light = load_checkpoint(store, self.run_id, turn, with_history=False)
        context = light.snapshot.get("context")
        kept = context.get("messages") if isinstance(context, Mapping) else None
        if not isinstance(kept, Mapping):
            return
        for digest in reversed(kept.get("tail") or []):
            yield json.loads(blob(store, digest))
        for chunk in reversed(kept.get("chunks") or []):
            for digest in reversed(json.loads(blob(store, chunk))):
                yield json.loads(blob(store, digest))


_RUNS_HELP = (
    "runs takes a Run, a list of runs, run ids with store=..., a dict of label → run, or "
    "an experiment's results"
)


def _sources(runs: object, store: object, call: str) -> Iterator[_Source]:
    from gr_notebook.history.store import reading

    results_store = getattr(runs, "store", None)
    if hasattr(runs, "records") and isinstance(results_store, (str, Path)):
        ids = [r.run_id for r in runs.records if r.run_id is not None]
        with reading(results_store) as opened:
            for run_id in ids:
                yield _stored(run_id, run_id, opened)
        return
    if _is_run(runs) or isinstance(runs, str):
        items: list[tuple[str | None, object]] = [(None, runs)]
    elif isinstance(runs, Mapping):
        items = [(str(label), run) for label, run in runs.items()]
    elif isinstance(runs, Iterable) and not isinstance(runs, bytes):
        items = [(None, run) for run in runs]
        if items and all(isinstance(e, Event) for _, e in items):
            items = [(None, [e for _, e in items])]  # one run's events
    else:
        raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(runs).__name__}")
    if not items:
        raise ConfigError(f"{call}: no runs given; {_RUNS_HELP}")
    ids = [run for _, run in items if isinstance(run, str)]
    if ids and store is None:
        raise ConfigError(
            f"{call}: run ids need the store that holds them: {call}([{ids[0]!r}, ...], "
            "store='gr_runs/store.sqlite')"
        )
    opened_store = None
    try:
        if ids:
            opened_store = _open(store)
        for label, run in items:
            if isinstance(run, str):
                assert opened_store is not None
                yield _stored(label or run, run, opened_store)
            elif _is_run(run):
                run_id = str(run.run_id)  # type: ignore[attr-defined]
                events = [as_typed(e) for e in run.events]  # type: ignore[attr-defined]
                yield _Source(label or run_id, run_id, events, getattr(run, "store", None))
            elif isinstance(run, Iterable) and not isinstance(run, (str, bytes, Mapping)):
                events = [as_typed(e) for e in run]
                if not events or not all(isinstance(e, Event) for e in events):
                    raise ConfigError(f"{call}: {_RUNS_HELP}; got a list that holds no events")
                started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
                run_id = started.run_id if started is not None else ""
                yield _Source(label or run_id or "run", run_id, events, None)
            else:
                raise ConfigError(f"{call}: {_RUNS_HELP}; got {type(run).__name__}")
    finally:
        if opened_store is not None and not _is_store(store):
            opened_store.close()


def _is_run(value: object) -> bool:
    return hasattr(value, "run_id") and hasattr(value, "events") and hasattr(value, "fork")


def _is_store(value: object) -> bool:
    from gr_notebook.history.store import Store

    return isinstance(value, Store)


def _open(store: object) -> Store:
    from gr_notebook.history.store import Store

    if isinstance(store, Store):
        return store
    if not isinstance(store, (str, Path)):
        raise ConfigError(f"store takes a Store or the path of one, not {type(store).__name__}")
    return Store(store, create=False)


def _stored(label: str, run_id: str, store: Store) -> _Source:
    events = [as_typed(e) for e in store.events(run_id)]
    if not events:
        known = store.run_ids()[:5]
        raise ConfigError(
            f"no run {run_id!r} in {store.path}; its runs include: {', '.join(known) or 'none'}"
            " (gr.runs_df(store) lists them)"
        )
    return _Source(label, run_id, events, store)


# -- replaying one run -------------------------------------------------------------------------


def replay_guardrails(
    runs: object,
    *,
    policies: Iterable[ToolPolicy] | None = None,
    feedback_providers: Iterable[FeedbackProviderConfig] | None = None,
    task_completion_checker: object = None,
    interventions: InterventionConfig | None = None,
    store: object = None,
) -> GuardrailReplay:
    """What these guardrails would have decided on recorded runs, with no model call.

    ``runs`` is a Run, a list of them, run ids with ``store=`` (a Store or its path), a
    dict of label → run, or an experiment's results. Each guardrail is asked at the points
    it is asked live: a policy before each tool call, the checker at each attempt to stop,
    a feedback provider after each call, the interventions at their checks. A policy's
    ``ask`` is recorded as "would ask"; a guardrail that raises is recorded as what it does
    live (a policy or a checker refuses, feedback stays silent), with the error.
    """
    chosen = _guardrail_set(policies, feedback_providers, task_completion_checker, interventions)
    return _replay(_sources(runs, store, "replay_guardrails"), chosen)


def _replay(sources: Iterable[_Source], chosen: _Set) -> GuardrailReplay:
    import pandas as pd

    rows: list[dict[str, Any]] = []
    divergences: dict[str, Divergence | None] = {}
    labels: list[str] = []
    for source in sources:
        if source.label in divergences:
            raise ConfigError(f"run {source.label!r} is given twice; give each run once")
        found = _Replayer(source, chosen).rows()
        divergences[source.label] = _mark(found)
        labels.append(source.label)
        rows += found
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return GuardrailReplay(frame, tuple(labels), chosen.names, divergences)


def _mark(rows: list[dict[str, Any]]) -> Divergence | None:
    """Mark the rows after the run's first divergence; return it."""
    first = next((r for r in rows if r["differs"]), None)
    if first is None:
        return None
    for row in rows:
        row["after_divergence"] = row["seq"] > first["seq"]
    return Divergence(
        run=first["run"],
        turn=first["turn"],
        seq=first["seq"],
        point=first["point"],
        tool=first["tool"],
        guardrail=first["guardrail"],
        decision=first["decision"],
        recorded=first["recorded"],
        reason=first["reason"],
    )


class _Replayer:
    """One run's replay: the record walked once, the guardrails asked at each point."""

    def __init__(self, source: _Source, chosen: _Set) -> None:
        self.source, self.chosen = source, chosen
        events = source.events
        started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
        config: Mapping[str, Any] = dict(started.config) if started is not None else {}
        self.bridge = config.get("harness") == CLAUDE_AGENT_SDK.name
        self.names = _bridge_names(started, config) if self.bridge else None
        harnesses = {h.name: h for h in (CLAUDE_AGENT_SDK, LANGCHAIN)}
        self.harness = harnesses.get(str(config.get("harness")), GR_LOOP)
        self.plan_file = str(config.get("plan_file") or PLAN_FILE)
        self.space = ReplayWorkspace()
        self.view = ReplayView(
            run_id=source.run_id,
            name=str(config.get("name") or "agent"),
            workspace=self.space.workspace,
            budget=_budget_of(config),
            plan_file=self.plan_file,
            started_at=events[0].time if events else 0.0,
        )
        self.watched = [_Watched(p) for p in chosen.policies]
        tools = sorted({self._tool_name(e) for e in events if isinstance(e, ToolCallEvent)})
        stubs = {name: _stub(name) for name in [*tools, *map(str, config.get("tools") or [])]}
        self.stubs = stubs
        spec = GuardrailSpec.build(
            tools=list(stubs.values()),
            policies=self.watched,
            feedback_providers=chosen.feedback,
            checker=chosen.checker,
            max_refusals=int(config.get("max_refusals") or DEFAULT_MAX_REFUSALS),
        )
        self.keys = {id(b.policy): b.key for b in spec.bindings}
        self.guards = Guardrails(spec, self.view, harness=self.harness)
        self.live = _LiveRecord(events, [_provider_name(c) for c in chosen.feedback])
        self.tainted: set[tuple[str, str]] = set()
        """(guardrail, path): a memory stamped while the file was not known."""
        self.feedback_tainted: set[int] = set()
        self.out: list[dict[str, Any]] = []
        self.last_calls = _last_calls(events)
        self.winding_down = False
        """The run was told to wrap up: the live interventions no longer observed."""

    def _tool_name(self, event: ToolCallEvent) -> str:
        return self.names.gr_name(event.tool) if self.names is not None else event.tool

    def rows(self) -> list[dict[str, Any]]:
        try:
            self._walk()
        finally:
            self.space.close()
        return self.out

    # -- the walk -----------------------------------------------------------------------------

    def _walk(self) -> None:
        source, view = self.source, self.view
        checkpoint = source.checkpoints()
        inputs = _FullInputs(source)
        turn = None
        calls = 0
        turn_calls = turn_refused = 0
        steps: list[tuple[str, Mapping[str, Any], str, bool] | None] = []
        call_rows: dict[int, tuple[ToolCallEvent, str, bool]] = {}
        for event in source.events:
            view.now = event.time
            if event.turn != turn:
                if turn is not None and turn_calls and turn_refused < turn_calls:
                    self.guards.note_work()
                turn_calls = turn_refused = 0
                turn = event.turn
                self._begin_turn(turn, checkpoint)
            if isinstance(event, ModelCallEvent):
                view.tokens, view.iterations = event.tokens_used, event.iterations_used
                if event.tool_calls == 0 and event.stop_reason not in ("max_tokens", "refusal"):
                    self._stop(event, "end_turn", event.text)
            elif isinstance(event, TodosWrittenEvent):
                view.todos = TodoList.of(
                    event.titles,
                    phase_number=event.phase_number,
                    phase_total=view.todos.phase_total,
                    phase_name=event.name,
                    kind=event.todo_kind,
                )
            elif isinstance(event, TodoCompletedEvent):
                with contextlib.suppress(GrNotebookError, ValueError, IndexError):
                    view.todos = view.todos.complete_next()[0]
            elif isinstance(event, PoliciesResetEvent):
                self.guards.reset_policies()
            elif isinstance(event, RewindEvent) and event.source == "person":
                steps.append(None)  # the tracker resets, as it did live
            elif isinstance(event, ToolCallEvent):
                calls += 1
                params, full = inputs.of(event)
                tool = self._tool_name(event)
                if self.names is not None:
                    params = dict(self.names.call(event.tool, params).params)
                refused = self._call(event, tool, params, full, calls)
                turn_calls += 1
                turn_refused += refused
                if not self.winding_down:  # told to wrap up, the live run stopped observing
                    steps.append((tool, params, event.result or "", bool(event.is_error)))
                call_rows[calls] = (event, tool, full)
        if self.chosen.interventions is not None:
            self._interventions(steps, call_rows)
        self.out.sort(key=lambda r: (r["seq"], r["_order"]))
        for row in self.out:
            del row["_order"]

    def _begin_turn(self, turn: int, checkpoint: Callable[[int], Checkpoint | None]) -> None:
        now, following = checkpoint(turn), checkpoint(turn + 1)
        self.space.begin_turn(now, following.files if following is not None else None)
        # the loop orders the wrap-up after a turn's checkpoint: the next one shows it
        latest = following or now
        phases = latest.snapshot.get("phases") if latest is not None else None
        self.winding_down = isinstance(phases, Mapping) and bool(phases.get("wrap_up"))
        regulation = latest.snapshot.get("regulation") if latest is not None else None
        if isinstance(regulation, Mapping):  # the order stands once given
            self.view.wrap_up = regulation.get("wrap_up") or self.view.wrap_up
        if now is None:
            return
        digest = now.files.get(TODOS_FILE)
        if digest is not None:
            with contextlib.suppress(TodoError, UnicodeDecodeError):
                self.view.todos = TodoList.loads(now.read(digest).decode())

    # -- a tool call ----------------------------------------------------------------------------

    def _call(
        self, event: ToolCallEvent, tool: str, params: Mapping[str, Any], full: bool, n: int
    ) -> bool:
        """Ask the policies, the checker if the call stops the job, then on_result and the
        feedback; returns whether the replayed checker refused the stop."""
        stub = self.stubs.get(tool) or _stub(tool)
        live = self.live
        base = {
            "run": self.source.label,
            "turn": event.turn,
            "seq": event.seq,
            "point": "tool call",
            "tool": event.tool,
            "tool_use_id": event.tool_use_id,
            "full_input": full,
            "after_divergence": False,
        }
        decision = live.policy.get(event.tool_use_id) or live.policy_by_seq.get(event.seq)
        reached = decision is not None or not (
            (event.result or "").startswith("Not run:") or tool in live.governed
        )
        denied = None
        if reached and self.watched:
            denied = self._policies(event, stub, params, base, decision)
        refused = False
        stops = tool == STOP_BY_TOOL or event.seq in live.stop_calls
        if stops and reached and self.chosen.checker is not None:
            refused = self._stop(event, STOP_BY_TOOL, dict(params), base=base, denied_by=denied)
        succeeded = not event.is_error
        self.space.after_call(tool, params, succeeded=succeeded)
        if event.seq in self.last_calls:
            self.space.settle()
        if succeeded and reached and self.watched:
            for watched in self.watched:
                key = self.keys[id(watched)]
                paths = _policy_reads(watched.policy, tool, params, after=True)
                if paths is None or not self.space.knows(paths):
                    self.tainted |= {(key, p) for p in (paths or ("*",))}
                else:
                    self.tainted -= {(key, p) for p in paths}
            self.guards.after_success(stub, params, ToolOutput(event.result or ""), turn=event.turn)
            self.view.take()
        self._feedback(event, tool, params, base, n)  # counts the call, as policies read it
        return refused

    def _policies(
        self,
        event: ToolCallEvent,
        stub: Tool,
        params: Mapping[str, Any],
        base: dict[str, Any],
        live: PolicyDecisionEvent | None,
    ) -> str | None:
        """One row per policy that governs the call; returns the policy that denied it."""
        for watched in self.watched:
            watched.answer, watched.error = None, None
        denial = self.guards.check(stub, params, turn=event.turn, tool_use_id=event.tool_use_id)
        self.view.take()
        happened = "allow" if live is None or live.allowed else "deny"
        for order, watched in enumerate(self.watched):
            key = self.keys[id(watched)]
            answer, error = watched.answer, watched.error
            if key not in {b.key for b in self.guards.spec.by_tool.get(stub.name, ())}:
                continue
            if answer is None and error is None:
                decision, reason = "not asked", f"{denial.policy} denied first" if denial else None
            elif error is not None or not isinstance(answer, PolicyDecision):
                decision = "deny"
                reason = denial.reason if denial is not None and denial.policy == key else error
            else:
                decision = {"allow": "allow", "deny": "deny", "ask": "would ask"}[answer.verdict]
                reason = answer.reason
            paths = _policy_reads(watched.policy, stub.name, params)
            unknown = paths is None or not self.space.knows(paths)
            if (
                decision != "not asked"
                and paths != _NOTHING
                and (unknown or any((key, p) in self.tainted for p in paths or ("*",)))
            ):
                decision, reason = CANNOT_TELL, _why_unknown(self.space.known)
            recorded = happened
            if live is not None and key in live.policies:
                if not live.allowed and live.policy != key:
                    recorded = "not asked"
                else:
                    recorded = "allow" if live.allowed else "deny"
            differs = _acts_otherwise(_EFFECT, decision, recorded)
            self._row(
                base,
                order,
                kind="policy",
                guardrail=key,
                decision=decision,
                reason=reason,
                error=error,
                recorded=recorded,
                differs=differs,
            )
        return denial.policy if denial is not None else None

    # -- a stop ---------------------------------------------------------------------------------

    def _stop(
        self,
        event: ToolCallEvent | ModelCallEvent,
        kind: str,
        tentative: Any,
        *,
        base: dict[str, Any] | None = None,
        denied_by: str | None = None,
    ) -> bool:
        """The checker's row for an attempt to stop (not asked when a replayed policy
        denied the call that stops); returns whether it refused."""
        checker = self.chosen.checker
        if checker is None:
            return False
        if base is None:
            base = {
                "run": self.source.label,
                "turn": event.turn,
                "seq": event.seq,
                "point": "stop",
                "tool": None,
                "tool_use_id": None,
                "full_input": True,
                "after_divergence": False,
            }
        decision: str
        reason: str | None
        error: str | None
        live = self.live.stop_at(event)
        order = _wrap_up_order(live.bypassed if live is not None else None)
        if order is not None:  # a fact of the run, which its checker's event records
            self.view.wrap_up = order
        if denied_by is not None:
            decision, reason, error = "not asked", f"{denied_by} denied the call first", None
        else:
            decision, reason, error = self._judge(checker, kind, tentative)
        if live is None:
            recorded = "complete" if not self.live.denied(event) else "not asked"
        elif live.bypassed:
            recorded = "bypassed"
        else:
            recorded = "complete" if live.complete else "refuse"
        differs = _acts_otherwise(_STOPPED, decision, recorded)
        self._row(
            {**base, "point": "stop"},
            len(self.watched),
            kind="checker",
            guardrail=_checker_name(checker),
            decision=decision,
            reason=reason,
            error=error,
            recorded=recorded,
            differs=differs,
        )
        return decision == "refuse"

    def _judge(
        self, checker: TaskCompletionChecker, kind: str, tentative: Any
    ) -> tuple[str, str | None, str | None]:
        """The checker's decision, its reason and its error, as the live guardrails judge."""
        verdict = self.guards.judge_stop(kind, tentative)  # type: ignore[arg-type]
        emitted = self.view.take()
        check = next((e for e in emitted if isinstance(e, CompletionCheckEvent)), None)
        error = next(
            (f"{e.error_type}: {e.message}" for e in emitted if isinstance(e, ErrorEvent)), None
        )
        if verdict.bypassed:
            return "bypassed", verdict.bypassed, error
        decision = "complete" if verdict.allowed else "refuse"
        reason = check.feedback if check is not None else verdict.feedback
        paths = _checker_reads(checker, self.plan_file)
        if (paths is None or paths) and not self.space.knows(paths):
            return CANNOT_TELL, _why_unknown(self.space.known), error
        return decision, reason, error

    # -- feedback -------------------------------------------------------------------------------

    def _feedback(
        self,
        event: ToolCallEvent,
        tool: str,
        params: Mapping[str, Any],
        base: dict[str, Any],
        n: int,
    ) -> None:
        if not self.chosen.feedback:
            self.guards.after_call(tool, params, is_error=bool(event.is_error), turn=event.turn)
            return
        triggers = self.guards.feedback.to_json(recent=False)["triggers"]
        self.guards.after_call(tool, params, is_error=bool(event.is_error), turn=event.turn)
        emitted = self.view.take()
        fired = {e.config: e for e in emitted if isinstance(e, FeedbackEvent)}
        errors = {
            e.provider: f"{e.error_type}: {e.message}"
            for e in emitted
            if isinstance(e, ErrorEvent) and e.source == "feedback"
        }
        for index, config in enumerate(self.chosen.feedback):
            name = _provider_name(config)
            block = fired.get(index)
            decision = "feedback fired" if block is not None else "no feedback"
            reason = block.summary if block is not None else None
            paths = _NOTHING if triggers[index]["file_fired"] else _feedback_reads(config)
            if (paths is None or paths) and (
                index in self.feedback_tainted or not self.space.knows(paths)
            ):
                self.feedback_tainted.add(index)
                decision, reason = CANNOT_TELL, _why_unknown(self.space.known)
            recorded = "feedback fired" if self.live.fed(index, n) else "no feedback"
            self._row(
                {**base, "point": "tool call"},
                len(self.watched) + 1 + index,
                kind="feedback",
                guardrail=name,
                decision=decision,
                reason=reason,
                error=errors.get(name),
                recorded=recorded,
                differs=decision != CANNOT_TELL and decision != recorded,
            )

    # -- interventions --------------------------------------------------------------------------

    def _interventions(
        self,
        steps: list[tuple[str, Mapping[str, Any], str, bool] | None],
        calls: Mapping[int, tuple[ToolCallEvent, str, bool]],
    ) -> None:
        config = self.chosen.interventions
        checks: list[InterventionCheck] = replay_steps(InterventionEngine(config), steps)
        for check in checks:
            event, _tool, full = calls[check.step]
            live = self.live.interventions.get(check.step)
            decision = "intervene" if check.fired else "hold off"
            reason = check.event().why
            recorded = "no check" if live is None else "intervene" if live.fired else "hold off"
            self._row(
                {
                    "run": self.source.label,
                    "turn": event.turn,
                    "seq": event.seq,
                    "point": "check",
                    "tool": event.tool,
                    "tool_use_id": event.tool_use_id,
                    "full_input": full,
                    "after_divergence": False,
                },
                10_000,
                kind="intervention",
                guardrail="interventions",
                decision=decision,
                reason=reason,
                error=None,
                recorded=recorded,
                differs=check.fired != (live is not None and live.fired),
            )

    def _row(self, base: Mapping[str, Any], order: int, **fields: Any) -> None:
        self.out.append({**base, **fields, "_order": order})


# -- what was recorded live --------------------------------------------------------------------


class _LiveRecord:
    """The live guardrail events of a run, indexed by the point they decided on; shadow
    decisions (``mode="shadow"``) are not what happened and are left out."""

    def __init__(self, events: Sequence[Event], providers: Sequence[str]) -> None:
        self.policy: dict[str | None, PolicyDecisionEvent] = {}
        self.policy_by_seq: dict[int, PolicyDecisionEvent] = {}
        self.governed: set[str] = set()
        self.stop_calls: set[int] = set()
        self.stops: dict[int, CompletionCheckEvent] = {}
        self.denials: set[int] = set()
        self.interventions: dict[int, InterventionCheckEvent] = {}
        self._fed: set[tuple[int, int]] = set()
        live_names = _live_providers(events)
        self._config_of = _match_providers(providers, live_names)
        pending: list[Event] = []
        last_model: ModelCallEvent | None = None
        for event in events:
            if getattr(event, "mode", None) is not None:
                continue
            if isinstance(event, ToolCallEvent):
                for before in pending:
                    if isinstance(before, PolicyDecisionEvent):
                        self.policy_by_seq[event.seq] = before
                        if before.tool_use_id is not None:
                            self.policy[before.tool_use_id] = before
                        if not before.allowed:
                            self.denials.add(event.seq)
                    elif isinstance(before, CompletionCheckEvent):
                        self.stop_calls.add(event.seq)
                        self.stops[event.seq] = before
                    elif isinstance(before, JobCompleteEvent):
                        self.stop_calls.add(event.seq)
                pending = []
            elif isinstance(event, PolicyDecisionEvent):
                self.governed.add(event.tool)
                pending.append(event)
            elif isinstance(event, CompletionCheckEvent) and event.stop == "end_turn":
                if last_model is not None:
                    self.stops[last_model.seq] = event
            elif isinstance(event, (CompletionCheckEvent, JobCompleteEvent)):
                pending.append(event)
            elif isinstance(event, ModelCallEvent):
                last_model, pending = event, []
            elif isinstance(event, FeedbackEvent) and event.config is not None:
                self._fed.add((event.config, event.call_index))
            elif isinstance(event, InterventionCheckEvent) and event.kind in (
                "intervention",
                "intervention_skipped",
            ):
                self.interventions[event.step] = event

    def stop_at(self, event: Event) -> CompletionCheckEvent | None:
        return self.stops.get(event.seq)

    def denied(self, event: Event) -> bool:
        return event.seq in self.denials

    def fed(self, index: int, call: int) -> bool:
        live = self._config_of.get(index)
        return live is not None and (live, call) in self._fed


def _last_calls(events: Sequence[Event]) -> set[int]:
    """The seqs of each turn's last tool call after which nothing but the loop touched the
    files before the next checkpoint (no person's rewind, no pause)."""
    last: dict[int, int] = {}
    disturbed: set[int] = set()
    for event in events:
        if isinstance(event, ToolCallEvent):
            last[event.turn] = event.seq
            disturbed.discard(event.turn)
        elif (isinstance(event, RewindEvent) and event.source == "person") or isinstance(
            event, RunPausedEvent
        ):
            disturbed.add(event.turn)
    return {seq for turn, seq in last.items() if turn not in disturbed}


def _live_providers(events: Sequence[Event]) -> list[str]:
    started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
    names = started.config.get("feedback_providers") if started is not None else None
    return [str(n) for n in names] if isinstance(names, list) else []


def _match_providers(replayed: Sequence[str], live: Sequence[str]) -> dict[int, int]:
    """Replayed configuration index → the live one of the same provider name (each once)."""
    free = list(enumerate(live))
    matched: dict[int, int] = {}
    for index, name in enumerate(replayed):
        for position, (live_index, live_name) in enumerate(free):
            if live_name == name:
                matched[index] = live_index
                del free[position]
                break
    return matched


# -- helpers ------------------------------------------------------------------------------------


class _FullInputs:
    """The calls' whole inputs: the events clip long ones, so a clipped input is read from
    the messages of the checkpoint after its turn."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self.by_id: dict[str, Mapping[str, Any]] = {}
        self.read: set[int] = set()
        """The turns whose checkpoint was searched."""

    def of(self, event: ToolCallEvent) -> tuple[Mapping[str, Any], bool]:
        recorded = event.input or {}
        if not _clipped(recorded):
            return recorded, True
        if event.tool_use_id not in self.by_id and event.turn + 1 not in self.read:
            self.read.add(event.turn + 1)
            self._learn(self.source.messages(event.turn + 1), event.tool_use_id)
        whole = self.by_id.get(event.tool_use_id)
        return (whole, True) if whole is not None else (recorded, False)

    def _learn(self, messages: Iterable[Any], wanted: str) -> None:
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    found = block.get("input")
                    if isinstance(found, Mapping):
                        self.by_id[str(block.get("id"))] = found
            if wanted in self.by_id:
                return


def _clipped(value: object) -> bool:
    if isinstance(value, str):
        return len(value) >= MAX_EVENT_TEXT and value.endswith("…")
    if isinstance(value, Mapping):
        return any(_clipped(k) or _clipped(v) for k, v in value.items())
    if isinstance(value, list):
        return len(value) > MAX_EVENT_ITEMS or any(_clipped(v) for v in value)
    return False


def _budget_of(config: Mapping[str, Any]) -> Budget:
    try:
        return Budget(
            max_tokens=config.get("max_tokens"),
            max_iterations=int(config.get("max_iterations") or Budget().max_iterations),
            deadline_s=config.get("deadline_s"),
        )
    except (GrNotebookError, TypeError, ValueError):
        return Budget()


def _bridge_names(started: RunStartedEvent | None, config: Mapping[str, Any]) -> Any:
    from gr_notebook.integrations.claude_agent_sdk.tools import ToolNames

    cwd = Path(started.workspace) if started is not None else Path.cwd()
    return ToolNames.of(cwd, None, [str(t) for t in config.get("tools") or []])


def _stub(name: str) -> Tool:
    return Tool(name, f"the recorded tool {name}", {}, _not_run)


def _not_run(_context: object, _params: Mapping[str, Any]) -> ToolOutput:
    raise RuntimeError("a replay runs no tool")


def _wrap_up_order(bypassed: str | None) -> str | None:
    prefix = "the run was told to wrap up ("
    if bypassed and bypassed.startswith(prefix) and bypassed.endswith(")"):
        return bypassed[len(prefix) : -1]
    return None


def _acts_otherwise(effects: Mapping[str, str], decision: str, recorded: str) -> bool:
    """Whether ``decision`` does something else to the run than ``recorded`` did; a row
    that cannot tell, or was not asked, never differs."""
    return decision in effects and recorded in effects and effects[decision] != effects[recorded]


def _why_unknown(has_checkpoint: bool) -> str:
    if not has_checkpoint:
        return "the run has no checkpoint of this turn, so its files are not known"
    return "an earlier call in this turn changed files the checkpoints do not show between"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- sweeps --------------------------------------------------------------------------------------

_KEYWORDS = ("policies", "feedback_providers", "task_completion_checker", "interventions")
_SWEEP_COUNTS = [
    "decisions",
    "denials",
    "asks",
    "feedback",
    "refusals",
    "interventions",
    "cannot_tell",
    "differs",
    "first_divergence_turn",
]


def sweep_guardrails(
    runs: object,
    *,
    make: Callable[..., object],
    grid: Mapping[str, Iterable[Any]],
    store: object = None,
) -> pd.DataFrame:
    """Replay the guardrails ``make(**params)`` builds for every combination of ``grid``
    (parameter name → values) on every run: one tidy row per (run, combination), the grid
    values then the counts. ``make`` returns a guardrail (a policy, a
    ``FeedbackProviderConfig``, a checker, an ``InterventionConfig``), a list of them, or a
    dict of :func:`replay_guardrails` keyword arguments."""
    import pandas as pd

    if not callable(make):
        raise ConfigError("make takes a function: make=lambda **params: gr.MyPolicy(**params)")
    if not isinstance(grid, Mapping):
        raise ConfigError(
            "grid maps make's parameter names to the values to try, e.g. {'n': [1, 2]}"
        )
    names = list(grid)
    values = [list(grid[n]) for n in names]
    if not names or any(not v for v in values):
        raise ConfigError(
            "grid maps make's parameter names to the values to try, e.g. "
            "{'every_n_calls': [5, 10, 20]}; every name needs at least one value"
        )
    combos = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    sets = [(combo, _made(make, combo)) for combo in combos]
    rows: list[dict[str, Any]] = []
    for source in _sources(runs, store, "sweep_guardrails"):  # read while its store is open
        for combo, chosen in sets:
            replay = _replay([source], chosen)
            frame = replay.df
            where = replay.divergences[source.label]
            decisions = frame["decision"]
            rows.append(
                {
                    "run": source.label,
                    **combo,
                    "decisions": len(frame),
                    "denials": int((decisions == "deny").sum()),
                    "asks": int((decisions == "would ask").sum()),
                    "feedback": int((decisions == "feedback fired").sum()),
                    "refusals": int((decisions == "refuse").sum()),
                    "interventions": int((decisions == "intervene").sum()),
                    "cannot_tell": int((decisions == CANNOT_TELL).sum()),
                    "differs": int(frame["differs"].sum()),
                    "first_divergence_turn": where.turn if where is not None else None,
                }
            )
    return pd.DataFrame(rows, columns=["run", *names, *_SWEEP_COUNTS])


def _made(make: Callable[..., object], combo: Mapping[str, Any]) -> _Set:
    made = make(**combo)
    if isinstance(made, Mapping):
        unknown = sorted(set(made) - set(_KEYWORDS))
        if unknown:
            raise ConfigError(
                f"make returned a dict with {', '.join(map(repr, unknown))}; its keys are "
                f"replay_guardrails' keyword arguments: {', '.join(_KEYWORDS)}"
            )
        return _guardrail_set(*(made.get(k) for k in _KEYWORDS))
    items = list(made) if isinstance(made, (list, tuple)) else [made]
    sorted_: dict[str, list[object]] = {k: [] for k in _KEYWORDS}
    for item in items:
        if isinstance(item, FeedbackProviderConfig):
            sorted_["feedback_providers"].append(item)
        elif isinstance(item, InterventionConfig):
            sorted_["interventions"].append(item)
        elif all(hasattr(item, m) for m in ("name", "check", "on_result")):
            sorted_["policies"].append(item)
        elif isinstance(item, TaskCompletionChecker) and not isinstance(item, type):
            sorted_["task_completion_checker"].append(item)
        else:
            raise ConfigError(
                f"make({', '.join(f'{k}={v!r}' for k, v in combo.items())}) returned "
                f"{type(item).__name__}; return a guardrail (a policy, a "
                "FeedbackProviderConfig, a completion checker, an InterventionConfig), a list "
                "of them, or a dict of replay_guardrails keyword arguments"
            )
    if len(sorted_["task_completion_checker"]) > 1 or len(sorted_["interventions"]) > 1:
        raise ConfigError("make returned two checkers or two InterventionConfigs; return one")
    return _guardrail_set(
        sorted_["policies"],
        sorted_["feedback_providers"],
        next(iter(sorted_["task_completion_checker"]), None),
        next(iter(sorted_["interventions"]), None),
    )
