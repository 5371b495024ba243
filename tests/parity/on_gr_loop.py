"""Runtime 1: gr's own loop, on the scripted model, with the counting tools as gr tools."""

from __future__ import annotations

from pathlib import Path

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from tests.enforcement.counting import Counter, gr_tools
from tests.parity.runtime import Observed, observed, refused, script
from tests.parity.scenarios import Case


class GrLoop:
    key = "gr"
    name = "gr's loop"

    async def play(self, case: Case, root: Path) -> Observed:
        counter = Counter(root / "counts")
        model = gr.ScriptedModel(script(case), name=case.model)
        try:  # a cost limit on an unpriced model is refused here, before any run
            agent = gr.Agent(
                model,
                workspace=root / "ws",
                tools=gr_tools(counter),
                store=False,
                **case.agent_options(),
            )
        except ConfigError as exc:
            return refused(exc, counter)
        return observed(await agent.run("Do the job."), counter)


RUNTIME = GrLoop()
