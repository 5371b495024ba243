"""The enforcement table: rows are scenarios, columns runtimes, cells what the matrix saw.
It lives in ``docs/enforcement.md`` between two markers; the rest of that page is prose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.enforcement.driver import KnownGap, NotApplicable, Played
from tests.enforcement.scenarios import Scenario

DOC = Path(__file__).resolve().parents[2] / "docs" / "enforcement.md"
BEGIN = "<!-- the enforcement table: written by tests/enforcement (GR_UPDATE_ENFORCEMENT=1) -->"
END = "<!-- end of the enforcement table -->"


def enforced(played: Played, scenario: Scenario) -> str:
    denied, allowed = played.runs[scenario.denied], played.runs[scenario.allowed]
    return f"enforced (denied {denied} runs, allowed {allowed})"


def limited(limit: NotApplicable | KnownGap) -> str:
    if isinstance(limit, NotApplicable):
        return f"n/a: {limit.reason}"
    return f"known gap: {limit.reason} ({limit.issue})"


def render(
    scenarios: Sequence[Scenario], runtimes: Sequence[str], cells: Mapping[tuple[str, str], str]
) -> str:
    """The markdown table; ``cells`` by (scenario key, runtime name)."""
    lines = [
        "| Scenario | " + " | ".join(runtimes) + " |",
        "|---|" + "---|" * len(runtimes),
    ]
    for scenario in scenarios:
        row = [f"({scenario.key}) {scenario.title}"]
        row += [cells[(scenario.key, runtime)].replace("|", "\\|") for runtime in runtimes]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def table_in(page: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """The table between the ``markers`` of ``page`` (empty when they are missing)."""
    begin, stop = markers
    start, end = page.find(begin), page.find(stop)
    if start < 0 or end < start:
        return ""
    return page[start + len(begin) : end].strip()


def with_table(page: str, table: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """``page`` with ``table`` between its ``markers`` (another table of the page has its
    own)."""
    begin, stop = markers
    start, end = page.find(begin), page.find(stop)
    if start < 0 or end < start:
        raise ValueError(f"{DOC} has no {begin!r} … {stop!r} markers to write the table between")
    return page[: start + len(begin)] + "\n\n" + table + "\n\n" + page[end:]
