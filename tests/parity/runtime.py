"""What one parity scenario gave on one runtime, and the pieces every runtime shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import gr_notebook as gr
from gr_notebook.models import ModelResponse
from tests.enforcement.counting import LOCAL_TOOLS, Counter
from tests.enforcement.gr_loop import responses
from tests.parity.normalise import Row, guardrail_rows
from tests.parity.scenarios import Case


@dataclass(frozen=True)
class Observed:
    """One cell: the guardrail rows, the calls that ran, how the run ended."""

    rows: tuple[Row, ...]
    ran: Mapping[str, tuple[str, ...]]
    status: str
    reason: str
    model_calls: int = 0
    """The model calls the run recorded (and so spent)."""


class Runtime(Protocol):
    key: str
    name: str

    async def play(self, case: Case, root: Path) -> Observed: ...


def observed(run: gr.Run, counter: Counter) -> Observed:
    calls = len(run.events.of_kind("model_call"))
    return Observed(
        guardrail_rows(run.events), ran_in(counter), run.status, run.reason or "", calls
    )


def refused(exc: Exception, counter: Counter) -> Observed:
    """The agent or session was refused before it started: no run, and nothing ran."""
    reason = f"{type(exc).__name__}: {exc}"
    return Observed((("end", "failed"),), ran_in(counter), "failed", reason)


def ran_in(counter: Counter) -> dict[str, tuple[str, ...]]:
    """Each local tool's executions, as the record (``key``) each ran on: a LangChain tool is
    given only the arguments it declares, so the key is what every runtime can show."""
    return {t: tuple(str(i.get("key")) for i in counter.inputs(t)) for t in LOCAL_TOOLS}


def script(case: Case) -> list[ModelResponse]:
    """The case's turns as gr's responses (gr's tool names), each with the case's usage."""
    out = [
        gr.text(step) if isinstance(step, str) else responses([step], final=False)[0]
        for step in case.script
    ]
    return [replace(r, usage=case.usage) for r in out] if case.usage else out
