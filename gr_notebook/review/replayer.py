"""The replayer: one recorded run walked event by event, the replayed guardrails asked at
each point they are asked live, one row per point and guardrail."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import GrNotebookError, TodoError
from gr_notebook.events import (
    CompletionCheckEvent,
    ErrorEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    ModelCallEvent,
    PoliciesResetEvent,
    PolicyDecisionEvent,
    RewindEvent,
    RunStartedEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
)
from gr_notebook.guardrails.budget import Budget
from gr_notebook.guardrails.completion import PLAN_FILE, STOP_BY_TOOL, TaskCompletionChecker
from gr_notebook.guardrails.interventions import (
    InterventionCheck,
    InterventionEngine,
    replay_steps,
)
from gr_notebook.guardrails.policy import PolicyDecision
from gr_notebook.guardrails.runtime import Denial, Guardrails
from gr_notebook.guardrails.spec import DEFAULT_MAX_REFUSALS, GuardrailSpec
from gr_notebook.harness import CLAUDE_AGENT_SDK, GR_LOOP, LANGCHAIN
from gr_notebook.review.replay_guardrail_set import (
    NOTHING,
    GuardrailSet,
    WatchedPolicy,
    checker_name,
    checker_reads,
    feedback_reads,
    policy_reads,
    provider_name,
)
from gr_notebook.review.replay_record import LiveRecord, last_calls
from gr_notebook.review.replay_sources import FullInputs, RecordedRun
from gr_notebook.review.replay_view import ReplayView
from gr_notebook.review.replay_workspace import ReplayWorkspace
from gr_notebook.tools.base import Tool, ToolOutput
from gr_notebook.workflow.todos import TODOS_FILE, TodoList

if TYPE_CHECKING:
    from gr_notebook.history.checkpoint_store import Checkpoint

__all__ = ["CANNOT_TELL", "Replayer"]

CANNOT_TELL = "cannot tell"

_TODOS: dict[str, TodoList] = {}
"""Todo lists parsed from a checkpoint's file, by its hash: a list is a frozen value, and
a sweep replays the same turns many times."""
_MAX_TODOS = 4096

_EFFECT = {"allow": "run", "deny": "not run", "ask": "ask"}
_STOPPED = {"accept": "stop", "bypass": "stop", "refuse": "go on"}


class Replayer:
    """One run's replay: the record walked once, the guardrails asked at each point."""

    def __init__(self, source: RecordedRun, chosen: GuardrailSet) -> None:
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
        self.watched = [WatchedPolicy(p) for p in chosen.policies]
        self.stubs: dict[str, Tool] = {}
        self.keys: dict[int, str] = {}
        self.guards = self._guardrails(config)
        self.live = LiveRecord(events, [provider_name(c) for c in chosen.feedback])
        self.tainted: set[tuple[str, str]] = set()
        """(guardrail, path): a memory stamped while the file was not known."""
        self.feedback_tainted: set[int] = set()
        self.out: list[dict[str, Any]] = []
        self.checks: list[InterventionCheckEvent] = []
        """The replayed intervention checks, each at the turn of the call it followed."""
        self.last_calls = last_calls(events)
        self.winding_down = False
        """The run was told to wrap up: the live interventions no longer observed."""
        self._turn: int | None = None
        self._calls = self._turn_calls = self._turn_refused = 0
        self._steps: list[tuple[str, Mapping[str, Any], str, bool] | None] = []
        """The calls as the interventions observe them; None where a person rewound."""
        self._call_rows: dict[int, tuple[ToolCallEvent, str, bool]] = {}

    def _guardrails(self, config: Mapping[str, Any]) -> Guardrails:
        """The real guardrails over stubs of the recorded tools (a replay runs none), the
        policies watched so each one's answer can be read for its row."""
        events = self.source.events
        tools = sorted({self._tool_name(e) for e in events if isinstance(e, ToolCallEvent)})
        names = [*tools, *map(str, config.get("tools") or [])]
        self.stubs = {name: _stub(name) for name in names}
        spec = GuardrailSpec.build(
            tools=list(self.stubs.values()),
            policies=self.watched,
            feedback_providers=self.chosen.feedback,
            checker=self.chosen.checker,
            max_refusals=int(config.get("max_refusals") or DEFAULT_MAX_REFUSALS),
        )
        self.keys = {id(b.policy): b.key for b in spec.bindings}
        return Guardrails(spec, self.view, harness=self.harness)

    def _tool_name(self, event: ToolCallEvent) -> str:
        return self.names.gr_name(event.tool) if self.names is not None else event.tool

    def rows(self) -> list[dict[str, Any]]:
        """Walk the record once and return the rows, in the order the run reached them."""
        try:
            self._walk()
        finally:
            self.space.close()
        return self.out

    # -- the walk -----------------------------------------------------------------------------

    def _walk(self) -> None:
        """Move the view along the record, then replay the interventions over the calls."""
        self._checkpoint = self.source.checkpoints()
        self._inputs = FullInputs(self.source)
        for event in self.source.events:
            self.view.now = event.time
            if event.turn != self._turn:
                self._next_turn(event.turn)
            self._on_event(event)
        if self.chosen.interventions is not None:
            self._interventions(self._steps, self._call_rows)
        self._put_rows_in_order()

    def _next_turn(self, turn: int) -> None:
        """Close the turn that ended (the guardrails count a turn with work done, as live)
        and set the files and the state the new one began with."""
        if self._turn is not None and self._turn_calls and self._turn_refused < self._turn_calls:
            self.guards.note_work()
        self._turn_calls = self._turn_refused = 0
        self._turn = turn
        self._begin_turn(turn, self._checkpoint)

    def _on_event(self, event: Event) -> None:
        """Move the view as the event moved the live run, and ask the guardrails where the
        event is a point they decide on (a stop, a tool call)."""
        view = self.view
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
            self._steps.append(None)  # the tracker resets, as it did live
        elif isinstance(event, ToolCallEvent):
            self._on_tool_call(event)

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        """Replay one call with its whole input under gr's tool names, and keep it as a
        step for the interventions."""
        self._calls += 1
        params, full = self._inputs.of(event)
        tool = self._tool_name(event)
        if self.names is not None:
            params = dict(self.names.call(event.tool, params).params)
        refused = self._call(event, tool, params, full, self._calls)
        self._turn_calls += 1
        self._turn_refused += refused
        if not self.winding_down:  # told to wrap up, the live run stopped observing
            self._steps.append((tool, params, event.result or "", bool(event.is_error)))
        self._call_rows[self._calls] = (event, tool, full)

    def _put_rows_in_order(self) -> None:
        """Sort the rows as the run reached them: by event, then guardrail kind."""
        self.out.sort(key=lambda r: (r["seq"], r["_order"]))
        for row in self.out:
            del row["_order"]

    def _begin_turn(self, turn: int, checkpoint: Callable[[int], Checkpoint | None]) -> None:
        """Set the files, the wrap-up order and the todo list from the turn's checkpoints."""
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
            found = _TODOS.get(digest)
            if found is None:
                with contextlib.suppress(TodoError, UnicodeDecodeError):
                    found = _TODOS[digest] = TodoList.loads(now.read(digest).decode())
                    while len(_TODOS) > _MAX_TODOS:
                        del _TODOS[next(iter(_TODOS))]
            if found is not None:
                self.view.todos = found

    # -- a tool call ----------------------------------------------------------------------------

    def _call(
        self, event: ToolCallEvent, tool: str, params: Mapping[str, Any], full: bool, n: int
    ) -> bool:
        """Ask the policies, the checker if the call stops the job, then on_result and the
        feedback; returns whether the replayed checker refused the stop."""
        stub = self.stubs.get(tool) or _stub(tool)
        live = self.live
        base = self._base(event, "tool call", event.tool, event.tool_use_id, full)
        decision = live.policy.get(event.tool_use_id) or live.policy_by_seq.get(event.seq)
        reached = decision is not None or not (
            (event.result or "").startswith("Not run:") or tool in live.governed
        )  # a call a live guardrail stopped unseen was never asked of the others
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
            self._after_success(event, stub, params)
        self._feedback(event, tool, params, base, n)  # counts the call, as policies read it
        return refused

    def _base(
        self,
        event: ToolCallEvent | ModelCallEvent,
        point: str,
        tool: str | None,
        tool_use_id: str | None,
        full: bool,
    ) -> dict[str, Any]:
        """The columns a point's rows share, whichever guardrail they are of."""
        return {
            "run": self.source.label,
            "turn": event.turn,
            "seq": event.seq,
            "point": point,
            "tool": tool,
            "tool_use_id": tool_use_id,
            "full_input": full,
            "after_divergence": False,
        }

    def _after_success(self, event: ToolCallEvent, stub: Tool, params: Mapping[str, Any]) -> None:
        """Let the policies record the result (on_result), noting the memories they stamp
        from files the replay does not know, so their later decisions can say so."""
        read = []
        for watched in self.watched:
            key = self.keys[id(watched)]
            paths = policy_reads(watched.policy, stub.name, params, after=True)
            read.append(paths)
            if paths is None or not self.space.knows(paths):
                self.tainted |= {(key, p) for p in (paths or ("*",))}
            else:
                self.tainted -= {(key, p) for p in paths}
        self._materialize(read)
        self.guards.after_success(stub, params, ToolOutput(event.result or ""), turn=event.turn)
        self.view.take()

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
        self._materialize(policy_reads(w.policy, stub.name, params) for w in self.watched)
        denial = self.guards.check(stub, params, turn=event.turn, tool_use_id=event.tool_use_id)
        self.view.take()
        happened = "allow" if live is None or live.allowed else "deny"
        for order, watched in enumerate(self.watched):
            key = self.keys[id(watched)]
            error = watched.error
            if key not in {b.key for b in self.guards.spec.by_tool.get(stub.name, ())}:
                continue
            decision, reason = self._policy_decision(watched, key, denial)
            paths = policy_reads(watched.policy, stub.name, params)
            unknown = paths is None or not self.space.knows(paths)
            if (
                decision != "not asked"
                and paths != NOTHING
                and (unknown or any((key, p) in self.tainted for p in paths or ("*",)))
            ):
                decision, reason = CANNOT_TELL, _why_unknown(self.space.known)
            recorded = _policy_recorded(key, live, happened)
            differs = _acts_otherwise(_EFFECT, decision, recorded)
            self._row(
                base,
                order,
                kind="policy",
                guardrail=key,
                decision=decision,
                reason=reason,
                error=error,
                live=recorded,
                differs=differs,
            )
        return denial.policy if denial is not None else None

    @staticmethod
    def _policy_decision(
        watched: WatchedPolicy, key: str, denial: Denial | None
    ) -> tuple[str, str | None]:
        """A policy's decision in the row's words and its reason: one that raised denies,
        as live; one another denied before it was not asked."""
        answer, error = watched.answer, watched.error
        if answer is None and error is None:
            return "not asked", f"{denial.policy} denied first" if denial else None
        if error is not None or not isinstance(answer, PolicyDecision):
            return "deny", denial.reason if denial is not None and denial.policy == key else error
        return answer.verdict, answer.reason

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
            base = self._base(event, "stop", None, None, True)
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
        recorded = self._stop_recorded(event, live)
        differs = _acts_otherwise(_STOPPED, decision, recorded)
        self._row(
            {**base, "point": "stop"},
            len(self.watched),
            kind="checker",
            guardrail=checker_name(checker),
            decision=decision,
            reason=reason,
            error=error,
            live=recorded,
            differs=differs,
        )
        return decision == "refuse"

    def _stop_recorded(
        self, event: ToolCallEvent | ModelCallEvent, live: CompletionCheckEvent | None
    ) -> str:
        """What the live checker did at this stop, in the row's words; with no live
        check the stop went through, unless a live policy denied the call."""
        if live is None:
            return "accept" if not self.live.denied(event) else "not asked"
        return live.verdict

    def _judge(
        self, checker: TaskCompletionChecker, kind: str, tentative: Any
    ) -> tuple[str, str | None, str | None]:
        """The checker's decision, its reason and its error, as the live guardrails judge."""
        self._materialize([checker_reads(checker, self.plan_file)])
        verdict = self.guards.judge_stop(kind, tentative)  # type: ignore[arg-type]
        emitted = self.view.take()
        check = next((e for e in emitted if isinstance(e, CompletionCheckEvent)), None)
        error = next(
            (f"{e.error_type}: {e.message}" for e in emitted if isinstance(e, ErrorEvent)), None
        )
        if verdict.bypassed:
            return "bypass", verdict.bypassed, error
        decision = "accept" if verdict.allowed else "refuse"
        reason = check.feedback if check is not None else verdict.feedback
        paths = checker_reads(checker, self.plan_file)
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
        """Count the call for the feedback triggers, and one row per provider: whether
        it fired, or "cannot tell" where it reads files the replay does not know."""
        if not self.chosen.feedback:
            self.guards.after_call(tool, params, is_error=bool(event.is_error), turn=event.turn)
            return
        triggers = self.guards.feedback.to_json(recent=False)["triggers"]
        self._materialize(feedback_reads(config) for config in self.chosen.feedback)
        self.guards.after_call(tool, params, is_error=bool(event.is_error), turn=event.turn)
        emitted = self.view.take()
        fired = {e.config: e for e in emitted if isinstance(e, FeedbackEvent)}
        errors = {
            e.provider: f"{e.error_type}: {e.message}"
            for e in emitted
            if isinstance(e, ErrorEvent) and e.source == "feedback"
        }
        for index, config in enumerate(self.chosen.feedback):
            name = provider_name(config)
            block = fired.get(index)
            decision = "fire" if block is not None else "skip"
            reason = block.summary if block is not None else None
            paths = NOTHING if triggers[index]["file_fired"] else feedback_reads(config)
            if (paths is None or paths) and (
                index in self.feedback_tainted or not self.space.knows(paths)
            ):
                self.feedback_tainted.add(index)
                decision, reason = CANNOT_TELL, _why_unknown(self.space.known)
            recorded = "fire" if self.live.fed(index, n) else "skip"
            self._row(
                {**base, "point": "tool call"},
                len(self.watched) + 1 + index,
                kind="feedback",
                guardrail=name,
                decision=decision,
                reason=reason,
                error=errors.get(name),
                live=recorded,
                differs=decision != CANNOT_TELL and decision != recorded,
            )

    # -- interventions --------------------------------------------------------------------------

    def _interventions(
        self,
        steps: list[tuple[str, Mapping[str, Any], str, bool] | None],
        calls: Mapping[int, tuple[ToolCallEvent, str, bool]],
    ) -> None:
        """Replay the intervention engine over the calls as it observed them live, one
        row per check."""
        config = self.chosen.interventions
        checks: list[InterventionCheck] = replay_steps(InterventionEngine(config), steps)
        for check in checks:
            event, _tool, full = calls[check.step]
            live = self.live.interventions.get(check.step)
            replayed = replace(check.event(), turn=event.turn)
            self.checks.append(replayed)
            decision = replayed.verdict
            reason = replayed.why
            recorded = "no check" if live is None else live.verdict
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
                live=recorded,
                differs=(check.fired or live is not None) and decision != recorded,
            )

    def _materialize(self, reads: Iterable[Sequence[str] | None]) -> None:
        """Write out what the guardrails about to decide read (None: every file)."""
        wanted: list[str] = []
        for paths in reads:
            if paths is None:
                self.space.materialize(None)
                return
            wanted += paths
        if wanted:
            self.space.materialize(wanted)

    def _row(self, base: Mapping[str, Any], order: int, **fields: Any) -> None:
        self.out.append({**base, **fields, "_order": order})


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


def _policy_recorded(key: str, live: PolicyDecisionEvent | None, happened: str) -> str:
    """What the live policy ``key`` did to the call: not asked when another denied first;
    a policy that was not live is set beside what happened to the call."""
    if live is None or key not in live.policies:
        return happened
    if not live.allowed and live.policy != key:
        return "not asked"
    return "allow" if live.allowed else "deny"


def _acts_otherwise(effects: Mapping[str, str], decision: str, recorded: str) -> bool:
    """Whether ``decision`` does something else to the run than ``recorded`` did; a row
    that cannot tell, or was not asked, never differs."""
    return decision in effects and recorded in effects and effects[decision] != effects[recorded]


def _why_unknown(has_checkpoint: bool) -> str:
    if not has_checkpoint:
        return "the run has no checkpoint of this turn, so its files are not known"
    return "an earlier call in this turn changed files the checkpoints do not show between"
