"""Bridges that carry an agent's guardrails into other harnesses.

Each bridge is an optional extra: importing :mod:`gr_notebook` never imports one, and a
bridge whose library is missing says which extra to install.
"""
