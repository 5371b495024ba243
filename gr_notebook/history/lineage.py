"""Which runs started from which: a fork or a resume, linked to its parent and turn."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from gr_notebook.history.cells import DamagedRow, checked
from gr_notebook.history.store import Store

__all__ = ["RELATIONS", "Lineage", "copy_events", "lineage", "record_lineage"]

RELATIONS: Final = frozenset({"fork", "resume"})


@dataclass(frozen=True, slots=True)
class Lineage:
    """A run started from another run's checkpoint: a fork, or a resume."""

    run_id: str
    parent_run_id: str
    parent_turn: int
    relation: str


def copy_events(store: Store, source: str, target: str, upto_seq: int) -> None:
    """Give ``target`` the events of ``source`` up to ``upto_seq``, so a resumed or forked
    run's record is whole on its own."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO events (run_id, seq, kind, turn, phase, time, data)"
            " SELECT ?, seq, kind, turn, phase, time, data FROM events"
            " WHERE run_id = ? AND seq <= ? ORDER BY seq",
            (target, source, upto_seq),
        )


def record_lineage(store: Store, link: Lineage) -> Lineage | None:
    """Record ``link``, or return the resume that took its place: a run is resumed once,
    so when ``link`` is a resume and its parent was resumed already, nothing is recorded
    and that resume's link is returned. The check and the insert are one write
    transaction (``BEGIN IMMEDIATE``: another process's waits for it), so of two resumes
    racing, in one process or two, exactly one is recorded."""
    with store.transaction() as conn:
        conn.execute("BEGIN IMMEDIATE")
        if link.relation == "resume":
            found = conn.execute(
                "SELECT run_id, parent_run_id, parent_turn, relation FROM lineage"
                " WHERE parent_run_id = ? AND relation = 'resume' ORDER BY rowid LIMIT 1",
                (link.parent_run_id,),
            ).fetchone()
            if found is not None:
                return Lineage(*found)
        conn.execute(
            "INSERT INTO lineage (run_id, parent_run_id, parent_turn, relation)"
            " VALUES (?, ?, ?, ?)",
            (link.run_id, link.parent_run_id, link.parent_turn, link.relation),
        )
    return None


def lineage(store: Store, run_ids: Iterable[str] | None = None) -> list[Lineage]:
    """Every link in the store (or those of ``run_ids``, as child or parent)."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT run_id, parent_run_id, parent_turn, relation FROM lineage ORDER BY rowid"
        ).fetchall()
    links = [_link(store, row) for row in rows]
    if run_ids is None:
        return links
    wanted = set(run_ids)
    return [x for x in links if x.run_id in wanted or x.parent_run_id in wanted]


def _link(store: Store, row: sqlite3.Row | tuple[Any, ...]) -> Lineage:
    """A lineage row, checked: StoreError naming the run when a column is not what it
    should hold (SQLite keeps any value in any column)."""
    run_id, parent_run_id, parent_turn, relation = row
    try:
        checked(run_id, str, "run id")
        checked(parent_run_id, str, "parent's run id")
        checked(parent_turn, int, "parent's turn")
        if relation not in RELATIONS:
            raise DamagedRow(f"its relation is {relation!r}, neither 'fork' nor 'resume'")
    except DamagedRow as exc:
        raise store.damaged(f"the lineage of run {run_id!r}", exc) from None
    return Lineage(run_id, parent_run_id, parent_turn, relation)
