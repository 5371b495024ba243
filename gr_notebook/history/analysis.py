"""DataFrames over a run's events. pandas is imported only when a frame is asked for.

Every frame is derived from events alone, so a live run, a finished one and one read back
from the store are analysed the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gr_notebook.events import Event

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.store import Store

__all__ = [
    "completion_df",
    "events_df",
    "feedback_df",
    "guidance_df",
    "interventions_df",
    "phases_df",
    "policy_df",
    "runs_df",
    "tool_calls_df",
    "turns_df",
]

_BASE = ["seq", "kind", "turn", "phase", "time"]
_TURN_COLUMNS = [
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
]
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
_TOOL_COLUMNS = ["turn", "phase", "tool", "input", "is_error", "result", "duration_s"]
_POLICY_COLUMNS = ["seq", "turn", "phase", "tool", "allowed", "policy", "reason", "policies"]
_FEEDBACK_COLUMNS = [
    "seq",
    "turn",
    "phase",
    "provider",
    "severity",
    "summary",
    "call_index",
    "tool",
    "text",
]
INTERVENTION_COLUMNS = [
    "step",
    "turn",
    "tier",
    "fired",
    "skip_reason",
    "stuck_counter",
    "steps_since_reset",
    "recent_edits",
]
_COMPLETION_COLUMNS = [
    "seq",
    "turn",
    "phase",
    "stop",
    "checker",
    "complete",
    "bypassed",
    "refusals",
    "feedback",
]


GUIDANCE_COLUMNS = [
    "seq",
    "turn",
    "phase",
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
]


def guidance_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per order the system gave the model, with the state of the job then."""
    import pandas as pd

    rows = [
        {
            "seq": e.seq,
            "turn": e.turn,
            "phase": e.phase,
            **{c: g.get(c) for c in GUIDANCE_COLUMNS[3:]},
        }
        for e in events
        if isinstance(g := e.data.get("directive"), Mapping)
    ]
    return pd.DataFrame(rows, columns=GUIDANCE_COLUMNS)


def events_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per event: ``seq, kind, turn, phase, time``, then the payload flattened."""
    import pandas as pd

    events = list(events)
    base = pd.DataFrame([[getattr(e, c) for c in _BASE] for e in events], columns=_BASE)
    if not events:
        return base
    payload = pd.json_normalize([dict(e.data) for e in events], sep=".")
    payload = payload.drop(columns=[c for c in payload.columns if c in _BASE])
    return pd.concat([base, payload], axis=1)


def turns_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per model call, with the tokens of each context layer."""
    import pandas as pd

    rows = [
        {"turn": e.turn, "phase": e.phase, **{c: e.data.get(c) for c in _TURN_COLUMNS[2:]}}
        for e in events
        if e.kind == "model_call"
    ]
    frame = pd.DataFrame(rows, columns=_TURN_COLUMNS)
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
    for e in events:
        if e.kind == "phase_started":
            if current is not None:
                current["ended_turn"] = e.turn
            current = {
                "phase": e.data.get("phase", e.phase),
                "name": e.data.get("name"),
                "kind": e.data.get("kind"),
                "started_turn": e.turn,
                "ended_turn": None,
                "tasks": e.data.get("tasks", 0),
                "done": 0,
                "input_tokens": 0,
                "outcome": None,
            }
            rows.append(current)
        elif current is None:
            continue
        elif e.kind == "model_call":
            current["input_tokens"] += e.data.get("input_tokens", 0)
            current["ended_turn"] = e.turn
        elif e.kind == "todos_written" and e.data.get("phase") == current["phase"]:
            current["tasks"] = len(e.data.get("titles", ()))
        elif e.kind == "todo_completed":
            current["done"] += 1
        elif e.kind == "phase_transition":
            current["outcome"] = e.data.get("outcome")
        elif e.kind == "job_complete" and current["outcome"] is None:
            current["outcome"] = "complete"
    return pd.DataFrame(rows, columns=_PHASE_COLUMNS)


def tool_calls_df(events: Iterable[Event]) -> pd.DataFrame:
    import pandas as pd

    rows = [
        {"turn": e.turn, "phase": e.phase, **{c: e.data.get(c) for c in _TOOL_COLUMNS[2:]}}
        for e in events
        if e.kind == "tool_call"
    ]
    return pd.DataFrame(rows, columns=_TOOL_COLUMNS)


def policy_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per governed tool call: ``allowed``, and for a denial the policy and reason."""
    return _rows_of(events, "policy_decision", _POLICY_COLUMNS)


def feedback_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per feedback block delivered; ``text`` is the block as the model read it."""
    return _rows_of(events, "feedback", _FEEDBACK_COLUMNS)


def completion_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per attempt to stop: ``complete`` True/False, or ``bypassed`` with the limit
    that was spent (then ``complete`` is None)."""
    return _rows_of(events, "completion_check", _COMPLETION_COLUMNS)


def interventions_df(events: Iterable[Event]) -> pd.DataFrame:
    """One row per intervention check (every ``check_every`` tool calls): ``fired`` with its
    tier, or the safeguard that held it off in ``skip_reason``."""
    import pandas as pd

    rows = [
        {"turn": e.turn, **{c: e.data.get(c) for c in INTERVENTION_COLUMNS if c != "turn"}}
        for e in events
        if e.kind in ("intervention", "intervention_skipped")
    ]
    return pd.DataFrame(rows, columns=INTERVENTION_COLUMNS)


def _rows_of(events: Iterable[Event], kind: str, columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    rows = [
        {"seq": e.seq, "turn": e.turn, "phase": e.phase, **{c: e.data.get(c) for c in columns[3:]}}
        for e in events
        if e.kind == kind
    ]
    return pd.DataFrame(rows, columns=columns)


def runs_df(store: Store | str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Every run in the store (default ``gr_runs/store.sqlite``), newest first.

    A run recorded as ``running`` whose process no longer holds its workspace (killed, or
    its kernel died) shows as ``interrupted``: the store alone cannot tell it from a live one.
    """
    import pandas as pd

    from gr_notebook.history.store import DEFAULT_STORE_PATH, Store

    if isinstance(store, Store):
        return pd.DataFrame(_live_status(store.runs()))
    with Store(DEFAULT_STORE_PATH if store is None else store) as opened:
        return pd.DataFrame(_live_status(opened.runs()))


def _live_status(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from gr_notebook.workflow.workspace_lock import live_owner

    for run in runs:
        if run["status"] == "running":
            owner = live_owner(run["workspace"]) if run["workspace"] else None
            if owner is None or owner.run_id not in ("", run["run_id"]):
                run["status"] = "interrupted"
    return runs
