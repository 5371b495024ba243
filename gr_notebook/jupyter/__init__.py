"""The notebook face: what needs IPython or ipywidgets, and nothing else.

The magics (``%%agent``, ``%todo``, ``%rewind``, ``%agent``) with the cell transformer and
the Ctrl-C handling they use, the live dashboard and todo panel, and the confirmation
widget. What they draw comes from :mod:`gr_notebook.display`, which is pure. Nothing
outside this package imports it except ``gr_notebook/__init__.py``: ``%load_ext
gr_notebook`` loads the magics, and ``gr.Dashboard`` loads the widgets on first use.
"""
