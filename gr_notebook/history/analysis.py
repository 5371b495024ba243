"""DataFrames over a run's events. pandas is imported only when a frame is asked for.

Every frame is derived from events alone, so a live run, a finished one and one read back
from the store are analysed the same way. The columns are declared against the events'
fields (:data:`FRAMES`), as Inspect AI's are against its event classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gr_notebook.errors import ConfigError
from gr_notebook.events import (
    ApprovalAnsweredEvent,
    ApprovalRequestedEvent,
    CompletionCheckEvent,
    Event,
    FeedbackEvent,
    GuidanceEvent,
    InterventionCheckEvent,
    JobCompleteEvent,
    ModelCallEvent,
    ParentCallsEvent,
    PhaseStartedEvent,
    PhaseTransitionEvent,
    PolicyDecisionEvent,
    ThinkingEvent,
    TodoCompletedEvent,
    TodosWrittenEvent,
    ToolCallEvent,
    ToolIntentEvent,
    ToolRecoveredEvent,
    as_typed,
    directive_of,
)

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.store import Store, StoreLike

__all__ = [
    "APPROVAL_COLUMNS",
    "EFFECT_COLUMNS",
    "FRAMES",
    "GUIDANCE_COLUMNS",
    "INTERVENTION_COLUMNS",
    "EventColumn",
    "EventFrame",
    "approvals_df",
    "completion_df",
    "events_df",
    "events_of",
    "feedback_df",
    "guidance_df",
    "interventions_df",
    "phases_df",
    "policy_df",
    "runs_df",
    "shadow_df",
    "thinking_df",
    "tool_calls_df",
    "turns_df",
]


def events_of(run: object, call: str) -> list[Event]:
    """The events of ``run``, a Run (its ``.events``) or an iterable of events, for the
    readers that take either (``call`` names the one, for its message); ConfigError saying
    what it takes for anything else, so a wrong argument is not iterated as events."""
    found = getattr(run, "events", run)
    wrong = f"{call} takes a Run or its events (run.events, store.events(run_id)), not "
    if isinstance(found, (str, bytes)) or not isinstance(found, Iterable):
        raise ConfigError(wrong + ("None" if run is None else type(run).__name__))
    events = list(found)
    strays = [e for e in events if not isinstance(e, Event)]
    if strays:
        raise ConfigError(wrong + f"a sequence holding {type(strays[0]).__name__}")
    return events


@dataclass(frozen=True, slots=True)
class EventColumn:
    """One column of a DataFrame, declared against a field of the events it reads:
    ``path`` is the field (``tool``), an envelope field (``turn``) or a field of a nested
    record (``directive.source``); it defaults to the column's name."""

    name: str
    path: str = ""
    compute: Callable[[Event], Any] | None = field(default=None, repr=False, compare=False)
    """Computes the value instead, when no field holds it as shown."""
    read: Callable[[Event], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "read", self.compute or attrgetter(self.path or self.name))


@dataclass(frozen=True, slots=True)
class EventFrame:
    """A DataFrame with one row per event of ``kinds``."""

    kinds: tuple[type[Event], ...]
    columns: tuple[EventColumn, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def rows(self, events: Iterable[Event]) -> list[list[Any]]:
        columns, kinds = self.columns, self.kinds
        return [[c.read(e) for c in columns] for e in map(as_typed, events) if isinstance(e, kinds)]

    def build(self, events: Iterable[Event]) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows(events), columns=self.names)


def _columns(*names: str) -> tuple[EventColumn, ...]:
    return tuple(EventColumn(n) for n in names)


def _text(lines: Sequence[str] | None) -> str | None:
    """Lines kept in an event (a traceback), as one text to print; None for none."""
    return "\n".join(lines) if lines else None


MODE = EventColumn("mode", compute=lambda e: getattr(e, "mode", None) or "live")
"""``live``, or ``shadow`` for a shadow guardrail's decision (which nothing acted on)."""


