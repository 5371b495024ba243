"""The figures the toolkit's ``plot()`` methods return: matplotlib figures that draw
themselves in a notebook, once, with or without pyplot.

A figure made with ``Figure()`` is not pyplot's: the inline backend neither shows it at the
end of the cell nor, until pyplot is imported, has a formatter for it, so a cell ending with
one showed only ``<Figure size ... with 2 Axes>``. These figures (and their axes) carry
``_repr_png_``, which IPython asks for when no formatter is registered for their type; once
pyplot is imported the inline backend's formatter for ``Figure`` answers first, with the
user's settings. Being nobody's in pyplot, they are never shown a second time by the
inline backend's end-of-cell flush, and they are freed when the last reference goes.

Importing this module imports matplotlib, so the plots import it when first called.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["NotebookAxes", "NotebookFigure", "subplots"]


class NotebookFigure(Figure):
    """A matplotlib :class:`~matplotlib.figure.Figure` that Jupyter draws as a PNG when it
    is a cell's last expression; ``display(figure)`` shows it mid-cell. ``plt.show()`` does
    not: pyplot does not hold it."""

    def _repr_png_(self) -> bytes:
        buffer = BytesIO()
        self.savefig(buffer, format="png", bbox_inches="tight")
        return buffer.getvalue()


class NotebookAxes(Axes):
    """Axes of a :class:`NotebookFigure`; as a cell's last expression they draw the whole
    figure, as the axes of a pyplot figure do through the inline backend."""

    def _repr_png_(self) -> bytes | None:
        root = self.figure.figure  # a subfigure's figure is the one that is drawn
        return root._repr_png_() if isinstance(root, NotebookFigure) else None


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float]
) -> tuple[NotebookFigure, Any]:
    """``plt.subplots`` for a figure pyplot never holds: the figure and its
    :class:`NotebookAxes` (one, or an array as ``Figure.subplots`` gives), laid out by
    constrained layout so titles and outside legends keep their room."""
    figure = NotebookFigure(figsize=figsize, layout="constrained")
    axes = figure.subplots(nrows, ncols, subplot_kw={"axes_class": NotebookAxes})
    return figure, axes
