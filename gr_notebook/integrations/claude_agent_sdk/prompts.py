"""What the system tells Claude about calls the bridge itself refuses (the interventions'
orders of a session are :mod:`gr_notebook.integrations.session_interventions`)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["run_ended", "unreadable_call"]


def unreadable_call(problems: Sequence[str]) -> str:
    """A call whose hook input the guardrails could not read: denied, since no policy could
    judge it. The model can only try again, and stop trying if it keeps happening."""
    return (
        f"Not run: the guardrails could not read this tool call ({'; '.join(problems)}), so "
        "no policy could check it. Call the tool again, with its name and its inputs as named "
        "fields. If the same refusal comes back, end your turn and say that the guardrails "
        "could not read your tool calls."
    )


def run_ended(run_id: str, status: str) -> str:
    """A call made after the run these hooks record has ended."""
    return (
        f"Not run: the guarded run {run_id} has ended ({status}), so no more tool calls are "
        "allowed in this session. End your turn now."
    )
