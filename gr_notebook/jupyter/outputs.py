"""A view of a run in a cell's output: live while the run is, then the run as it ended.

A widget output does not survive a saved notebook: JupyterLab always draws the widget view
over an output's HTML fallback, and after a save and reopen, with no kernel, it reads "Error
displaying widget: model not found". So a live view is shown with a display id, and when its
run ends that output is replaced (``update_display``) by a static one, ``text/html`` and
``text/plain`` with no widget view: what GitHub, nbviewer and a reopened notebook show. A
view of a run that has already ended is static from the start.

The replacement must reach the cell that showed the view, also when the run ends while
another cell runs (a background run). Front ends differ in what they read: JupyterLab applies
an update only to the outputs of the cell the message names as its parent, and nbclient (so
``make notebooks`` and nbval) reads only the messages of the cell it is running, and updates
by display id across the notebook. The update is therefore sent to both cells when they
differ (decision 386).
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from IPython import display as ipython_display

from gr_notebook.events import Event
from gr_notebook.run import Run

__all__ = ["LiveOutput", "display", "show_run_view", "show_static"]

Bundle = Mapping[str, Any]
display: Callable[..., Any] = ipython_display.display


def show_static(bundle: Bundle) -> None:
    """Show ``bundle`` (``text/html`` and ``text/plain``) as it is."""
    display(dict(bundle), raw=True)


class LiveOutput:
    """One output shown now under a display id, to be replaced once by a static bundle."""

    def __init__(self, bundle: Bundle) -> None:
        self.display_id = uuid.uuid4().hex
        self.shown_in = _parent_now()
        """The header of the cell that showed it (None outside a kernel)."""
        self._replaced = False
        self._lock = threading.Lock()
        display(dict(bundle), raw=True, display_id=self.display_id)

    def replace(self, bundle: Bundle) -> None:
        """Put ``bundle`` in the output's place: in the cell that showed it, and in the cell
        running now when that is another one. A second call does nothing."""
        with self._lock:
            if self._replaced:
                return
            self._replaced = True
        publisher = _publisher()
        cells = [self.shown_in, _latest_parent()]
        targets = [c for i, c in enumerate(cells) if c and c not in cells[:i]]
        if not targets or not hasattr(publisher, "set_thread_parent"):
            _update(bundle, self.display_id)
            return
        for parent in targets:
            token = publisher.set_thread_parent(parent)
            try:
                _update(bundle, self.display_id)
            finally:
                publisher.reset_thread_parent(token)


def show_run_view(
    run: Run, live: Callable[[], Bundle], static: Callable[[], Bundle]
) -> LiveOutput | None:
    """Show a view of ``run``: ``static()`` for a run that has ended; else ``live()`` (a
    widget's bundle), replaced by ``static()`` when the run finishes. Returns the live
    output, or None for a static one."""
    if run.done:
        show_static(static())
        return None
    output = LiveOutput(live())

    def ended(event: Event) -> None:
        if event.kind == "run_finished":
            end()

    def end() -> None:
        unsubscribe()
        output.replace(static())

    unsubscribe = run.subscribe(ended)
    if _ended(run):  # on another thread, while the live view was being shown
        end()
    return output


def _ended(run: Run) -> bool:
    return run.done


def _update(bundle: Bundle, display_id: str) -> None:
    display(dict(bundle), raw=True, display_id=display_id, update=True)


def _publisher() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    return getattr(shell, "display_pub", None)


def _parent_now() -> dict[str, Any] | None:
    """The header this context's output is sent under (ipykernel's display publisher)."""
    header = getattr(_publisher(), "parent_header", None)
    return dict(header) if isinstance(header, Mapping) and header else None


def _latest_parent() -> dict[str, Any] | None:
    """The header of the cell the kernel ran last: ipykernel falls back to it in a context
    that set no parent of its own, which an empty context is."""
    return contextvars.Context().run(_parent_now)