_AT = ("seq", "turn", "phase")
FRAMES: Mapping[str, EventFrame] = {
    "turns_df": EventFrame(
        (ModelCallEvent,),
        _columns(
            "turn",
            "phase",
            "input_tokens",
            "output_tokens",
            "context_tokens",
            "layer1_tokens",
            "layer2_tokens",
            "layer3_tokens",
            "layer4_tokens",
            "layer5_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_usd",
            "stop_reason",
            "tool_calls",
            "duration_s",
            "tokens_used",
            "tokens_budget",
            "iterations_used",
            "iterations_max",
            "budget_scope",
            "budget_tokens_used",
            "budget_iterations_used",
        ),
    ),
    "tool_calls_df": EventFrame(
        (ToolCallEvent,),
        _columns("turn", "phase", "tool", "input", "is_error", "result", "duration_s"),
    ),
    "thinking_df": EventFrame(
        (ThinkingEvent,), _columns(*_AT, "blocks", "redacted", "chars", "text")
    ),
    "policy_df": EventFrame(
        (PolicyDecisionEvent,),
        (
            *_columns(*_AT, "tool"),
            EventColumn("decision", "verdict"),
            EventColumn("guardrail", "policy"),
            *_columns("reason", "policies"),
            MODE,
            EventColumn("traceback", compute=lambda e: _text(getattr(e, "traceback", None))),
        ),
    ),
    "feedback_df": EventFrame(
        (FeedbackEvent,),
        (*_columns(*_AT, "provider", "severity", "summary", "call_index", "tool", "text"), MODE),
    ),
    "completion_df": EventFrame(
        (CompletionCheckEvent,),
        (
            *_columns(*_AT, "stop", "checker", "complete", "bypassed", "refusals", "feedback"),
            MODE,
        ),
    ),
    "interventions_df": EventFrame(
        (InterventionCheckEvent,),
        (
            *_columns(
                "step",
                "turn",
                "tier",
                "fired",
                "skip_reason",
                "why",
                "stuck_counter",
                "steps_since_reset",
                "recent_edits",
            ),
            MODE,
        ),
    ),
    "guidance_df": EventFrame(
        (GuidanceEvent,),
        (
            *_columns(*_AT),
            *(
                EventColumn(n, f"directive.{n}")
                for n in (
                    "source",
                    "action",
                    "text",
                    "reads",
                    "avoid_reads",
                    "from_limits",
                    "phase_name",
                    "phase_kind",
                    "tasks_left",
                    "phases_left",
                    "job_done",
                    "tokens_pct",
                    "iterations_pct",
                    "deadline_pct",
                    "limits_pct",
                )
            ),
        ),
    ),
}
"""Every DataFrame that has one row per event, by the name of its function. The columns
read typed fields, so a renamed field fails here, not as None in a column."""

INTERVENTION_COLUMNS = FRAMES["interventions_df"].names
GUIDANCE_COLUMNS = FRAMES["guidance_df"].names
_BASE = ["seq", "kind", "turn", "phase", "time"]
_PHASE_COLUMNS = [
    "phase",
    "name",
    "kind",
    "started_turn",
    "ended_turn",
    "tasks",
    "done",
    "input_tokens",
    "outcome",
]


def guidance_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per order the system gave the model, with the state of the job then: the
    ``directive`` of any event that delivered one."""
    orders = []
    for e in events:
        record = directive_of(e)
        if record is not None:
            orders.append(
                GuidanceEvent(directive=record, seq=e.seq, turn=e.turn, phase=e.phase, time=e.time)
            )
    return FRAMES["guidance_df"].build(orders)


def events_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per event: ``seq, kind, turn, phase, time``, then the data flattened."""
    import pandas as pd

    events = list(events)
    base = pd.DataFrame([[getattr(e, c) for c in _BASE] for e in events], columns=_BASE)
    if not events:
        return base
    payload = pd.json_normalize([e.to_data() for e in events], sep=".")
    payload = payload.drop(columns=[c for c in payload.columns if c in _BASE])
    return pd.concat([base, payload], axis=1)


