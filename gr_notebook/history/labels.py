"""Labels: what the right verdict was at one recorded point of a run, kept in its store.

A label names a run (``run_id``), a recorded event of it (``seq``, as ``events_df()`` and
``policy_df()`` show it) and says whether a guardrail should have acted there (``label``
True: denied or asked at a tool call, refused a stop, fired, intervened). ``kind`` narrows it
to the guardrails of one kind (policy, checker, feedback, intervention; empty: any guardrail
deciding there), ``who`` says who gave it and ``note`` why. The ``seq`` may name the point
itself (the tool call, or the model call that tried to stop) or a decision recorded on it (a
policy decision, a completion check, a feedback block, an intervention check, live or
shadow): :func:`decision_points` maps both to the point.

Every label is kept (schema 5 of :mod:`gr_notebook.history.store`): a person who labels a
point again adds a label that replaces their own earlier one, and two people who disagree
are both kept until a settling label (``settles=True``) decides.
"""

from __future__ import annotations

import getpass
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gr_notebook.errors import ConfigError
from gr_notebook.events import (
    CompletionCheckEvent,
    Event,
    FeedbackEvent,
    InterventionCheckEvent,
    JobCompleteEvent,
    ModelCallEvent,
    PolicyDecisionEvent,
    ToolCallEvent,
)

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.store import Store

__all__ = [
    "KINDS",
    "LABEL_COLUMNS",
    "Label",
    "acted",
    "as_rows",
    "decision_points",
    "default_who",
    "label_decision",
    "labels_from_frame",
    "read_labels",
    "save_labels",
    "stored_labels",
]

KINDS: Final = ("policy", "checker", "feedback", "intervention")
"""The guardrail kinds a label may name; empty names any."""

LABEL_COLUMNS: Final = ("run_id", "seq", "label")
"""The columns a labels table must have; ``kind``, ``who`` and ``note`` are optional."""
_OPTIONAL: Final = ("kind", "who", "note")
_TRUE: Final = frozenset({"true", "yes", "y", "1", "act"})
_FALSE: Final = frozenset({"false", "no", "n", "0", "pass"})
_ACTS: Final = {
    "policy": frozenset({"deny", "ask"}),
    "checker": frozenset({"refuse"}),
    "feedback": frozenset({"fire"}),
    "intervention": frozenset({"replan", "rewind", "stop"}),
}
"""The verdicts that act, by kind: a label True says one of these was right."""


@dataclass(frozen=True, slots=True)
class Label:
    """One label: should a guardrail (of ``kind``, or any when empty) have acted at event
    ``seq`` of run ``run_id``."""

    run_id: str
    seq: int
    label: bool
    kind: str = ""
    who: str = "person"
    note: str | None = None
    given_at: float = 0.0
    settles: bool = False

    def describe(self) -> str:
        what = "act" if self.label else "not act"
        of = f" ({self.kind})" if self.kind else ""
        return f"{self.who}: should {what}{of}"


def acted(kind: str, verdict: str) -> bool:
    """Whether ``verdict`` of a guardrail of ``kind`` acts (deny or ask, refuse, fire, an
    intervention's action)."""
    return verdict in _ACTS.get(kind, frozenset())


def default_who() -> str:
    """The name labels are kept under when no ``who=`` is given: the login name."""
    try:
        return getpass.getuser() or "person"
    except (KeyError, OSError):  # no login name in this environment (a container)
        return "person"


# -- reading labels ---------------------------------------------------------------------------


