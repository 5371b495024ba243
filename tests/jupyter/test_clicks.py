"""A click that arrives on another thread (a kernel subshell) is handled on the widget's loop."""

from __future__ import annotations

import asyncio
import threading

from gr_notebook.jupyter.clicks import on_this_loop


def test_a_click_from_another_thread_runs_on_the_loop_and_wakes_it() -> None:
    async def cell() -> tuple[int, int]:
        woken = asyncio.Event()
        ran_on: list[int] = []

        def resume() -> None:
            ran_on.append(threading.get_ident())
            woken.set()

        clicked = on_this_loop(resume)
        subshell = threading.Thread(target=clicked, args=(object(),))
        subshell.start()
        subshell.join()
        await asyncio.wait_for(woken.wait(), timeout=5)
        return ran_on[0], threading.get_ident()

    handler_thread, loop_thread = asyncio.run(cell())
    assert handler_thread == loop_thread


def test_a_click_on_the_loop_itself_runs_at_once() -> None:
    async def cell() -> list[str]:
        done: list[str] = []
        on_this_loop(lambda: done.append("clicked"))(object())
        return done  # no await in between: it ran inside the click

    assert asyncio.run(cell()) == ["clicked"]


def test_without_a_loop_or_once_it_stopped_the_click_runs_where_it_arrives() -> None:
    done: list[str] = []
    on_this_loop(lambda: done.append("no loop"))(object())

    async def make() -> object:
        return on_this_loop(lambda: done.append("loop gone"))

    later = asyncio.run(make())  # its loop has closed by now
    later(object())  # type: ignore[operator]
    assert done == ["no loop", "loop gone"]
