"""A KeyboardInterrupt or SystemExit inside a run ends it ``interrupted``, recorded, and then
goes on up: the run is never left ``running``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.workflow.workspace_lock import live_owner


async def interrupted_model(request: Any) -> Any:
    raise KeyboardInterrupt


def exiting_tool(ctx: Any, params: Any) -> str:
    raise SystemExit(3)


@pytest.mark.parametrize("where", ["model", "tool"])
def test_an_interrupt_ends_the_run_interrupted_and_propagates(tmp_path: Path, where: str) -> None:
    store = tmp_path / "store.sqlite"
    if where == "model":
        agent = gr.Agent(interrupted_model, workspace=tmp_path / "ws", store=store)
        raised: type[BaseException] = KeyboardInterrupt
    else:
        tool = gr.Tool("quit", "Exits.", {"type": "object"}, exiting_tool)
        model = gr.ScriptedModel([gr.tool_call("quit"), gr.text("never")])
        agent = gr.Agent(model, tools=[tool], workspace=tmp_path / "ws", store=store)
        raised = SystemExit
    with pytest.raises(raised):
        agent.run_sync("Do it.")
    run = gr.current_run()
    assert run is not None and run.done
    assert run.status == "interrupted"
    assert run.events[-1].kind == "run_finished"
    assert run.events[-1]["status"] == "interrupted"
    assert raised.__name__ in str(run.reason)
    [row] = gr.runs_df(store).to_dict("records")
    assert row["status"] == "interrupted" and row["run_id"] == run.run_id
    assert live_owner(tmp_path / "ws") is None  # the workspace is free again
