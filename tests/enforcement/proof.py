"""The proof for one cell of the matrix: the tools' counts, what the model read, what the
run recorded."""

from __future__ import annotations

from pathlib import Path

from tests.enforcement.driver import Driver, NotApplicable, Played
from tests.enforcement.scenarios import TOLD, Scenario
from tests.enforcement.table import enforced, limited


def check(played: Played, scenario: Scenario) -> None:
    """The proof, for one cell."""
    assert played.runs == {scenario.denied: 0, scenario.allowed: 1}, played.runs
    for call in scenario.denied_calls:  # the model read the denial as that call's result
        assert TOLD[scenario.policy] in played.told.get(call.id, ""), played.told
    denied = [tool for tool, allowed in played.decisions if not allowed]
    assert len(denied) == len(scenario.denied_calls), played.decisions
    assert all(tool.endswith(scenario.denied) for tool in denied), played.decisions
    assert any(ok and tool.endswith(scenario.allowed) for tool, ok in played.decisions)


async def observe(
    driver: Driver, scenario: Scenario, root: Path, cells: dict[tuple[str, str], str]
) -> str:
    """Play one cell and prove it. Its text goes in ``cells`` (by scenario key and runtime
    name) before the proof, so that a known gap, whose proof fails, is in the table too."""
    limit = driver.limit(scenario)
    key = (scenario.key, driver.name)
    if isinstance(limit, NotApplicable):
        cells[key] = limited(limit)
        return cells[key]
    played = await driver.play(scenario, root)
    cells[key] = limited(limit) if limit is not None else enforced(played, scenario)
    check(played, scenario)
    return cells[key]
