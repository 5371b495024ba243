"""Models for experiment tests that must be importable by a spawned worker process."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gr_notebook.models import ModelRequest, ModelResponse
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

    async def complete(self, request: ModelRequest) -> ModelResponse:
        marks = Path(self.marks)
        marks.mkdir(parents=True, exist_ok=True)
        if request.turn <= 1 and len(list(marks.iterdir())) < self.times:
            (marks / f"death-{os.getpid()}").write_text("x")
            os._exit(1)  # as the OOM killer would
        return await super().complete(request)


class Announces(SimulatedModel):
    """The simulated agent, taking ``latency`` seconds a turn, that writes ``flag`` when its
    run makes its first call: a run elsewhere can tell it is under way."""

    def __init__(self, flag: str, latency: float = 0.05) -> None:
        super().__init__("diligent", latency=latency)
        self.flag = flag

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.turn <= 1:
            Path(self.flag).write_text("started")
        return await super().complete(request)


class KillsItsWorkerAfter(KillsItsWorker):
    """:class:`KillsItsWorker` that, before its first death, waits (10 s at most) until the
    file ``flag`` exists: the run it waits for is then running beside it."""

    def __init__(self, marks: str, flag: str, times: int = 1) -> None:
        super().__init__(marks, times)
        self.flag = flag

    async def complete(self, request: ModelRequest) -> ModelResponse:
        marks = Path(self.marks)
        if request.turn <= 1 and not (marks.exists() and any(marks.iterdir())):
            deadline = time.monotonic() + 10
            while not Path(self.flag).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return await super().complete(request)