def read_labels(source: object, *, who: str | None = None) -> list[Label]:
    """Labels from a DataFrame or the path of a CSV with the columns ``run_id``, ``seq``
    and ``label`` (``kind``, ``who`` and ``note`` optional); a ConfigError naming what is
    wrong: a missing or unknown column, a ``label`` that is not a boolean, a ``seq`` that is
    not a whole number, an unknown ``kind``. ``who`` fills rows without one."""
    import pandas as pd

    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"no labels file at {path}: labels= takes a CSV's path")
        try:
            frame = pd.read_csv(path, dtype={"run_id": str, "kind": str, "who": str, "note": str})
        except (ValueError, OSError) as exc:
            raise ConfigError(f"the labels file {path} cannot be read as a CSV: {exc}") from None
        return labels_from_frame(frame, who=who, where=str(path))
    if isinstance(source, pd.DataFrame):
        return labels_from_frame(source, who=who, where="the labels DataFrame")
    raise ConfigError(
        "labels take a DataFrame or a CSV's path with the columns run_id, seq and label "
        f"(kind, who and note optional), not {type(source).__name__}"
    )


def labels_from_frame(frame: pd.DataFrame, *, who: str | None, where: str) -> list[Label]:
    columns = [str(c) for c in frame.columns]
    missing = [c for c in LABEL_COLUMNS if c not in columns]
    unknown = [c for c in columns if c not in (*LABEL_COLUMNS, *_OPTIONAL)]
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"it lacks {', '.join(missing)}")
        if unknown:
            problems.append(f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} unknown")
        raise ConfigError(
            f"{where} has the columns {', '.join(columns) or 'none'}: {'; '.join(problems)}. "
            "Labels take run_id, seq and label (True: the guardrail should act), and "
            "optionally kind, who and note"
        )
    given_by = who or default_who()
    found = []
    for index, row in enumerate(frame.to_dict("records")):
        at = f"{where}, row {index + 1}"
        found.append(
            Label(
                run_id=_text(row["run_id"], "run_id", at, required=True),
                seq=_seq(row["seq"], at),
                label=_boolean(row["label"], at),
                kind=_kind(row.get("kind"), at),
                who=_text(row.get("who"), "who", at) or given_by,
                note=_text(row.get("note"), "note", at) or None,
            )
        )
    return found


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value: object, name: str, at: str, *, required: bool = False) -> str:
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        if required:
            raise ConfigError(f"{at}: {name} is empty; every label names its run")
        return ""
    return str(value).strip()


def _seq(value: object, at: str) -> int:
    if isinstance(value, bool) or _missing(value):
        raise ConfigError(f"{at}: seq is {value!r}, not the number of a recorded event")
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{at}: seq is {value!r}, not the number of a recorded event") from None
    if not number.is_integer() or number < 0:
        raise ConfigError(f"{at}: seq is {value!r}, not the number of a recorded event")
    return int(number)


