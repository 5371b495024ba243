"""Backtest guardrails on labelled runs: replay each one (as :func:`gr.replay_guardrails
<gr_notebook.review.guardrail_replay.replay_guardrails>` does, no model call), set each
decision beside the label that says what was right there, and count.

Each guardrail is replayed alone, so two candidate policies are judged each on its own
(together, the first to deny would leave the other "not asked"). A decision *acts* when a
policy denies or asks, a checker refuses a stop, feedback fires, an intervention acts; a label
True says it should have. A decision the replay cannot tell, a guardrail that raised, and a
point whose labels disagree are counted apart and left out of the metrics.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gr_notebook.errors import ConfigError, StoreError
from gr_notebook.events import Event, ModelCallEvent, ToolCallEvent
from gr_notebook.experiments.stats import wilson_interval
from gr_notebook.history.labels import (
    Label,
    acted,
    decision_points,
    read_labels,
    stored_labels,
)
from gr_notebook.review.backtest_gate import Gate, gate_of
from gr_notebook.review.replay_guardrail_set import GuardrailSet, guardrail_set
from gr_notebook.review.replay_sources import RecordedRun, recorded_runs
from gr_notebook.review.replayer import CANNOT_TELL, Replayer
from gr_notebook.wording import plural

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.history.store import StoreLike

__all__ = [
    "METRICS",
    "PROBLEM_COLUMNS",
    "Backtest",
    "LabelMatcher",
    "LabelSource",
    "Point",
    "backtest",
    "kind_of",
    "labels_of",
    "metrics_row",
    "replay_one",
    "single_sets",
]

METRICS: Final = [
    "guardrail",
    "kind",
    "labelled",
    "unlabelled",
    "tp",
    "fp",
    "fn",
    "tn",
    "precision",
    "precision_low",
    "precision_high",
    "recall",
    "recall_low",
    "recall_high",
    "f1",
    "conflicts",
    "cannot_tell",
    "errors",
    "status",
]
"""The columns of :attr:`Backtest.metrics`, one row per guardrail: the labelled points
(``tp``…``tn``) and the unlabelled ones, precision and recall each with its 95% Wilson
interval (``_low``, ``_high``), F1, the points left out (labels that disagree, decisions
the replay cannot tell, a guardrail that raised), and ``status`` in words: ``ok``, ``no
labels``, why a rate is undefined, or the error."""

ROW_COLUMNS: Final = [
    "run",
    "run_id",
    "turn",
    "seq",
    "point",
    "tool",
    "kind",
    "guardrail",
    "decision",
    "reason",
    "error",
    "acted",
    "label",
    "outcome",
    "who",
    "note",
    "after_divergence",
]
MISTAKE_COLUMNS: Final = [
    "run",
    "run_id",
    "turn",
    "seq",
    "point",
    "tool",
    "guardrail",
    "mistake",
    "decision",
    "reason",
    "label",
    "who",
    "note",
]
PROBLEM_COLUMNS: Final = ["run_id", "seq", "kind", "label", "who", "problem"]
CONFLICT_COLUMNS: Final = ["run", "run_id", "seq", "kind", "guardrail", "labels"]


@dataclass(frozen=True, slots=True)
class Point:
    """A recorded point as a guardrail saw it, for ``labels=lambda point: ...``: the call
    (tool, its input and result) or the stop (the model's final text), and which kind of
    guardrail decides there."""

    run: str
    run_id: str
    seq: int
    turn: int
    point: str
    kind: str
    guardrail: str
    tool: str | None = None
    input: Mapping[str, Any] | None = None
    result: str | None = None
    is_error: bool | None = None
    text: str | None = None


LabelSource = Callable[[Point], "bool | None"]


# -- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Backtest:
    """Guardrails' decisions on recorded runs set beside their labels (see :func:`backtest`)."""

    df: pd.DataFrame = field(repr=False)
    """One row per decision: the replay's columns, whether it ``acted``, the ``label``, and
    the ``outcome`` (tp, fp, fn, tn, unlabelled, conflict, cannot tell, not asked, error)."""
    metrics: pd.DataFrame = field(repr=False)
    problems: pd.DataFrame = field(repr=False)
    """Labels that name nothing here: a run not backtested, an event the run lacks or at
    which no guardrail decides, a kind no backtested guardrail is of."""
    conflicts: pd.DataFrame = field(repr=False)
    """Points whose labels disagree: kept, and left out of the metrics until one settles."""
    runs: tuple[str, ...]
    guardrails: Mapping[str, object] = field(repr=False)
    """Each guardrail backtested, by its name in :attr:`metrics`."""
    id: str = ""
    """``bt-`` and a hash of the guardrails, the runs and the labels: the same backtest
    again has the same id."""
    at: float = 0.0
    """When it ran (seconds since the epoch)."""

    @property
    def mistakes(self) -> pd.DataFrame:
        """The false positives (it acted where it should not) and false negatives (it let
        through what it should have stopped), each with its run, turn and seq (to fork from:
        ``gr.fork(run_id, turn=turn, agent=...)``), the decision, its reason and the label's
        note."""
        frame = self.df[self.df["outcome"].isin(["fp", "fn"])].copy()
        frame["mistake"] = frame["outcome"].map(
            {"fp": "false positive: acted, should not", "fn": "false negative: should have acted"}
        )
        return frame[MISTAKE_COLUMNS].reset_index(drop=True)

    def gate(
        self,
        *,
        min_precision: float = 0.0,
        min_recall: float = 0.0,
        min_labels: int = 1,
        guardrail: str | None = None,
    ) -> Gate:
        """Whether the guardrails (or the one named) meet these floors: a :class:`Gate` with
        ``.passed``, its reasons in words, and :meth:`Gate.promote` to make it live. The
        floors are on the point estimates; the intervals are in the reasons."""
        return gate_of(
            self,
            min_precision=min_precision,
            min_recall=min_recall,
            min_labels=min_labels,
            guardrail=guardrail,
        )

    def plot(self) -> Any:
        """The confusion counts, and precision and recall with their intervals, per
        guardrail (a matplotlib figure)."""
        import matplotlib.pyplot as plt

        frame = self.metrics
        figure, (counts, rates) = plt.subplots(1, 2, figsize=(11, 0.6 + 0.7 * len(frame)))
        names = list(frame["guardrail"])
        left = [0.0] * len(frame)
        colours = {"tp": "#2e7d32", "fp": "#c62828", "fn": "#ef6c00", "tn": "#9e9e9e"}
        for column, colour in colours.items():
            values = [float(v) for v in frame[column]]
            counts.barh(names, values, left=left, color=colour, label=column)
            left = [a + b for a, b in zip(left, values, strict=True)]
        counts.set_xlabel("labelled points")
        counts.legend(loc="lower right", fontsize="small")
        counts.set_title("confusion counts")
        for offset, (rate, colour) in enumerate((("precision", "#1565c0"), ("recall", "#6a1b9a"))):
            ys = [i + (offset - 0.5) * 0.25 for i in range(len(frame))]
            xs = [float(v) for v in frame[rate]]
            lows = [
                x - float(lo) if not math.isnan(x) else 0
                for x, lo in zip(xs, frame[f"{rate}_low"], strict=True)
            ]
            highs = [
                float(hi) - x if not math.isnan(x) else 0
                for x, hi in zip(xs, frame[f"{rate}_high"], strict=True)
            ]
            rates.errorbar(xs, ys, xerr=[lows, highs], fmt="o", color=colour, label=rate, capsize=3)
        rates.set_yticks(range(len(frame)), names)
        rates.set_xlim(0, 1.02)
        rates.set_xlabel("rate, with its 95% Wilson interval")
        rates.legend(loc="lower left", fontsize="small")
        rates.set_title("precision and recall")
        figure.tight_layout()
        plt.close(figure)
        return figure

    def __repr__(self) -> str:
        labelled = int(self.metrics["labelled"].sum()) if len(self.metrics) else 0
        return (
            f"<Backtest {self.id} of {', '.join(self.guardrails)} on "
            f"{plural(len(self.runs), 'run')}: {plural(labelled, 'labelled decision')}, "
            f"{plural(len(self.mistakes), 'mistake')}, {plural(len(self.conflicts), 'conflict')}, "
            f"{plural(len(self.problems), 'label problem')}>"
        )

    def _repr_html_(self) -> str:
        from html import escape

        head = f"<p><b>{escape(repr(self)[1:-1])}</b></p>"
        return head + self.metrics.to_html(index=False, na_rep="", float_format="{:.2f}".format)


# -- backtesting ---------------------------------------------------------------------------------


def backtest(
    runs: object,
    *,
    policies: Iterable[object] | None = None,
    feedback_providers: Iterable[object] | None = None,
    task_completion_checker: object = None,
    interventions: object = None,
    labels: object = None,
    store: StoreLike | None = None,
) -> Backtest:
    """Replay each guardrail on ``runs`` (as ``gr.replay_guardrails`` takes them), with no
    model call, and score its decisions against ``labels``: a DataFrame or a CSV's path
    (``run_id``, ``seq``, ``label``; ``kind``, ``who``, ``note`` optional; ``run_id`` may
    also be a run's label in a dict of runs), a list of labels, a function ``point → True,
    False or None`` (a rule, an LLM judge), or None for the labels kept in the runs' stores
    (``run.label(...)``, the labelling widget, ``gr.labels.save_labels``).

    Returns a :class:`Backtest`: ``.metrics`` per guardrail, ``.mistakes``, ``.problems``
    (labels that fit nothing here), ``.conflicts``, ``.gate(...)`` and ``.plot()``."""
    chosen = guardrail_set(policies, feedback_providers, task_completion_checker, interventions)
    singles = single_sets(chosen)
    given = labels_of(labels)
    rows: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {name: [] for name in singles}
    labelled = LabelMatcher(given)
    ran: list[str] = []
    for source in recorded_runs(runs, store, "backtest"):
        ran.append(source.label)
        labelled.read(source)
        for name, single in singles.items():
            found, error = replay_one(source, single)
            if error is not None:
                errors[name].append(f"{source.label}: {error}")
            rows += labelled.score(source, name, found)
    return _result(rows, errors, labelled, tuple(ran), singles)


def single_sets(chosen: GuardrailSet) -> dict[str, GuardrailSet]:
    """One guardrail set per guardrail, by its name."""
    sets: dict[str, GuardrailSet] = {}
    for policy in chosen.policies:
        sets[f"policy {policy.name}"] = GuardrailSet(policies=(policy,))
    for config in chosen.feedback:
        one = GuardrailSet(feedback=(config,))
        sets[one.names[0]] = one
    if chosen.checker is not None:
        one = GuardrailSet(checker=chosen.checker)
        sets[one.names[0]] = one
    if chosen.interventions is not None:
        sets["interventions"] = GuardrailSet(interventions=chosen.interventions)
    if len(sets) < len(chosen.names):
        raise ConfigError(
            "two guardrails given to backtest share a name; give each a name of its own "
            f"(the names: {', '.join(chosen.names)})"
        )
    return sets


def replay_one(
    source: RecordedRun, chosen: GuardrailSet
) -> tuple[list[dict[str, Any]], str | None]:
    """One guardrail replayed on one run: its rows, or none and the error that stopped the
    replay (a guardrail that raised where the replay could not catch it)."""
    try:
        return Replayer(source, chosen).rows(), None
    except StoreError:
        raise
    except Exception as exc:  # a guardrail's bug is an error row, not a crash
        return [], f"{type(exc).__name__}: {exc}"


def labels_of(labels: object) -> list[Label] | LabelSource | None:
    """``labels=`` read: a list of labels, a function, or None for the stores' own."""
    from gr_notebook.history.store import Store

    if labels is None:
        return None
    if isinstance(labels, Store):
        return stored_labels(labels)
    if isinstance(labels, (str, Path)) or type(labels).__name__ == "DataFrame":
        return read_labels(labels)
    if callable(labels):
        return labels
    if isinstance(labels, Iterable) and not isinstance(labels, (bytes, Mapping)):
        found = list(labels)
        if all(isinstance(label, Label) for label in found):
            return found
    raise ConfigError(
        "labels takes a DataFrame or a CSV's path (run_id, seq, label; kind, who, note "
        "optional), a list of gr.labels.Label, a function point -> True/False/None, a "
        f"gr.Store, or None for the labels the runs' stores keep; got {type(labels).__name__}"
    )


class LabelMatcher:
    """The labels, matched to the decisions of each run as it is replayed."""

    def __init__(self, given: list[Label] | LabelSource | None) -> None:
        self.function = given if callable(given) else None
        self.given = given if isinstance(given, list) else None
        self.from_stores: dict[int, list[Label]] = {}
        self.used: set[int] = set()
        """ids of the labels that applied to a decision."""
        self.labels: list[Label] = list(self.given or [])
        self.named: dict[int, tuple[RecordedRun, dict[int, tuple[int, str]]]] = {}
        """id(label) → (its run, the run's points) for labels that name a backtested run."""
        self.conflicts: list[dict[str, Any]] = []
        self._by_point: dict[tuple[str, int], list[tuple[Label, str]]] = {}
        self._events: dict[int, Event] = {}
        self._cache: dict[tuple[str, int, str], bool | None] = {}

    def read(self, source: RecordedRun) -> None:
        """Index the labels of ``source`` by the point each names."""
        events = source.events
        self._events = {e.seq: e for e in events}
        if self.function is not None:
            return
        if self.given is None:
            store = source.store
            if store is not None and id(store) not in self.from_stores:
                self.from_stores[id(store)] = stored_labels(store)
                self.labels += self.from_stores[id(store)]
            mine = [
                label
                for label in self.from_stores.get(id(store), [])
                if label.run_id == source.run_id
            ]
        else:
            mine = [label for label in self.given if label.run_id in (source.run_id, source.label)]
        points = decision_points(events)
        self._by_point = {}
        for label in mine:
            self.named[id(label)] = (source, points)
            at = points.get(label.seq)
            if at is None:
                continue
            seq, implied = at
            self._by_point.setdefault((source.run_id, seq), []).append(
                (label, label.kind or implied)
            )

    def score(
        self, source: RecordedRun, name: str, rows: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        scored = []
        for row in rows:
            label, who, note = self._label(source, name, row)
            scored.append(
                {
                    **{
                        k: row[k]
                        for k in ("run", "turn", "seq", "point", "tool", "kind", "guardrail")
                    },
                    "run_id": source.run_id,
                    "guardrail": name,
                    "decision": row["decision"],
                    "reason": row["reason"],
                    "error": row["error"],
                    "acted": acted(row["kind"], row["decision"]),
                    "label": label,
                    "outcome": _outcome(row, label),
                    "who": who,
                    "note": note,
                    "after_divergence": row["after_divergence"],
                }
            )
        return scored

    def _label(
        self, source: RecordedRun, name: str, row: Mapping[str, Any]
    ) -> tuple[bool | str | None, str | None, str | None]:
        """The label of a decision: True, False, None (unlabelled) or "conflict"."""
        if self.function is not None:
            return (
                self._judged(source, name, row),
                getattr(self.function, "__name__", "function"),
                None,
            )
        found = [
            label
            for label, kind in self._by_point.get((source.run_id, row["seq"]), [])
            if not kind or kind == row["kind"]
        ]
        if not found:
            return None, None, None
        self.used |= {id(label) for label in found}
        settling = [label for label in found if label.settles]
        if settling:
            chosen = max(settling, key=lambda label: label.given_at)
            return chosen.label, chosen.who, chosen.note
        latest: dict[str, Label] = {}
        for label in sorted(found, key=lambda label: label.given_at):
            latest[label.who] = label  # a person's later label replaces their earlier one
        values = {label.label for label in latest.values()}
        if len(values) > 1:
            self.conflicts.append(
                {
                    "run": source.label,
                    "run_id": source.run_id,
                    "seq": row["seq"],
                    "kind": row["kind"],
                    "guardrail": name,
                    "labels": "; ".join(label.describe() for label in latest.values()),
                }
            )
            return "conflict", ", ".join(latest), None
        notes = [label.note for label in latest.values() if label.note]
        return values.pop(), ", ".join(latest), "; ".join(notes) or None

    def _judged(self, source: RecordedRun, name: str, row: Mapping[str, Any]) -> bool | None:
        key = (source.run_id, row["seq"], row["kind"])
        if key not in self._cache:
            point = _point(source, name, row, self._events.get(row["seq"]))
            try:
                verdict = self.function(point)  # type: ignore[misc]
            except Exception as exc:
                raise ConfigError(
                    f"labels={getattr(self.function, '__name__', 'function')} raised "
                    f"{type(exc).__name__}: {exc} on run {source.label}, event {row['seq']}; a "
                    "label function returns True, False or None (no label) for every point"
                ) from exc
            if verdict is not None and type(verdict).__name__ not in ("bool", "bool_"):
                raise ConfigError(
                    f"labels={getattr(self.function, '__name__', 'function')} returned "
                    f"{verdict!r} for run {source.label}, event {row['seq']}; a label is True "
                    "(the guardrail should act), False, or None (no label)"
                )
            self._cache[key] = None if verdict is None else bool(verdict)
        return self._cache[key]

    def problems(self, ran: Sequence[str], kinds: set[str]) -> list[dict[str, Any]]:
        """Every label that applied to no decision, and why."""
        if self.function is not None:
            return []
        found = []
        for label in self.labels:
            if id(label) in self.used:
                continue
            named = self.named.get(id(label))
            if named is None:
                why = f"run {label.run_id!r} is not among the {len(ran)} runs backtested"
            else:
                source, points = named
                why = _why_unused(label, source, points, kinds)
            found.append(
                {
                    "run_id": label.run_id,
                    "seq": label.seq,
                    "kind": label.kind,
                    "label": label.label,
                    "who": label.who,
                    "problem": why,
                }
            )
        return found


def _why_unused(
    label: Label, source: RecordedRun, points: Mapping[int, tuple[int, str]], kinds: set[str]
) -> str:
    event = next((e for e in source.events if e.seq == label.seq), None)
    if event is None:
        last = source.events[-1].seq if source.events else -1
        return f"run {source.label} has no event {label.seq} (its events are 0 to {last})"
    if label.seq not in points:
        return (
            f"event {label.seq} is a {event.kind}, not a point a guardrail decides at (a tool "
            "call, an attempt to stop) nor a decision on one"
        )
    seq, implied = points[label.seq]
    kind = label.kind or implied
    if kind and kind not in kinds:
        backtested = ", ".join(sorted(kinds)) or "none"
        return f"a {kind} label, and no {kind} is backtested here (the kinds: {backtested})"
    what = (
        "a stop"
        if not isinstance(event, ToolCallEvent) and isinstance(event, ModelCallEvent)
        else "the point"
    )
    return f"no {kind or 'backtested guardrail'} decides at event {seq} ({what} it names)"


def _point(source: RecordedRun, name: str, row: Mapping[str, Any], event: Event | None) -> Point:
    base = {
        "run": source.label,
        "run_id": source.run_id,
        "seq": row["seq"],
        "turn": row["turn"],
        "point": row["point"],
        "kind": row["kind"],
        "guardrail": name,
        "tool": row["tool"],
    }
    if isinstance(event, ToolCallEvent):
        return Point(
            **base,
            input=dict(event.input or {}),
            result=event.result,
            is_error=bool(event.is_error),
        )
    if isinstance(event, ModelCallEvent):
        return Point(**base, text=event.text)
    return Point(**base)


def _outcome(row: Mapping[str, Any], label: bool | str | None) -> str:
    if row["error"] is not None:
        return "error"
    if row["decision"] == CANNOT_TELL:
        return "cannot tell"
    if row["decision"] == "not asked":
        return "not asked"
    if label is None:
        return "unlabelled"
    if label == "conflict":
        return "conflict"
    did = acted(row["kind"], row["decision"])
    if did:
        return "tp" if label else "fp"
    return "fn" if label else "tn"


# -- metrics --------------------------------------------------------------------------------------


def metrics_row(
    name: str, kind: str, outcomes: Mapping[str, int], errors: Sequence[str] = ()
) -> dict[str, Any]:
    """One guardrail's metrics from the count of each outcome; a rate that cannot be had
    is NaN and ``status`` says why (never a ZeroDivisionError)."""
    tp, fp, fn, tn = (int(outcomes.get(k, 0)) for k in ("tp", "fp", "fn", "tn"))
    labelled = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    p_low, p_high = wilson_interval(tp, tp + fp)
    r_low, r_high = wilson_interval(tp, tp + fn)
    both = precision + recall
    f1 = 2 * precision * recall / both if both and not math.isnan(both) else math.nan
    errored = int(outcomes.get("error", 0)) + len(errors)
    if errors:
        status = f"error: {errors[0]}" + (
            f" (and {len(errors) - 1} more runs)" if len(errors) > 1 else ""
        )
    elif errored:
        status = f"error: it raised at {plural(errored, 'point')} (see .df's error column)"
    elif not labelled:
        status = "no labels"
    elif tp + fp == 0:
        status = "never acted on a labelled point: precision undefined"
    elif tp + fn == 0:
        status = "no labelled point where it should act: recall undefined"
    else:
        status = "ok"
    return {
        "guardrail": name,
        "kind": kind,
        "labelled": labelled,
        "unlabelled": int(outcomes.get("unlabelled", 0)),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "precision_low": p_low,
        "precision_high": p_high,
        "recall": recall,
        "recall_low": r_low,
        "recall_high": r_high,
        "f1": f1,
        "conflicts": int(outcomes.get("conflict", 0)),
        "cannot_tell": int(outcomes.get("cannot tell", 0)),
        "errors": errored,
        "status": status,
    }


def kind_of(single: GuardrailSet) -> str:
    if single.policies:
        return "policy"
    if single.feedback:
        return "feedback"
    if single.checker is not None:
        return "checker"
    return "intervention"


def _stable(value: object) -> str:
    """``value`` described the same in every process (a set's repr follows the hash seed)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(_stable, value))) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_stable, value)) + "]"
    if isinstance(value, Mapping):
        return (
            "{" + ", ".join(sorted(f"{_stable(k)}: {_stable(v)}" for k, v in value.items())) + "}"
        )
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        inner = ", ".join(f"{n}={_stable(getattr(value, n, None))}" for n in fields)
        return f"{type(value).__qualname__}({inner})"
    if callable(value) and hasattr(value, "__qualname__"):  # a function: not its address
        return str(value.__qualname__)
    shown = repr(value)
    return type(value).__qualname__ if " at 0x" in shown else shown


def _result(
    rows: list[dict[str, Any]],
    errors: Mapping[str, list[str]],
    labelled: LabelMatcher,
    ran: tuple[str, ...],
    singles: Mapping[str, GuardrailSet],
) -> Backtest:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    kinds = {name: kind_of(single) for name, single in singles.items()}
    metrics = []
    for name in singles:
        outcomes = Counter(r["outcome"] for r in rows if r["guardrail"] == name)
        metrics.append(metrics_row(name, kinds[name], outcomes, errors[name]))
    problems = labelled.problems(ran, set(kinds.values()))
    at = time.time()
    said = (  # what was backtested, on what, against what: the same backtest, the same id
        [_stable(g) for g in singles.values()],
        ran,
        sorted((lab.run_id, lab.seq, lab.kind, lab.label, lab.who) for lab in labelled.labels),
        getattr(labelled.function, "__qualname__", None),
    )
    digest = hashlib.sha256(repr(said).encode()).hexdigest()[:8]
    objects: dict[str, object] = {}
    for name, single in singles.items():
        objects[name] = (
            single.policies[0]
            if single.policies
            else single.feedback[0]
            if single.feedback
            else single.checker
            if single.checker is not None
            else single.interventions
        )
    return Backtest(
        df=frame,
        metrics=pd.DataFrame(metrics, columns=METRICS),
        problems=pd.DataFrame(problems, columns=PROBLEM_COLUMNS),
        conflicts=pd.DataFrame(labelled.conflicts, columns=CONFLICT_COLUMNS),
        runs=ran,
        guardrails=objects,
        id=f"bt-{digest}",
        at=at,
    )