def turns_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per model call, with the tokens of each context layer."""
    frame = FRAMES["turns_df"].build(events)
    frame["cost_usd"] = frame["cost_usd"].astype(float)  # None (no price) reads as NaN
    return frame


def phases_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per todo list (a phase attempt), from its start to the next one's start.

    Tokens spent on a transition count toward the phase that just ended. ``outcome`` is
    ``complete``, ``rewound`` or ``reset``, and None for a list the run left unfinished.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for e in map(as_typed, events):
        if isinstance(e, PhaseStartedEvent):
            if current is not None:
                current["ended_turn"] = e.turn
            current = {
                "phase": e.phase_number,
                "name": e.name,
                "kind": e.todo_kind,
                "started_turn": e.turn,
                "ended_turn": None,
                "tasks": e.tasks,
                "done": 0,
                "input_tokens": 0,
                "outcome": None,
            }
            rows.append(current)
        elif current is None:
            continue
        elif isinstance(e, ModelCallEvent):
            current["input_tokens"] += e.input_tokens
            current["ended_turn"] = e.turn
        elif isinstance(e, TodosWrittenEvent) and e.phase_number == current["phase"]:
            current["tasks"] = len(e.titles)
        elif isinstance(e, TodoCompletedEvent):
            current["done"] += 1
        elif isinstance(e, PhaseTransitionEvent):
            current["outcome"] = e.outcome
        elif isinstance(e, JobCompleteEvent) and current["outcome"] is None:
            current["outcome"] = "complete"
    return pd.DataFrame(rows, columns=_PHASE_COLUMNS)


EFFECT_COLUMNS = ["effect", "key", "recovery", "unverified", "parent_made"]
"""What :func:`tool_calls_df` adds from the side-effect records (decision 406): the tool's
effect class and the call's idempotency key (None for a call that never ran: refused, or
recorded before these records existed), what a resume did about it, whether its outcome is
unknown, and whether a fork's parent made the same call (same key) after the fork's turn."""


def tool_calls_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per tool call: what it was, its result, and what it did to the world
    (:data:`EFFECT_COLUMNS`)."""
    events = [as_typed(e) for e in events]
    frame = FRAMES["tool_calls_df"].build(events)
    intents: dict[tuple[int, str], ToolIntentEvent] = {}
    recovered: dict[tuple[int, str], ToolRecoveredEvent] = {}
    inherited: set[str] = set()
    for e in events:
        if isinstance(e, ToolIntentEvent):
            intents[e.turn, e.tool_use_id] = e
        elif isinstance(e, ToolRecoveredEvent):
            recovered[e.turn, e.tool_use_id] = e
        elif isinstance(e, ParentCallsEvent):
            inherited |= {str(c.get("key")) for c in e.calls if isinstance(c, Mapping)}
    rows = []
    for e in events:
        if not isinstance(e, ToolCallEvent):
            continue
        intent = intents.get((e.turn, e.tool_use_id))
        verdict = recovered.get((e.turn, e.tool_use_id))
        key = intent.key if intent is not None else None
        rows.append(
            [
                intent.effect if intent is not None else None,
                key,
                verdict.verdict if verdict is not None else None,
                verdict is not None and verdict.verdict == "unverified",
                key is not None and key in inherited,
            ]
        )
    for i, name in enumerate(EFFECT_COLUMNS):
        frame[name] = [row[i] for row in rows]
    return frame


