"""Working with whole runs, live or read back from the store: resume or fork one, compare
two, replay other guardrails over recorded runs, and lint the orders it was given.

It sits above the run (:mod:`gr_notebook.run`, :mod:`gr_notebook.runner`), since resume and
fork start runs; what only reads the store (its DataFrames) is in :mod:`gr_notebook.history`.
"""
