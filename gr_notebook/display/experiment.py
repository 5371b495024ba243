"""An experiment's live count: runs finished so far, by agent and status, as HTML and text.

Pure functions over plain counts, so the notebook's widget, a saved notebook and a test all
draw the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from gr_notebook.display.render import MONO, PANEL, STATE_COLOURS

__all__ = ["render_status_counts", "text_status_counts"]

Counts = Mapping[str, Mapping[str, int]]


def _statuses(counts: Counts) -> list[str]:
    seen = {status for row in counts.values() for status, n in row.items() if n}
    return sorted(seen, key=lambda s: (s != "completed", s))


def render_status_counts(counts: Counts, *, done: int, total: int) -> str:
    """A table with one row per agent and one column per status seen, under a heading that
    says how many of the runs have finished."""
    statuses = _statuses(counts)
    head = "".join(
        f"<th style='text-align:right;padding:0 6px;color:{STATE_COLOURS.get(s, '#333')}'>"
        f"{escape(s)}</th>"
        for s in statuses
    )
    rows = "".join(
        f"<tr><td style='text-align:left;padding:0 6px'>{escape(agent)}</td>"
        + "".join(
            f"<td style='text-align:right;padding:0 6px'>{row.get(s, 0)}</td>" for s in statuses
        )
        + "</tr>"
        for agent, row in counts.items()
    )
    return (
        f"<div class='gr-experiment' style='{PANEL};{MONO}'>"
        f"<div style='font-weight:600'>{done} of {total} runs finished</div>"
        f"<table><tr><th style='text-align:left;padding:0 6px'>agent</th>{head}</tr>"
        f"{rows}</table></div>"
    )


def text_status_counts(counts: Counts, *, done: int, total: int) -> str:
    statuses = _statuses(counts)
    width = max([5, *map(len, counts)])
    lines = [f"{done} of {total} runs finished"]
    lines.append("agent".ljust(width) + "".join(f"  {s}" for s in statuses))
    for agent, row in counts.items():
        cells = "".join(f"  {str(row.get(s, 0)).rjust(len(s))}" for s in statuses)
        lines.append(agent.ljust(width) + cells)
    return "\n".join(lines)
