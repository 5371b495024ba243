"""A widget's click, handled on the event loop the widget was made on.

JupyterLab 4.6 sends widget messages on a kernel subshell, a thread with an event loop of
its own, so a click handler runs there, not on the kernel's loop where the run is. An
``asyncio.Event`` set from that thread does not wake the run's loop: a paused run clicked
Resume stayed paused until the next cell woke the kernel. Every control therefore hands its
handler to the loop it belongs to, as a cell's ``%agent resume`` would run it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["on_this_loop"]


def on_this_loop(handler: Callable[[], object]) -> Callable[[object], None]:
    """A click callback that runs ``handler`` on the loop running here and now (the kernel's,
    in a cell), whichever thread the click arrives on. Without a running loop, or once that
    loop has stopped, the handler runs where the click arrives."""
    home = _running_loop()

    def clicked(_: object) -> None:
        if home is None or not home.is_running() or _running_loop() is home:
            handler()
        else:
            home.call_soon_threadsafe(handler)

    return clicked


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
