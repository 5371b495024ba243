"""The cells that do not hold today, and why: a bug of issue 38 (``xfail(strict=False)``,
for the engineer to flip once it is fixed), or a host limitation (``xfail(strict=True)``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    reason: str
    strict: bool = False
    """A host limitation: the day the cell holds, its test fails, and this goes."""


def _bug(text: str) -> Known:
    return Known(f"issue 38: {text}")


EDIT_UNCHECKED = _bug("(c) an approver's edit is not checked against the other live policies")

KNOWN: Mapping[tuple[str, str], Known] = {
    ("gr", "5"): EDIT_UNCHECKED,
    ("gr", "6"): _bug("(d) after the schema refuses an edit, Approve runs the model's input"),
    ("gr", "8"): _bug("(a) a shadow that edits params in place changes the live call"),
    ("langchain", "5"): EDIT_UNCHECKED,
    ("langchain", "6"): _bug(
        "the middleware checks an edit against no schema (check=lambda: None), though "
        "LangChain's tool has one: the refused edit is never asked again"
    ),
    ("langchain", "8"): _bug("(b) the shadow's in-place edit leaks into the live policy's memory"),
    ("langchain", "12"): _bug("(e) a cost cap with an unpriced model is ignored: the run spends"),
    ("claude-sdk", "5"): EDIT_UNCHECKED,
    ("claude-sdk", "6"): Known(
        "host limitation: the bridge hands an edit to the CLI as can_use_tool's "
        "updated_input unchecked, and the CLI checks it against the SDK tool's JSON schema only "
        "after that answer, failing the call; the refused edit cannot be asked again",
        strict=True,
    ),
    ("claude-sdk", "8"): _bug(
        "like (b): the shadow's in-place edit leaks into the live policy's memory (the CLI "
        "runs its own copy of the input)"
    ),
    ("claude-sdk", "11a"): _bug("(f) the Claude bridge sends no 80% wrap-up order"),
    ("claude-sdk", "11b"): _bug("(f) the Claude bridge sends no 80% wrap-up order"),
    ("claude-sdk", "11c"): _bug("(f) the Claude bridge sends no 80% wrap-up order"),
    ("claude-sdk", "12"): _bug(
        "like (e): a cost cap with an unpriced model is not refused before the session spends"
    ),
}
