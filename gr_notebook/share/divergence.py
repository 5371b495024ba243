"""Where two runs part: the first turn whose tool calls, or what the live guardrails
decided about them, differ.

Turns are aligned by number. A fork starts at its parent's turn (its history before that is
the parent's), so only the turns both runs recorded are compared; past the shorter run, the
first turn only one of them has is where they part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["first_divergence", "turn_signature"]


def turn_signature(turn: Mapping[str, Any], texts: Sequence[str]) -> tuple[Any, ...]:
    """What a turn did, as a value: each call's tool, input, live verdicts and error."""
    return tuple(
        (
            call["tool"],
            texts[call["input"]] if call["input"] is not None else None,
            tuple(d["verdict"] for d in call["decisions"] if not d["shadow"]),
            call["error"],
        )
        for call in turn["calls"]
    )


def first_divergence(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], texts: Sequence[str]
) -> int | None:
    """The first turn where runs ``a`` and ``b`` (their lists of turns) differ; None when
    they agree on every turn both recorded and end on the same one."""
    by_a = {t["turn"]: t for t in a if t["turn"] > 0}
    by_b = {t["turn"]: t for t in b if t["turn"] > 0}
    if not by_a or not by_b:
        return None
    start = max(min(by_a), min(by_b))
    for number in range(start, max(max(by_a), max(by_b)) + 1):
        one, two = by_a.get(number), by_b.get(number)
        if one is None and two is None:
            continue
        if one is None or two is None:
            return number
        if turn_signature(one, texts) != turn_signature(two, texts):
            return number
    return None
