"""The cells that cannot hold, and why: a host limitation, a strict xfail (the day the cell
holds, its test fails, and the entry goes). A bug is never listed here: it is fixed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    reason: str
    strict: bool = False
    """A host limitation: the day the cell holds, its test fails, and this goes."""


KNOWN: Mapping[tuple[str, str], Known] = {
    ("claude-sdk", "6"): Known(
        "host limitation: the bridge does not see the SDK tools' JSON schemas, so it cannot "
        "refuse an edit and ask again; the CLI checks the edit it is handed (can_use_tool's "
        "updated_input) only after that answer, and fails the call",
        strict=True,
    ),
}
