"""``<root>/results.jsonl``: the experiment's own record, one JSON line per finished run.

Written by the experiment's process alone, a line at a time as each row arrives, so a stop
(Ctrl-C, ``cancel()``, a crash) keeps every row before it. Resuming reads it back: the last
line of a cell wins, and a cell whose run was cancelled or interrupted runs again.
"""

from __future__ import annotations

import json
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
        """The latest row of each cell; a line cut short by a crash is skipped."""
        rows: dict[str, RunRecord] = {}
        if not self.path.exists():
            return rows
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = RunRecord.from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue
            rows[record.spec.key] = record
        return rows

    def append(self, record: RunRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record.to_dict()) + "\n")
