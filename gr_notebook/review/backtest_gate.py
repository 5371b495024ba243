"""The gate to production: a backtest's metrics held to floors, and a guardrail made live
only through a gate it passed, with the evidence recorded in every run of the new agent."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from gr_notebook.errors import ConfigError
from gr_notebook.wording import plural

if TYPE_CHECKING:
    import pandas as pd

    from gr_notebook.agent import Agent


class Backtest(Protocol):
    """What a gate reads of a backtest (:class:`gr_notebook.review.backtest.Backtest`)."""

    @property
    def metrics(self) -> pd.DataFrame: ...
    @property
    def runs(self) -> tuple[str, ...]: ...
    @property
    def guardrails(self) -> Mapping[str, object]: ...
    @property
    def id(self) -> str: ...
    @property
    def at(self) -> float: ...


__all__ = ["Gate", "gate_of"]


@dataclass(frozen=True)
class Gate:
    """A backtest held to floors: ``passed``, and ``reasons`` in words, one or more per
    guardrail (a floor met or missed, with the interval; the points left out)."""

    passed: bool
    reasons: tuple[str, ...]
    floors: Mapping[str, float]
    evidence: Mapping[str, Mapping[str, Any]] = field(repr=False)
    """Per guardrail gated: the backtest's id and time, its metrics, and the floors."""
    backtest: Backtest = field(repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"gate {verdict}:\n" + "\n".join(f"  - {r}" for r in self.reasons)

    def _repr_html_(self) -> str:
        from html import escape

        colour = "#2e7d32" if self.passed else "#c62828"
        items = "".join(f"<li>{escape(r)}</li>" for r in self.reasons)
        word = "passed" if self.passed else "failed"
        return f"<p><b style='color:{colour}'>gate {word}</b></p><ul>{items}</ul>"

    def promote(self, agent: Agent, guardrail: object = None) -> Agent:
        """``agent`` with the guardrail this gate passed made live (taken out of its
        ``shadow=`` if there), and the evidence recorded in the configuration of every run
        it starts (``run.events[0].config["admitted"]``). ``guardrail`` defaults to the one
        backtested; another instance must have its name. A gate that failed refuses, with
        its reasons."""
        if not self.passed:
            raise ConfigError(
                "the gate did not pass, so nothing is promoted:\n"
                + "\n".join(f"  - {r}" for r in self.reasons)
                + "\nlabel more points, fix the guardrail, or lower a floor you can defend"
            )
        tested = self.backtest.guardrails
        gated = [name for name in self.evidence]
        if guardrail is None:
            if len(gated) != 1:
                raise ConfigError(
                    f"this gate passed {len(gated)} guardrails ({', '.join(gated)}); say which "
                    "to promote: gate.promote(agent, guardrail)"
                )
            name = gated[0]
            guardrail = tested[name]
        else:
            name = next((n for n in gated if _same(tested[n], guardrail)), "")
            if not name:
                raise ConfigError(
                    f"{_describe(guardrail)} is not what this gate passed ({', '.join(gated)});"
                    " backtest it, then promote it through its own gate"
                )
        return agent.with_live(guardrail, admitted=dict(self.evidence[name]))


def _same(tested: object, given: object) -> bool:
    if tested is given:
        return True
    if type(tested) is not type(given):
        return False
    name = getattr(tested, "name", None)
    if name is not None:
        return bool(name == getattr(given, "name", None))
    provider = getattr(tested, "provider", None)
    if provider is not None:
        return bool(
            getattr(provider, "name", 1) == getattr(getattr(given, "provider", None), "name", 2)
        )
    return tested == given


def _describe(guardrail: object) -> str:
    name = getattr(guardrail, "name", None)
    return f"{type(guardrail).__name__} {name!r}" if name else type(guardrail).__name__


def _floor(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{name} is {value!r}; a floor is a rate from 0 to 1, e.g. {name}=0.9")
    return float(value)


def gate_of(
    backtest: Backtest,
    *,
    min_precision: float,
    min_recall: float,
    min_labels: int,
    guardrail: str | None,
) -> Gate:
    floors = {
        "min_precision": _floor(min_precision, "min_precision"),
        "min_recall": _floor(min_recall, "min_recall"),
    }
    if isinstance(min_labels, bool) or not isinstance(min_labels, int) or min_labels < 0:
        raise ConfigError(f"min_labels is {min_labels!r}; it takes a whole number >= 0, e.g. 20")
    metrics = backtest.metrics
    if guardrail is not None:
        if guardrail not in set(metrics["guardrail"]):
            raise ConfigError(
                f"no guardrail {guardrail!r} in this backtest; its guardrails: "
                f"{', '.join(metrics['guardrail'])}"
            )
        metrics = metrics[metrics["guardrail"] == guardrail]
    reasons: list[str] = []
    evidence: dict[str, dict[str, Any]] = {}
    passed = True
    at = datetime.fromtimestamp(backtest.at, UTC).isoformat(timespec="seconds")
    for record in metrics.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        ok, said = _verdict(row, floors, min_labels)
        passed &= ok
        reasons += said
        evidence[row["guardrail"]] = {
            "guardrail": row["guardrail"],
            "backtest": backtest.id,
            "at": at,
            "runs": len(backtest.runs),
            "labels": int(row["labelled"]),
            **{k: _plain(v) for k, v in row.items() if k.split("_")[0] in _EVIDENCE},
            **floors,
            "min_labels": min_labels,
        }
    return Gate(
        passed and bool(evidence),
        tuple(reasons),
        {**floors, "min_labels": min_labels},
        evidence,
        backtest,
    )


_EVIDENCE = ("tp", "fp", "fn", "tn", "precision", "recall")
"""The metrics a promotion records (each rate with its interval)."""


def _plain(value: Any) -> Any:
    number = float(value)
    if math.isnan(number):
        return None
    return (
        int(number)
        if float(number).is_integer() and not isinstance(value, float)
        else round(number, 4)
    )


def _verdict(
    row: Mapping[str, Any], floors: Mapping[str, float], min_labels: int
) -> tuple[bool, list[str]]:
    name = row["guardrail"]
    status = str(row["status"])
    if status.startswith("error"):
        return False, [f"{name}: it raised during the backtest ({status.removeprefix('error: ')})"]
    labelled = int(row["labelled"])
    left = [
        f"{plural(int(row[k]), 'point')} {what}"
        for k, what in (
            ("conflicts", "whose labels disagree"),
            ("cannot_tell", "the replay cannot tell"),
        )
        if int(row[k])
    ]
    out = [f"{name}: left out {' and '.join(left)}"] if left else []
    said: list[str] = []
    ok = True
    if labelled == 0:
        return False, [f"{name}: no labels, so nothing says whether it was right", *out]
    if labelled < min_labels:
        ok = False
        said.append(
            f"{name}: {plural(labelled, 'labelled point')}, fewer than min_labels={min_labels}"
        )
    for rate in ("precision", "recall"):
        floor = floors[f"min_{rate}"]
        value = float(row[rate])
        if math.isnan(value):
            if floor > 0:
                ok = False
                said.append(
                    f"{name}: {rate} is undefined ({status}), so it cannot meet "
                    f"min_{rate}={floor:g}"
                )
            continue
        interval = f"95% CI {float(row[f'{rate}_low']):.2f} to {float(row[f'{rate}_high']):.2f}"
        if value < floor:
            ok = False
            said.append(f"{name}: {rate} {value:.2f} ({interval}) is below min_{rate}={floor:g}")
        else:
            said.append(f"{name}: {rate} {value:.2f} ({interval}) meets min_{rate}={floor:g}")
    if ok and labelled >= min_labels:
        said.insert(0, f"{name}: {plural(labelled, 'labelled point')} (min_labels={min_labels})")
    return ok, said + out
