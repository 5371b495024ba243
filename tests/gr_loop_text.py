"""What a dashboard of gr's own loop says that a session of another harness's must not: one
list for the display tests and the Claude Agent SDK's, so a new gr-loop-only text is added
once."""

from __future__ import annotations

__all__ = ["GR_LOOP_TEXT"]

GR_LOOP_TEXT = (
    "ACTIVE TODO LIST",
    "todo_write",
    "Unnamed phase",
    "No plan yet",
    "Plan: none yet",
    "phase",  # "phases complete", "Unnamed phase", a phase's line on the timeline
    "the job is not complete",
    "the todo list is rewound",  # tier 2 in gr's loop; a session has a second strategy check
)
