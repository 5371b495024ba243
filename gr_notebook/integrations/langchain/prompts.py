"""What the system tells the model in a LangChain session where gr's own wording names gr's
workflow tools (``summarize_progress``, ``job_complete``), which the session lacks."""

from __future__ import annotations

__all__ = ["wrap_up"]


def wrap_up(recommendation: str) -> str:
    """The wrap-up order past 80% of a hard limit: seed 003's warning, and what to do."""
    return (
        f"{recommendation} Do not start new work: finish what you are doing, then end your "
        "turn with your final answer, saying what is done and what is left."
    )
