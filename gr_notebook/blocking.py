"""Wait for a coroutine from synchronous code, also inside a running loop (a Jupyter cell)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` outside a loop; inside one, re-enter it with nest-asyncio.

    nest-asyncio is imported only here, when a blocking wait inside a running loop is
    actually asked for: its patch is global and permanent for the process.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import nest_asyncio

    nest_asyncio.apply(loop)
    return loop.run_until_complete(coro)
