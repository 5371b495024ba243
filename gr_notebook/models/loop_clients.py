"""One SDK client per event loop.

An async client's pooled connections belong to the event loop that opened them, and each
blocking wait runs in a new loop: ``run_sync()`` anywhere, a notebook cell's included, and a
``%%agent`` cell that cannot await. A client the adapter builds can be
built again for each loop; a client the user passed in cannot, so it serves the first loop
that asks and any other gets an error that says what to do.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from gr_notebook.errors import ModelError

__all__ = ["LoopClients"]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """``given`` is the user's client (or one built up front); ``build`` makes a client for a
    loop that has none, and is None when only ``given`` may be used."""

    def __init__(self, given: C | None, build: Callable[[], C] | None, *, sdk: str) -> None:
        if given is None and build is None:
            raise ValueError("LoopClients needs a client or a way to build one")
        self._given = given
        self._build = build
        self._sdk = sdk
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )

    def current(self) -> C:
        """The running loop's client."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is not None:
            return client
        if self._given is not None:
            client, self._given = self._given, None
        elif self._build is not None:
            client = self._build()
        else:
            raise ModelError(
                f"the {self._sdk} client passed in was used in another event loop, and its "
                "connections belong to that one. Each run_sync() (any blocking wait for a "
                "run) starts a new event loop, in a notebook too: there, await the run "
                "instead (run = await agent.run(...)), which keeps every run on the "
                "kernel's loop; elsewhere pass a new client for each run, or let the model "
                "build its own"
            )
        self._clients[loop] = client
        return client
