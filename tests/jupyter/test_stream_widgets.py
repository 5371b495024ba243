"""The dashboard follows a streaming turn: text as it arrives, thinking collapsed, redrawn
through its throttle; Stop and Ctrl-C cut the stream and close its connection."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.jupyter.interrupts import INTERRUPTED, CtrlC
from gr_notebook.jupyter.widgets import Dashboard
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.call_context import turn_stream
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import Fault, MessagesServer
from tests.conftest import agent_at
from tests.test_run_controls import until

LONG = "Reading the notes now, then I will write the summary. " * 40
INTERVAL = 0.05


def claude(server: MessagesServer) -> AnthropicModel:
    retry = RetryPolicy(max_retries=1, base_s=0.01)
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-x", base_url=server.url, retry=retry)


class ThinkingServer(MessagesServer):
    """Each answer starts with a thinking block, as a model with thinking on answers."""

    def _message(self, response: Any, body: Any, turn_number: int) -> dict[str, Any]:
        message = super()._message(response, body, turn_number)
        thinking = {"type": "thinking", "thinking": "Weigh the two files. " * 5, "signature": "s"}
        return {**message, "content": [thinking, *message["content"]]}


async def test_the_live_panel_shows_the_text_as_it_arrives_then_gives_way(
    tmp_path: Path,
) -> None:
    turns = [Fault.drip(0.01, then=gr.text(LONG)), gr.text("done")]
    with ThinkingServer(turns, chunk_chars=12) as server:
        run = agent_at(tmp_path, claude(server), max_iterations=2).start("job")
        dash = Dashboard(run, interval=INTERVAL)
        await until(lambda: "Reading the notes now" in dash.live.value)
        shown = dash.live.value
        assert "<details class='gr-live-thinking'><summary>thinking…</summary>" in shown
        assert "Weigh the two files." in shown and "Reading the notes now" in shown
        assert "turn 1 · the model is writing…" in shown
        await until(lambda: len(run.events.of_kind("model_call")) >= 1)
        await run.wait()
    assert dash.live.value == ""  # the finished turns show as every turn does
    assert dash.live_renders >= 2  # it redrew while the text came in, not only at the end


async def test_live_redraws_are_throttled_however_many_deltas_come(tmp_path: Path) -> None:
    async def streaming(request: ModelRequest) -> ModelResponse:
        stream = turn_stream()
        assert stream is not None
        for i in range(400):
            if stream.active:
                stream.send("text", f"w{i} ")
            if i % 4 == 0:
                await asyncio.sleep(0.003)
        return gr.text("done")

    run = agent_at(tmp_path, streaming, max_iterations=1).start("job")
    dash = Dashboard(run, interval=INTERVAL)
    started = time.monotonic()
    await run.wait()
    elapsed = time.monotonic() - started
    assert elapsed > 4 * INTERVAL  # long enough for the throttle to matter
    assert 2 <= dash.live_renders <= elapsed / INTERVAL + 2  # not 400
    assert dash.live.value == ""


async def test_stop_cuts_the_stream_and_closes_its_connection(tmp_path: Path) -> None:
    with MessagesServer([Fault.drip(0.25, then=gr.text(LONG))], chunk_chars=6) as server:
        run = agent_at(tmp_path, claude(server)).start("job")
        dash = Dashboard(run, interval=INTERVAL)
        await until(lambda: "gr-live-text" in dash.live.value)
        started = time.monotonic()
        dash.stop_button.click()
        await asyncio.wait_for(run.wait(), timeout=2.0)
        assert run.status == "cancelled" and time.monotonic() - started < 1.0
        await until(lambda: server.disconnects == 1, limit=1.0)
    assert dash.live.value == "" and "Stop requested." in dash.log_panel.value


async def test_ctrl_c_cuts_the_stream_and_closes_its_connection(tmp_path: Path) -> None:
    with MessagesServer([Fault.drip(0.25, then=gr.text(LONG))], chunk_chars=6) as server:
        run = agent_at(tmp_path, claude(server)).start("job")
        seen: list[Any] = []
        run.subscribe_stream(seen.append)
        with pytest.raises(KeyboardInterrupt), CtrlC() as ctrl_c:
            ctrl_c.watch(run)
            await until(lambda: bool(seen))
            started = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)  # the kernel's interrupt, as the handler sees it
            await asyncio.wait_for(run.wait(), timeout=2.0)
        assert run.status == "interrupted" and run.reason == INTERRUPTED
        assert time.monotonic() - started < 1.0
        await until(lambda: server.disconnects == 1, limit=1.0)
