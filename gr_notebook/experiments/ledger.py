"""``<root>/results.jsonl``: the experiment's own record, one JSON line per finished run.

Written by the experiment's process alone, a line at a time as each row arrives, so a stop
(Ctrl-C, ``cancel()``, a crash) keeps every row before it. Resuming reads it back: the last
line of a cell wins, and a cell whose run was cancelled or interrupted runs again. A line
that is not a row (cut short by a crash, or edited by hand) is skipped with a warning that
names it, and its cell runs again.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from gr_notebook.experiments.record import RunRecord

__all__ = ["LEDGER_FILE", "RERUN", "Ledger"]

LEDGER_FILE = "results.jsonl"
RERUN = frozenset({"cancelled", "interrupted"})
"""A cell whose run ended so, because the experiment was stopped, is not done."""


class Ledger:
    def __init__(self, root: Path) -> None:
        self.path = root / LEDGER_FILE

    def load(self) -> dict[str, RunRecord]:
        """The latest row of each cell; a line that is not a row is skipped, and said."""
        rows: dict[str, RunRecord] = {}
        if not self.path.exists():
            return rows
        skipped: list[int] = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = RunRecord.from_dict(json.loads(line))
            except (ValueError, TypeError, RecursionError):
                skipped.append(number)
                continue
            rows[record.spec.key] = record
        if skipped:
            shown = ", ".join(map(str, skipped[:20])) + (", ..." if len(skipped) > 20 else "")
            what = (
                f"line {shown} is not a row of results"
                if len(skipped) == 1
                else f"{len(skipped)} lines ({shown}) are not rows of results"
            )
            warnings.warn(
                f"{self.path}: {what} (cut short by a crash, or edited) and "
                f"{'was' if len(skipped) == 1 else 'were'} skipped; a cell with no other row "
                "runs again",
                UserWarning,
                stacklevel=2,
            )
        return rows

    def append(self, record: RunRecord) -> None:
        """Add a row on a line of its own, even after a line a crash cut short."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as handle:
            start = handle.tell()
            cut = False
            if start:
                handle.seek(start - 1)
                cut = handle.read(1) != b"\n"
            text = json.dumps(record.to_dict()) + "\n"
            handle.write((("\n" if cut else "") + text).encode("utf-8"))
