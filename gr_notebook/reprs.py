"""HTML reprs by dependency inversion: the core's objects name no display code.

``Plan``, ``TodoList`` and ``Run`` sit below the display layer that draws them, so their
``_repr_html_`` asks :func:`to_html`, and the display layer registers its renderers here
(:func:`gr_notebook.display.reprs.install`, run by ``import gr_notebook``). No lower layer
imports a higher one, and every HTML repr comes from ``gr_notebook.display``. A ``Run`` shown
in a notebook follows the run live, which only the notebook face can do: its
``_ipython_display_`` asks :func:`notebook_display`, which ``import gr_notebook`` hands to
the notebook face.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch

__all__ = ["notebook_display", "set_notebook_display", "to_html"]

_show: Callable[[object], object] | None = None


@singledispatch
def to_html(obj: object) -> str | None:
    """The HTML the display layer draws for ``obj``; None, which front ends read as "no
    HTML repr", for a type it has not registered."""
    return None


def set_notebook_display(show: Callable[[object], object]) -> None:
    global _show
    _show = show


def notebook_display(obj: object) -> None:
    """Show ``obj`` in IPython as the notebook face does (registered by ``import gr_notebook``)."""
    if _show is None:
        raise RuntimeError("import gr_notebook first: it registers how a run is shown")
    _show(obj)
