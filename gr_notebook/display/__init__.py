"""Pure display: the HTML and text renderers, the timeline's lines, the dashboard's
state model, and the HTML reprs of the core's objects (:mod:`.reprs`). Nothing here imports
IPython or ipywidgets, so reprs work in any front end and the dashboard's logic is tested
without a kernel."""
