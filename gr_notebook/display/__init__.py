"""Pure display: the HTML and text renderers, the timeline's lines and the dashboard's
state model. Nothing here imports IPython or ipywidgets, so reprs work in any front end
and the dashboard's logic is tested without a kernel."""
