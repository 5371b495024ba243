"""A run you can share: one HTML file that opens anywhere, with no server and no install,
and shows every guardrail's decision turn by turn (:func:`export_html`, ``run.to_html``,
``python -m gr_notebook export``); :func:`view` shows the same page in a cell."""

from gr_notebook.share.export import SharedView, export_html, page_of, view

__all__ = ["SharedView", "export_html", "page_of", "view"]
