"""How the simulated agent audits code: seed 003's "before" and "after", side by side.

Without the self-regulation tools it does what the seed's unregulated agent did: list a
directory and read every file in it. With them it follows ``assess_task``'s guidance:
search first, and read only the files with hits. Both record the same findings, in the
same words, so the benchmark compares the cost of one deliverable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gr_notebook.models.simulated.planner import slug
from gr_notebook.models.simulated.situation import Call, Situation, Task

__all__ = ["AUDIT_PATTERN", "audit_work", "is_audit_task", "report_work"]

AUDIT_PATTERN = r"TODO|FIXME|eval\(|password\s*=|verify=False"
"""What the audit job (:func:`gr_notebook.examples.audit_job`) plants, and what the
simulated auditor searches for."""

READS_PER_TURN = 4
MAX_FINDING_CHARS = 160
REPORT_FILE = "audit.md"
_HIT = re.compile(r"^(\S+?):(\d+): (.*)$")
_LISTED = re.compile(r"^(\S+)  \(\d+ bytes\)$")
_FINDING = re.compile(r"^- \S+:\d+: ")

ToolCalls = list[tuple[str, Mapping[str, Any]]]
Work = tuple[ToolCalls, "tuple[str, str | None] | None"]


def is_audit_task(task: Task) -> bool:
    return task.title.startswith("Audit ")


def audit_work(s: Situation, task: Task) -> Work:
    folder = task.title.removeprefix("Audit ").strip()
    since = s.calls_since("todo_complete")
    regulated = "search" in s.tools and "assess_task" in s.tools
    found = _last(since, "search" if regulated else "list_files", folder)
    if found is None:
        if regulated:
            return [("search", {"pattern": AUDIT_PATTERN, "path": folder})], None
        return [("list_files", {"path": folder})], None
    wanted = _hit_files(found) if regulated else _listed_files(found)
    read = {str(c.input.get("path")): c.result or "" for c in since if c.ok("read_file")}
    unread = [p for p in wanted if p not in read]
    if unread:
        return [("read_file", {"path": p}) for p in unread[:READS_PER_TURN]], None
    findings = sorted(
        {
            f"- {path}:{number}: {line.strip()[:MAX_FINDING_CHARS]}"
            for path in wanted
            for number, line in enumerate(read[path].splitlines(), 1)
            if re.search(AUDIT_PATTERN, line, re.IGNORECASE)
        },
        key=_order,
    )
    path = f"work/phase_{s.phase_number:02d}/{task.number:02d}_{slug(task.title)}.md"
    body = "\n".join(findings) if findings else "- no findings"
    content = f"# Findings in {folder}\n\n{body}\n"
    return [("write_file", {"path": path, "content": content})], ("write_file", path)


def report_work(s: Situation) -> Work:
    """Collect every findings file into the report."""
    since = s.calls_since("todo_complete")
    listing = _last(since, "list_files", "work")
    if listing is None:
        return [("list_files", {"path": "work"})], None
    wanted = [p for p in _listed_files(listing) if "audit" in p]
    read = {str(c.input.get("path")): c.result or "" for c in since if c.ok("read_file")}
    unread = [p for p in wanted if p not in read]
    if unread:
        return [("read_file", {"path": p}) for p in unread[:READS_PER_TURN]], None
    findings = sorted(
        {line for p in wanted for line in read[p].splitlines() if _FINDING.match(line)},
        key=_order,
    )
    content = "# Audit report\n\n" + "\n".join(findings) + f"\n\n{len(findings)} findings.\n"
    return [("write_file", {"path": REPORT_FILE, "content": content})], ("write_file", REPORT_FILE)


def _last(calls: Sequence[Call], name: str, folder: str) -> Call | None:
    for call in reversed(calls):
        if call.ok(name) and call.input.get("path") == folder:
            return call
    return None


def _hit_files(call: Call) -> list[str]:
    files = (m.group(1) for line in (call.result or "").splitlines() if (m := _HIT.match(line)))
    return list(dict.fromkeys(files))


def _listed_files(call: Call) -> list[str]:
    return [m.group(1) for line in (call.result or "").splitlines() if (m := _LISTED.match(line))]


def _order(finding: str) -> tuple[str, int]:
    match = _HIT.match(finding[2:])
    return (match.group(1), int(match.group(2))) if match else (finding, 0)
