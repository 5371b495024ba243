"""A client passed in serves one event loop; in a notebook every ``run_sync`` is a new loop
(decisions 105 and 285), so the error for the second says how to keep one loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.blocking import run_blocking
from gr_notebook.errors import ModelError
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.loop_clients import LoopClients
from gr_notebook.testing import MessagesServer
from tests.conftest import agent_at

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    server = MessagesServer([gr.text("one"), gr.text("two")])
    server.start()
    yield server
    server.close()


def anthropic_model(server: MessagesServer) -> AnthropicModel:
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=server.url, max_retries=0)
    return AnthropicModel(MODEL, client=client)


async def test_the_error_names_run_sync_and_says_to_await_in_a_notebook() -> None:
    given = object()
    clients = LoopClients(given, None, sdk="anthropic")
    assert clients.current() is given  # this loop's, from now on
    assert clients.current() is given

    async def on_another_loop() -> object:
        return clients.current()

    with pytest.raises(ModelError) as caught:
        run_blocking(on_another_loop())  # a cell's blocking wait: a loop of its own
    message = str(caught.value)
    assert "the anthropic client passed in was used in another event loop" in message
    assert "Each run_sync()" in message and "in a notebook too" in message
    assert "run = await agent.run(...)" in message
    assert "pass a new client for each run" in message
    assert "asyncio.run()" not in message  # the user called run_sync, not asyncio.run


async def test_in_a_notebook_a_second_run_sync_is_refused_and_awaiting_is_not(
    server: MessagesServer, tmp_path: Path
) -> None:
    """The test's running loop stands for the kernel's."""
    model = anthropic_model(server)
    agent = agent_at(tmp_path / "a", model)
    assert agent.run_sync("job").status == "ended"
    second = agent_at(tmp_path / "b", model).run_sync("job")
    assert second.status == "failed"
    assert "run = await agent.run(...)" in str(second.reason)
    assert len(server.requests) == 1


async def test_awaited_runs_share_the_loop_and_the_client_passed_in(
    server: MessagesServer, tmp_path: Path
) -> None:
    model = anthropic_model(server)
    first = await agent_at(tmp_path / "a", model).run("job")
    second = await agent_at(tmp_path / "b", model).run("job")
    assert (first.status, second.status) == ("ended", "ended")
    assert len(server.requests) == 2
