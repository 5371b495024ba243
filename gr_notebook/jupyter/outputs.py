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

The same output serves what is not a run but ends like one: an experiment's progress table
(static when the experiment ends) and the labelling widget (static when the labelling is
finished, with the labels given so far in a static output of their own, updated as each is
given). A new view may be shown in another cell than the one running now (``cell=``): the
dashboard of a run forked by a click goes under the dashboard or picker that was clicked.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from IPython import display as ipython_display

from gr_notebook.events import Event
from gr_notebook.run import Run

__all__ = ["Cell", "LiveOutput", "cell_now", "display", "show_run_view", "show_static"]

Bundle = Mapping[str, Any]
Cell = dict[str, Any]
"""A cell, as the kernel names it: the header of the request that ran it."""
display: Callable[..., Any] = ipython_display.display


def show_static(bundle: Bundle, *, cell: Cell | None = None) -> None:
    """Show ``bundle`` (``text/html`` and ``text/plain``) as it is, in ``cell`` (by default
    the one running now)."""
    with _in_cell(cell):
        display(dict(bundle), raw=True)


class LiveOutput:
    """One output shown now under a display id, in ``cell`` (by default the one running
    now): updated while what it shows changes, then replaced once by how it ended."""

    def __init__(self, bundle: Bundle, *, cell: Cell | None = None) -> None:
        self.display_id = uuid.uuid4().hex
        self.shown_in = cell or cell_now()
        """The header of the cell that showed it (None outside a kernel)."""
        self._replaced = False
        self._lock = threading.Lock()
        with _in_cell(cell):
            display(dict(bundle), raw=True, display_id=self.display_id)

    def update(self, bundle: Bundle) -> None:
        """Show ``bundle`` in the output's place, which may change again; nothing once the
        output has been replaced."""
        with self._lock:
            if not self._replaced:
                self._send(bundle)

    def replace(self, bundle: Bundle) -> None:
        """Put ``bundle`` in the output's place for good: in the cell that showed it, and in
        the cell running now when that is another one. A second call does nothing."""
        with self._lock:
            if self._replaced:
                return
            self._replaced = True
            self._send(bundle)

    def _send(self, bundle: Bundle) -> None:
        cells = [self.shown_in, _latest_parent()]
        targets = [c for i, c in enumerate(cells) if c and c not in cells[:i]]
        if not targets or not hasattr(_publisher(), "set_thread_parent"):
            _update(bundle, self.display_id)
            return
        for parent in targets:
            with _in_cell(parent):
                _update(bundle, self.display_id)


def show_run_view(
    run: Run,
    live: Callable[[], Bundle],
    static: Callable[[], Bundle],
    *,
    cell: Cell | None = None,
) -> LiveOutput | None:
    """Show a view of ``run`` in ``cell`` (by default the one running now): ``static()`` for
    a run that has ended; else ``live()`` (a widget's bundle), replaced by ``static()`` when
    the run finishes. Returns the live output, or None for a static one."""
    if run.done:
        show_static(static(), cell=cell)
        return None
    output = LiveOutput(live(), cell=cell)

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


def cell_now() -> Cell | None:
    """The header this context's output is sent under (ipykernel's display publisher): the
    cell running now, or the message a click came in (None outside a kernel)."""
    header = getattr(_publisher(), "parent_header", None)
    return dict(header) if isinstance(header, Mapping) and header else None


def _latest_parent() -> Cell | None:
    """The header of the cell the kernel ran last: ipykernel falls back to it in a context
    that set no parent of its own, which an empty context is."""
    return contextvars.Context().run(cell_now)


@contextlib.contextmanager
def _in_cell(cell: Cell | None) -> Iterator[None]:
    """Output sent in the block goes to ``cell`` (as it does, unchanged, when it is None or
    the display publisher is not a kernel's)."""
    publisher = _publisher()
    if cell is None or not hasattr(publisher, "set_thread_parent"):
        yield
        return
    token = publisher.set_thread_parent(cell)
    try:
        yield
    finally:
        publisher.reset_thread_parent(token)