def _boolean(value: object, at: str) -> bool:
    """True or False; 1 and 0, and true/false, yes/no as text (a CSV's cells) pass too."""
    kind = type(value).__name__
    if kind in ("bool", "bool_"):
        return bool(value)
    if isinstance(value, (int, float)) and not _missing(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(
        f"{at}: label is {value!r}, not a boolean; a label is True (the guardrail should "
        "act: deny or ask, refuse the stop, fire, intervene) or False"
    )


def _kind(value: object, at: str) -> str:
    kind = _text(value, "kind", at).lower()
    if kind and kind not in KINDS:
        raise ConfigError(f"{at}: kind is {value!r}; a label's kind is one of {', '.join(KINDS)}")
    return kind


# -- the store ----------------------------------------------------------------------------------


def save_labels(store: Store, labels: Iterable[Label], *, settles: bool = False) -> int:
    """Keep ``labels`` in ``store``, each with when it was given (now, unless it says);
    a ConfigError, keeping none, when one names a run the store does not hold."""
    chosen = list(labels)
    held = set(store.run_ids())
    stray = sorted({label.run_id for label in chosen} - held)
    if stray:
        raise ConfigError(
            f"no run {stray[0]!r} in {store.path} to label; labels are kept in the store of "
            "the run they name (gr.runs_df(store) lists its runs)"
        )
    now = time.time()
    for label in chosen:
        store.record_label(
            label.run_id,
            label.seq,
            label=label.label,
            kind=label.kind,
            who=label.who,
            note=label.note,
            given_at=label.given_at or now,
            settles=label.settles or settles,
        )
    return len(chosen)


def stored_labels(store: Store, run_ids: Sequence[str] | None = None) -> list[Label]:
    """The labels ``store`` keeps (of ``run_ids`` only, when given), oldest first."""
    wanted = None if run_ids is None else set(run_ids)
    return [Label(**row) for row in store.labels() if wanted is None or row["run_id"] in wanted]


# -- where a label points -----------------------------------------------------------------------


def decision_points(events: Sequence[Event]) -> dict[int, tuple[int, str]]:
    """Every seq a label may name → (the seq of the point it is at, the kind of guardrail
    the event is of, or empty for the point itself). A point is a tool call or a model call
    that ended a turn with no tool call (an attempt to stop); a policy decision or completion
    check before a call is at that call, a feedback block or an intervention check after a
    call at that call, a completion check of an ended turn at its model call."""
    found: dict[int, tuple[int, str]] = {}
    pending: list[tuple[int, str]] = []
    last_call: int | None = None
    last_model: int | None = None
    for event in events:
        if isinstance(event, ToolCallEvent):
            found[event.seq] = (event.seq, "")
            for seq, kind in pending:
                found[seq] = (event.seq, kind)
            pending, last_call = [], event.seq
        elif isinstance(event, ModelCallEvent):
            pending, last_call = [], None
            if event.tool_calls == 0 and event.stop_reason not in ("max_tokens", "refusal"):
                found[event.seq] = (event.seq, "")
                last_model = event.seq
        elif isinstance(event, PolicyDecisionEvent):
            pending.append((event.seq, "policy"))
        elif isinstance(event, CompletionCheckEvent):
            if event.stop == "end_turn":
                if last_model is not None:
                    found[event.seq] = (last_model, "checker")
            else:
                pending.append((event.seq, "checker"))
        elif isinstance(event, JobCompleteEvent):
            pending.append((event.seq, "checker"))
        elif isinstance(event, FeedbackEvent) and last_call is not None:
            found[event.seq] = (last_call, "feedback")
        elif isinstance(event, InterventionCheckEvent) and last_call is not None:
            found[event.seq] = (last_call, "intervention")
    return found


def label_decision(
    event: Event,
    *,
    right: bool,
    who: str | None = None,
    note: str | None = None,
    run_id: str = "",
) -> Label:
    """The label that says a recorded decision (live or shadow) was right or wrong: a
    decision that acted and was right, or let through and was wrong, says the guardrail
    should act there. The dashboard's one-click mark on a shadow decision."""
    kind_verdict = _kind_and_verdict(event)
    if kind_verdict is None:
        raise ConfigError(
            f"event {event.seq} is a {event.kind}, not a guardrail's decision; mark a policy "
            "decision, a completion check, a feedback block or an intervention check right or "
            "wrong, or give label=True/False for a point"
        )
    kind, verdict = kind_verdict
    return Label(
        run_id=run_id,
        seq=event.seq,
        label=acted(kind, verdict) == bool(right),
        kind=kind,
        who=who or default_who(),
        note=note,
    )


def _kind_and_verdict(event: Event) -> tuple[str, str] | None:
    if isinstance(event, PolicyDecisionEvent):
        return "policy", event.verdict
    if isinstance(event, CompletionCheckEvent):
        return "checker", event.verdict
    if isinstance(event, FeedbackEvent):
        return "feedback", event.verdict
    if isinstance(event, InterventionCheckEvent):
        return "intervention", event.verdict
    return None


def as_rows(labels: Iterable[Label]) -> list[Mapping[str, Any]]:
    """Labels as the rows of a DataFrame."""
    return [
        {
            "run_id": label.run_id,
            "seq": label.seq,
            "kind": label.kind,
            "label": label.label,
            "who": label.who,
            "note": label.note,
            "given_at": label.given_at,
            "settles": label.settles,
        }
        for label in labels
    ]