def thinking_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per reply that thought: its blocks, the redacted ones, and the text (clipped
    as events are; ``chars`` is the whole text's length)."""
    return FRAMES["thinking_df"].build(events)


def policy_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per governed tool call: the ``decision`` (``allow``, ``deny``, ``ask``), and
    for a denial or an ask the ``guardrail`` (the policy) that made it and its ``reason``;
    ``policies`` are those asked. A policy that raised denies, and its ``traceback`` (the
    last lines, as text to ``print``) is in the row."""
    return FRAMES["policy_df"].build(events)


APPROVAL_COLUMNS = [
    "request_id",
    "turn",
    "tool",
    "tool_use_id",
    "guardrail",
    "reason",
    "asked",
    "input",
    "problem",
    "decision",
    "by",
    "answer_reason",
    "edited_input",
    "edit_problem",
    "waited_s",
]


def approvals_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per question put to a person about a tool call: the ``guardrail`` (the
    policies) that asked, who was asked, the ``decision`` (``approve``, ``deny``, ``edit``;
    None while it waits), who gave it, and the seconds waited. A refused edit is its own
    row, and the question asked again is the next."""
    import pandas as pd

    rows: dict[str, dict[str, Any]] = {}
    for e in map(as_typed, events):
        if isinstance(e, ApprovalRequestedEvent):
            rows[e.request_id] = {
                "request_id": e.request_id,
                "turn": e.turn,
                "tool": e.tool,
                "tool_use_id": e.tool_use_id,
                "guardrail": ", ".join(e.policies),
                "reason": e.reason,
                "asked": e.asked,
                "input": e.input,
                "problem": e.problem,
            }
        elif isinstance(e, ApprovalAnsweredEvent) and e.request_id in rows:
            rows[e.request_id].update(
                decision=e.decision,
                by=e.by,
                answer_reason=e.reason,
                edited_input=e.input,
                edit_problem=e.problem,
                waited_s=e.waited_s,
            )
    return pd.DataFrame(list(rows.values()), columns=APPROVAL_COLUMNS)


def feedback_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per feedback block delivered; ``text`` is the block as the model read it."""
    return FRAMES["feedback_df"].build(events)


def completion_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per attempt to stop: ``complete`` True/False, or ``bypassed`` with the limit
    that was spent (then ``complete`` is None)."""
    return FRAMES["completion_df"].build(events)


def interventions_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per intervention check (every ``check_every`` tool calls; ``step`` counts
    them): ``fired`` with its tier, or the safeguard that held it off in ``skip_reason`` (a
    code to filter on), with ``why`` saying the same in words."""
    return FRAMES["interventions_df"].build(events)


def shadow_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per shadow decision that differs from what happened live at the same call,
    stop or check: ``seq, turn, kind, guardrail, tool, tool_use_id, live, decision, reason``
    (see :class:`~gr_notebook.history.shadow_rows.ShadowRow`). Empty when the shadows agree
    with the run, or when it had none."""
    import pandas as pd

    from gr_notebook.history.shadow_rows import SHADOW_COLUMNS, shadow_rows

    return pd.DataFrame([r.values() for r in shadow_rows(events)], columns=SHADOW_COLUMNS)


def runs_df(store: StoreLike | None = None) -> pd.DataFrame:
    """Every run in the store (default ``gr_runs/store.sqlite``), newest first.

    A run recorded as ``running`` whose process no longer holds its workspace (killed, or
    its kernel died) shows as ``interrupted``: the store alone cannot tell it from a live one.
    A fork or a resumed run names its ``parent_run_id``, ``parent_turn`` and ``relation``;
    ``checkpoints`` counts a run's turns that can be forked, and ``resumable`` marks the
    interrupted runs ``gr.resume`` takes. Reading creates nothing: with no store at the
    default path (nothing run yet) the frame is empty; a ``store=`` path where there is none
    is a StoreError, since it is a mistyped one.
    """
    import pandas as pd

    from gr_notebook.history.store import DEFAULT_STORE_PATH, reading

    if store is None and not DEFAULT_STORE_PATH.exists():
        return pd.DataFrame([])
    with reading(store) as opened:
        return pd.DataFrame(_time_travel(opened, _live_status(opened.runs())))


def _time_travel(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from gr_notebook.history.checkpoint_store import RESUMABLE, checkpoints_by_run
    from gr_notebook.history.lineage import lineage

    links = lineage(store)
    parents = {link.run_id: link for link in links}
    resumed = {link.parent_run_id for link in links if link.relation == "resume"}
    counts = checkpoints_by_run(store)
    for run in runs:
        link = parents.get(run["run_id"])
        run["parent_run_id"] = link.parent_run_id if link else None
        run["parent_turn"] = link.parent_turn if link else None
        run["relation"] = link.relation if link else None
        run["checkpoints"] = counts.get(run["run_id"], (0, 0))[0]
        run["resumable"] = (
            run["status"] in RESUMABLE and run["checkpoints"] > 0 and run["run_id"] not in resumed
        )
    return runs


def _live_status(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from gr_notebook.errors import WorkspaceError
    from gr_notebook.workflow.workspace_lock import live_owner

    for run in runs:
        if run["status"] == "running":
            try:
                owner = live_owner(run["workspace"]) if run["workspace"] else None
            except WorkspaceError:  # its .gr is a link, never read: said as it was stored
                continue
            if owner is None or owner.run_id not in ("", run["run_id"]):
                run["status"] = "interrupted"
    return runs
