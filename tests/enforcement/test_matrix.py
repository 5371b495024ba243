"""Every runtime × every scenario: a denied call runs zero times, the allowed one once, as
the tools themselves counted; the model reads the denial as the call's result; the run
records it. The table the matrix gives must be the one in ``docs/enforcement.md``
(``GR_UPDATE_ENFORCEMENT=1 pytest tests/enforcement`` writes it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.enforcement import (
    drive_anthropic,
    drive_claude_sdk,
    drive_langchain,
    drive_openai,
    drive_scripted,
)
from tests.enforcement.driver import Driver, KnownGap, NotApplicable
from tests.enforcement.proof import observe
from tests.enforcement.scenarios import SCENARIOS, Scenario
from tests.enforcement.table import DOC, limited, render, table_in, with_table

DRIVERS: tuple[Driver, ...] = (
    drive_scripted.DRIVER,
    drive_anthropic.DRIVER,
    drive_openai.DRIVER,
    drive_claude_sdk.DRIVER,
    drive_langchain.DRIVER,
)

# the SDK sessions pre-approve every tool, so that only the guardrails' hook can stop a call
pytestmark = pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")

OBSERVED: dict[tuple[str, str], str] = {}
"""Each cell as this session saw it, by (scenario key, runtime name)."""


def cells() -> Iterator[Any]:
    for driver in DRIVERS:
        for scenario in SCENARIOS:
            limit = driver.limit(scenario)
            marks = []
            if isinstance(limit, KnownGap):
                marks.append(pytest.mark.xfail(strict=True, reason=limited(limit)))
            yield pytest.param(driver, scenario, id=f"{driver.key}-{scenario.id}", marks=marks)


@pytest.mark.parametrize(("driver", "scenario"), list(cells()))
async def test_a_denied_call_never_runs(driver: Driver, scenario: Scenario, tmp_path: Path) -> None:
    text = await observe(driver, scenario, tmp_path, OBSERVED)
    if isinstance(driver.limit(scenario), NotApplicable):
        assert text.startswith("n/a: ")  # recorded in the table with its reason, not skipped


async def test_the_table_in_the_docs_is_the_matrix(tmp_path: Path) -> None:
    for driver in DRIVERS:  # the cells this session has not played yet (a -k selection)
        for scenario in SCENARIOS:
            if (scenario.key, driver.name) not in OBSERVED:
                try:
                    await observe(driver, scenario, tmp_path / driver.key / scenario.key, OBSERVED)
                except AssertionError:
                    if not isinstance(driver.limit(scenario), KnownGap):
                        raise
    table = render(SCENARIOS, [d.name for d in DRIVERS], OBSERVED)
    page = DOC.read_text(encoding="utf-8")
    if os.environ.get("GR_UPDATE_ENFORCEMENT"):
        DOC.write_text(with_table(page, table), encoding="utf-8")
        page = DOC.read_text(encoding="utf-8")
    assert table_in(page) == table, (
        "docs/enforcement.md's table is not what the matrix saw; look at the change, then "
        "write it with GR_UPDATE_ENFORCEMENT=1 pytest tests/enforcement"
    )
