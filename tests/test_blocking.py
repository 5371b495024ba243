"""``run_blocking`` inside a running loop never re-enters it (JupyterLab's Run All)."""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
import time

import pytest

from gr_notebook.blocking import run_blocking

CELL = contextvars.ContextVar("CELL", default="none")


def test_outside_a_loop_it_is_asyncio_run() -> None:
    async def answer() -> int:
        return 42

    assert run_blocking(answer()) == 42


def test_inside_a_loop_the_loop_is_not_stepped_meanwhile() -> None:
    """A task queued on the caller's loop (the next cell, under Run All) waits until the
    blocking wait is over: it never runs inside it."""
    seen: list[str] = []

    async def queued_cell() -> None:
        seen.append("queued cell")

    async def work() -> str:
        await asyncio.sleep(0.05)
        seen.append("work")
        return threading.current_thread().name

    async def cell() -> str:
        queued = asyncio.get_running_loop().create_task(queued_cell())
        thread = run_blocking(work())
        assert seen == ["work"]
        await queued
        return thread

    thread = asyncio.run(cell())
    assert seen == ["work", "queued cell"]
    assert thread != threading.current_thread().name


def test_the_coroutine_sees_the_callers_context() -> None:
    """ipykernel keeps the cell's parent header in a context variable: what the coroutine
    displays must belong to the cell that waits."""

    async def read() -> str:
        return CELL.get()

    async def cell() -> str:
        CELL.set("cell 7")
        return run_blocking(read())

    assert asyncio.run(cell()) == "cell 7"


def test_errors_propagate() -> None:
    async def fail() -> None:
        raise ValueError("boom")

    async def cell() -> None:
        run_blocking(fail())

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(cell())


def test_ctrl_c_cancels_the_coroutine_and_waits_for_it_to_wind_down() -> None:
    wound_down: list[str] = []

    async def long_run() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # recording how the run ended takes a moment
            wound_down.append("cancelled")
            raise

    async def cell() -> None:
        # as ipykernel does while a cell executes: Ctrl-C raises KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.default_int_handler)
        main = threading.main_thread().ident
        assert main is not None
        threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
        run_blocking(long_run())

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cell())
    assert wound_down == ["cancelled"]


def test_tasks_left_behind_are_cancelled_with_the_wait() -> None:
    left: list[str] = []

    async def straggler() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            left.append("cancelled")
            raise

    async def work() -> None:
        asyncio.get_running_loop().create_task(straggler())
        await asyncio.sleep(0.01)

    async def cell() -> None:
        run_blocking(work())

    asyncio.run(cell())
    assert left == ["cancelled"]


def test_without_wind_down_an_interrupt_leaves_a_stuck_coroutine_at_once() -> None:
    """The second Ctrl-C of a blocking ``%%agent`` cell: the first asked the run to stop, and
    a tool that ignores it (here a blocking sleep) must not hold the cell."""

    async def stuck_tool() -> None:
        time.sleep(3)

    async def cell() -> float:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        main = threading.main_thread().ident
        assert main is not None
        threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
        started = time.monotonic()
        try:
            run_blocking(stuck_tool(), wind_down=False)
        except KeyboardInterrupt:
            return time.monotonic() - started
        raise AssertionError("no KeyboardInterrupt")

    assert asyncio.run(cell()) < 2
