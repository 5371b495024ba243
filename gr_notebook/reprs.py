"""HTML reprs by dependency inversion: the core's objects name no display code.

``Plan``, ``TodoList`` and ``Run`` sit below the display layer that draws them, so their
``_repr_html_`` asks :func:`to_html`, and the display layer registers its renderers here
(:func:`gr_notebook.display.reprs.install`, run by ``import gr_notebook``). No lower layer
imports a higher one, and every HTML repr comes from ``gr_notebook.display``.
"""

from __future__ import annotations

from functools import singledispatch

__all__ = ["to_html"]


@singledispatch
def to_html(obj: object) -> str | None:
    """The HTML the display layer draws for ``obj``; None, which front ends read as "no
    HTML repr", for a type it has not registered."""
    return None
