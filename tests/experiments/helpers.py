"""Models for experiment tests that must be importable by a spawned worker process."""

from __future__ import annotations

import os
from pathlib import Path

import gr_notebook as gr
from gr_notebook.models.simulated.model import SimulatedModel

JOB = """\
# Two short sections

## Draft
- Draft the first section
- Draft the second section
"""


class KillsItsWorker(SimulatedModel):
    """Kills the process it runs in on its first call, ``times`` times in all (counted in
    files under ``marks``, which every worker shares); otherwise the diligent agent."""

    def __init__(self, marks: str, times: int = 1) -> None:
        super().__init__("diligent")
        self.marks = marks
        self.times = times

    async def complete(self, request: gr.ModelRequest) -> gr.ModelResponse:
        marks = Path(self.marks)
        marks.mkdir(parents=True, exist_ok=True)
        if request.turn <= 1 and len(list(marks.iterdir())) < self.times:
            (marks / f"death-{os.getpid()}").write_text("x")
            os._exit(1)  # as the OOM killer would
        return await super().complete(request)
