"""The matrix's own machinery: a known gap's cell, the table, the page it lives in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.enforcement.driver import KnownGap, NotApplicable, Played
from tests.enforcement.proof import observe
from tests.enforcement.scenarios import BY_KEY, Scenario
from tests.enforcement.table import BEGIN, END, render, table_in, with_table

GAP = KnownGap("the CLI runs a subagent's calls without the hook", "anthropics/claude-code#1")


class Leaky:
    """A runtime whose subagents' calls run despite the denial."""

    key = "leaky"
    name = "Leaky"

    def limit(self, scenario: Scenario) -> NotApplicable | KnownGap | None:
        return GAP if scenario.delegated else None

    async def play(self, scenario: Scenario, root: Path) -> Played:
        decisions = ((scenario.denied, True), (scenario.allowed, True))
        return Played({scenario.denied: 1, scenario.allowed: 1}, {}, decisions)


async def test_a_known_gap_is_in_the_table_and_its_proof_fails(tmp_path: Path) -> None:
    cells: dict[tuple[str, str], str] = {}
    with pytest.raises(AssertionError):  # the matrix marks it xfail(strict=True)
        await observe(Leaky(), BY_KEY["f"], tmp_path, cells)
    assert cells == {
        ("f", "Leaky"): "known gap: the CLI runs a subagent's calls without the hook "
        "(anthropics/claude-code#1)"
    }
    with pytest.raises(AssertionError, match="purge"):  # not declared: a plain failure
        await observe(Leaky(), BY_KEY["a"], tmp_path, cells)


def test_the_table_and_its_page() -> None:
    scenarios = [BY_KEY["a"], BY_KEY["f"]]
    cells = {
        ("a", "R"): "enforced (denied 0 runs, allowed 1)",
        ("f", "R"): "n/a: no subagents | none",
    }
    table = render(scenarios, ["R"], cells)
    assert table.splitlines() == [
        "| Scenario | R |",
        "|---|---|",
        "| (a) a denied call | enforced (denied 0 runs, allowed 1) |",
        "| (f) a call made from a subagent | n/a: no subagents \\| none |",
    ]
    page = f"# Title\n\n{BEGIN}\nold\n{END}\n\nProse.\n"
    written = with_table(page, table)
    assert table_in(written) == table
    assert written.startswith("# Title\n\n") and written.endswith(f"{END}\n\nProse.\n")
    assert table_in("# no markers") == ""
    with pytest.raises(ValueError, match="markers"):
        with_table("# no markers", table)
