"""Seed 000/001's workflow: the workspace, the protected todo list, the plan file, the
phases that move between them, and the words the system says at each step.

Nothing here calls a model: the engine drives these objects turn by turn.
"""
