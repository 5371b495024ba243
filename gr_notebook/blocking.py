"""Wait for a coroutine from synchronous code, also inside a running loop (a Jupyter cell).

Inside a running loop the coroutine runs to its end on a loop of its own, in a worker
thread, while the caller's thread waits. The caller's loop is never re-entered: in Jupyter
that loop is the kernel's, and ipykernel 7 runs each queued cell (JupyterLab's Run All) as
a task on it, so re-entering it (nest-asyncio) would step the next cell inside this one.
The worker starts in a copy of the caller's :mod:`contextvars` context, so what the
coroutine displays or prints belongs to the cell that waits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["loop_is_running", "run_blocking"]

T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T], *, wind_down: bool = True) -> T:
    """``asyncio.run(coro)``; inside a running loop, the same on a worker thread.

    A ``KeyboardInterrupt`` while waiting cancels the coroutine and waits for it to wind down
    (a run records how it ended), then propagates; a second one propagates at once. A caller
    whose first Ctrl-C only asked for a stop (:class:`~gr_notebook.jupyter.interrupts.CtrlC`)
    passes ``wind_down=False``: the interrupt that reaches here is then the second press, and
    propagates at once while the coroutine winds down on its own thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _on_worker_thread(coro, wind_down)


def loop_is_running() -> bool:
    """Whether this thread runs an event loop (a Jupyter cell, async code): the notebook face
    starts a fork or a resume there in the background rather than wait for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_worker_thread(coro: Coroutine[Any, Any, T], wind_down: bool) -> T:
    loop = asyncio.new_event_loop()
    worker = threading.Thread(target=_serve, args=(loop,), name="gr-run-blocking", daemon=True)
    worker.start()
    # The task is made in the worker from a copy of this thread's context.
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    wait_for_worker = True
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()  # cancels the task; the join below waits for it to wind down
        wait_for_worker = wind_down
        raise
    finally:
        loop.call_soon_threadsafe(loop.stop)
        if wait_for_worker:
            worker.join()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until stopped, then close it as :func:`asyncio.run` would."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        _cancel_leftovers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Tasks the coroutine started and left behind end with it, as under ``asyncio.run``."""
    leftovers = asyncio.all_tasks(loop)
    for task in leftovers:
        if not task.cancelling():  # a second cancel would cut short its winding down
            task.cancel()
    if leftovers:
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
