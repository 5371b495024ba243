"""The notebook face: magics, live widgets and the pure HTML renderers behind them.

Nothing here is imported by ``import gr_notebook``; ``%load_ext gr_notebook`` loads the
magics, and ``gr.Dashboard`` loads the widgets on first use.
"""
