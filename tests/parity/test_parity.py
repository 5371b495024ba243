"""Every runtime × every parity scenario: the same guardrail events (normalised by
:func:`tests.parity.normalise.guardrail_rows`) and the same calls run, as the tools counted
them. The table the matrix gives must be the one in ``docs/enforcement.md``
(``GR_UPDATE_PARITY=1 pytest tests/parity`` writes it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.enforcement.table import DOC, render, table_in, with_table
from tests.parity import on_claude_sdk, on_gr_loop, on_langchain
from tests.parity.known import KNOWN
from tests.parity.runtime import Observed, Runtime
from tests.parity.scenarios import CASES, Case
from tests.parity.table import MARKERS, cell, differences

RUNTIMES: tuple[Runtime, ...] = (on_gr_loop.RUNTIME, on_claude_sdk.RUNTIME, on_langchain.RUNTIME)

# the SDK sessions pre-approve the tools no policy asks about
pytestmark = pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")

SEEN: dict[tuple[str, str], Observed] = {}
"""Each cell as this session saw it, by (case key, runtime name)."""


def cells() -> Iterator[Any]:
    for runtime in RUNTIMES:
        for case in CASES:
            known = KNOWN.get((runtime.key, case.key))
            marks = (
                []
                if known is None
                else [pytest.mark.xfail(strict=known.strict, reason=known.reason)]
            )
            yield pytest.param(runtime, case, id=f"{runtime.key}-{case.id}", marks=marks)


async def play(runtime: Runtime, case: Case, root: Path) -> Observed:
    seen = SEEN[(case.key, runtime.name)] = await runtime.play(case, root)
    return seen


@pytest.mark.parametrize(("runtime", "case"), list(cells()))
async def test_the_same_guardrail_the_same_verdict(
    runtime: Runtime, case: Case, tmp_path: Path
) -> None:
    seen = await play(runtime, case, tmp_path)
    assert not differences(seen, case), (differences(seen, case), seen)


async def test_the_table_in_the_docs_is_the_matrix(tmp_path: Path) -> None:
    for runtime in RUNTIMES:  # the cells this session has not played yet (a -k selection)
        for case in CASES:
            if (case.key, runtime.name) not in SEEN:
                await play(runtime, case, tmp_path / runtime.key / case.key)
    texts = {}
    for runtime in RUNTIMES:
        for case in CASES:
            known = KNOWN.get((runtime.key, case.key))
            strict = known is not None and known.strict
            seen = SEEN[(case.key, runtime.name)]
            texts[(case.key, runtime.name)] = cell(seen, case, host_limit=strict)
    table = render(CASES, [r.name for r in RUNTIMES], texts)
    page = DOC.read_text(encoding="utf-8")
    if os.environ.get("GR_UPDATE_PARITY"):
        DOC.write_text(with_table(page, table, MARKERS), encoding="utf-8")
        page = DOC.read_text(encoding="utf-8")
    assert table_in(page, MARKERS) == table, (
        "docs/enforcement.md's parity table is not what the matrix saw; look at the change, "
        "then write it with GR_UPDATE_PARITY=1 pytest tests/parity"
    )
