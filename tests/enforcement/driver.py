"""The common interface of the runtimes' drivers, and what a played scenario gives back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import gr_notebook as gr
from tests.enforcement.scenarios import Scenario


@dataclass(frozen=True)
class Played:
    """What one scenario did on one runtime."""

    runs: Mapping[str, int]
    """Executions of each of the scenario's tools, as the tools counted them."""
    told: Mapping[str, str]
    """The result the model read next for each denied call, by the call's id."""
    decisions: tuple[tuple[str, bool], ...]
    """The policy decisions the runs recorded: (tool, allowed), in order."""


@dataclass(frozen=True)
class NotApplicable:
    """The scenario means nothing on this runtime."""

    reason: str


@dataclass(frozen=True)
class KnownGap:
    """The runtime cannot enforce the scenario: an upstream limitation, with its issue."""

    reason: str
    issue: str


class Driver(Protocol):
    """One runtime: plays a scenario, or says why it cannot."""

    key: str
    """A short name, for test ids."""
    name: str
    """The column's title."""

    def limit(self, scenario: Scenario) -> NotApplicable | KnownGap | None: ...

    async def play(self, scenario: Scenario, root: Path) -> Played: ...


def decisions_of(*runs: gr.Run) -> tuple[tuple[str, bool], ...]:
    rows: list[tuple[str, bool]] = []
    for run in runs:
        frame = run.policy_df()
        rows += [(str(r["tool"]), r["decision"] == "allow") for r in frame.to_dict("records")]
    return tuple(rows)
