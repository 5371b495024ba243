"""The parity table: rows are scenarios, columns runtimes, each cell whether the runtime gave
the row's guardrail events and ran its calls. It lives in ``docs/enforcement.md`` between
its own markers, beside the enforcement table (whose render and page helpers it uses)."""

from __future__ import annotations

from tests.parity.runtime import Observed
from tests.parity.scenarios import Case

MARKERS = (
    "<!-- the parity table: written by tests/parity (GR_UPDATE_PARITY=1) -->",
    "<!-- end of the parity table -->",
)


def differences(seen: Observed, case: Case) -> list[str]:
    """What ``seen`` got wrong, in a few words each; empty when it is what must hold."""
    expected = case.expected
    found = []
    for tool, keys in expected.ran.items():
        got = seen.ran.get(tool, ())
        if tuple(got) != tuple(keys):
            found.append(f"{tool} ran on {_keys(got)}, not {_keys(keys)}")
    if seen.rows != expected.rows:
        at = next(
            (i for i, (a, b) in enumerate(zip(seen.rows, expected.rows, strict=False)) if a != b),
            min(len(seen.rows), len(expected.rows)),
        )
        got = " ".join(seen.rows[at]) if at < len(seen.rows) else "nothing"
        want = " ".join(expected.rows[at]) if at < len(expected.rows) else "nothing"
        found.append(f"event {at + 1} was `{got}`, not `{want}`")
    if not expected.spends and seen.model_calls:
        found.append(f"{seen.model_calls} model call(s) were made before the refusal")
    missing = [w for w in expected.reason if w not in seen.reason]
    if missing:
        found.append(f"the reason lacks {', '.join(missing)}")
    return found


def cell(seen: Observed, case: Case, *, host_limit: bool = False) -> str:
    """``host_limit``: the runtime cannot hold the row (a strict xfail), said in the cell."""
    wrong = differences(seen, case)
    if not wrong:
        events = len(case.expected.rows)
        return f"same ({events} event{'s' * (events != 1)}, {_ran(case)})"
    return ("host limitation, " if host_limit else "") + "DIFFERS: " + "; ".join(wrong)


def _ran(case: Case) -> str:
    runs = [f"{t} ×{len(k)}" for t, k in case.expected.ran.items() if k]
    return ", ".join(runs) or "nothing ran"


def _keys(keys: tuple[str, ...] | list[str]) -> str:
    return ", ".join(repr(k) for k in keys) if keys else "nothing"
