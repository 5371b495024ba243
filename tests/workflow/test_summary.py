"""Tests for workspace_summary.md: the seed's layout, file purposes and caps."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from gr_notebook.workflow.journal import Journal
from gr_notebook.workflow.summary import (
    MAX_ACCOMPLISHMENTS,
    MAX_FILE_ROWS,
    MAX_NOTES,
    SUMMARY_FILE,
    build_workspace_summary,
)
from gr_notebook.workflow.todos import TodoItem, TodoList
from gr_notebook.workflow.workspace import Workspace

PLAN_FILE = "main_plan.md"
GENERATED_AT = dt.datetime(2024, 1, 15, 14, 32, 0).timestamp()

PLAN = """\
# Execution Plan

## Phase 1: Document Analysis ✓ COMPLETE
- [x] a

## Phase 2: Requirement Extraction ← CURRENT
- [ ] b

## Phase 3: Validation & Integration
- [ ] c

## Phase 4: Final Review
- [ ] d
"""


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


def build(ws: Workspace, todos: TodoList | None = None, **kwargs: str) -> str:
    return build_workspace_summary(
        ws,
        plan_file=PLAN_FILE,
        todos=todos if todos is not None else TodoList(),
        clock=lambda: GENERATED_AT,
        **kwargs,
    )


def section(text: str, heading: str) -> list[str]:
    """The lines under ``## heading`` up to the next ``## `` heading, blank lines dropped."""
    lines = text.splitlines()
    start = lines.index(f"## {heading}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line.strip()]


def file_rows(text: str) -> list[str]:
    return section(text, "Files")[2:]  # drop the table header and its rule


def row_for(text: str, name: str) -> list[str]:
    for row in file_rows(text):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[0] == name:
            return cells
    raise AssertionError(f"no row for {name!r} in:\n{text}")


def set_mtime(ws: Workspace, rel: str, when: dt.datetime) -> None:
    stamp = when.timestamp()
    os.utime(ws.resolve(rel), (stamp, stamp))


# ── layout ───────────────────────────────────────────────────────────────────


def test_summary_has_the_seeds_headings_in_order(ws: Workspace) -> None:
    lines = build(ws).splitlines()
    assert lines[0] == "# Workspace Summary"
    assert lines[2] == "Generated: 2024-01-15 14:32:00"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Files", "## Accomplishments", "## Current State", "## Notes"]


def test_files_table_header_matches_seed(ws: Workspace) -> None:
    table = section(build(ws), "Files")
    assert table[:2] == ["| File | Purpose | Last Modified |", "|------|---------|---------------|"]


def test_summary_ends_with_newline(ws: Workspace) -> None:
    assert build(ws).endswith("\n")


# ── file purposes ────────────────────────────────────────────────────────────


def test_known_purposes(ws: Workspace) -> None:
    for name in (PLAN_FILE, "instructions.md", "todos.json", "notes.md", SUMMARY_FILE):
        ws.write_text(name, "x\n")
    text = build(ws)
    assert row_for(text, PLAN_FILE)[1] == "Execution plan"
    assert row_for(text, "instructions.md")[1] == "Task instructions"
    assert row_for(text, "todos.json")[1] == "Active todo list"
    assert row_for(text, "notes.md")[1] == "Accomplishments and notes"
    assert row_for(text, SUMMARY_FILE)[1] == "This summary"


def test_custom_plan_file_is_the_execution_plan(ws: Workspace) -> None:
    ws.write_text("plans/my_plan.md", "# Something else\n")
    text = build_workspace_summary(
        ws, plan_file="plans/my_plan.md", todos=TodoList(), clock=lambda: GENERATED_AT
    )
    assert row_for(text, "plans/my_plan.md")[1] == "Execution plan"


def test_purpose_from_first_heading(ws: Workspace) -> None:
    ws.write_text("document_analysis.md", "\n\n# Initial analysis\n\nBody text.\n")
    assert row_for(build(ws), "document_analysis.md")[1] == "Initial analysis"


def test_purpose_escapes_pipes_and_truncates(ws: Workspace) -> None:
    ws.write_text("pipes.md", "# a | b\n")
    ws.write_text("long.md", "# " + "x" * 100 + "\n")
    text = build(ws)
    assert row_for(text, "pipes.md")[1] == "a / b"
    long_purpose = row_for(text, "long.md")[1]
    assert len(long_purpose) == 48
    assert long_purpose.endswith("…")


def test_purpose_of_empty_and_binary_files(ws: Workspace) -> None:
    ws.write_text("empty.md", "")
    (ws.root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    text = build(ws)
    assert row_for(text, "empty.md")[1] == "Empty file"
    assert row_for(text, "image.png")[1] == "Binary file"


def test_last_modified_is_hours_and_minutes(ws: Workspace) -> None:
    ws.write_text("a.md", "# A\n")
    set_mtime(ws, "a.md", dt.datetime(2024, 1, 15, 14, 15))
    assert row_for(build(ws), "a.md")[2] == "14:15"


def test_rows_are_sorted_by_name(ws: Workspace) -> None:
    for name in ("c.md", "a.md", "b.md"):
        ws.write_text(name, f"# {name}\n")
    names = [row.split("|")[1].strip() for row in file_rows(build(ws))]
    assert names == ["a.md", "b.md", "c.md"]


# ── grouping and caps ────────────────────────────────────────────────────────


def test_archive_and_tools_dirs_collapse_into_one_row_each(ws: Workspace) -> None:
    for i in range(3):
        ws.write_text(f"archive/phase_0{i}_complete.json", "{}")
    ws.write_text("tools/read_file.md", "# read_file\n")
    ws.write_text("tools/write_file.md", "# write_file\n")
    ws.write_text("main_plan.md", PLAN)
    rows = file_rows(build(ws))
    assert "| archive/ | Archived todo lists (3) | |" in rows
    assert "| tools/ | Full tool docs (2 files) | |" in rows
    assert not any("phase_0" in row or "read_file.md" in row for row in rows)
    assert len(rows) == 3


def test_file_table_is_capped_with_an_older_files_row(ws: Workspace) -> None:
    base = dt.datetime(2024, 1, 15, 10, 0)
    for i in range(60):
        ws.write_text(f"data/file_{i:02d}.md", f"# File {i}\n")
        set_mtime(ws, f"data/file_{i:02d}.md", base + dt.timedelta(minutes=i))
    rows = file_rows(build(ws))
    file_rows_only = [r for r in rows if r.startswith("| data/")]
    assert len(file_rows_only) == MAX_FILE_ROWS
    older = [r for r in rows if "older files" in r]
    assert older == [f"| … | {60 - MAX_FILE_ROWS} older files; use list_files() | |"]
    assert len(rows) == MAX_FILE_ROWS + 1


def test_file_table_cap_keeps_the_newest_files(ws: Workspace) -> None:
    base = dt.datetime(2024, 1, 15, 10, 0)
    for i in range(MAX_FILE_ROWS + 5):
        ws.write_text(f"f_{i:02d}.md", "x\n")
        set_mtime(ws, f"f_{i:02d}.md", base + dt.timedelta(minutes=i))
    text = build(ws)
    assert "| f_00.md |" not in text
    assert "| f_04.md |" not in text
    assert f"| f_{MAX_FILE_ROWS + 4:02d}.md |" in text
    assert "| f_05.md |" in text


def test_no_older_files_row_at_the_cap(ws: Workspace) -> None:
    for i in range(MAX_FILE_ROWS):
        ws.write_text(f"f_{i:02d}.md", "x\n")
    rows = file_rows(build(ws))
    assert len(rows) == MAX_FILE_ROWS
    assert not any("older files" in row for row in rows)


# ── accomplishments and notes ────────────────────────────────────────────────


def test_accomplishments_and_notes_come_from_the_journal(ws: Workspace) -> None:
    journal = Journal(ws)
    journal.add_accomplishment("Extracted 23 requirements from sections 1-6")
    journal.add_note("Some requirements span multiple pages")
    text = build(ws)
    assert section(text, "Accomplishments") == ["- Extracted 23 requirements from sections 1-6"]
    assert section(text, "Notes") == ["- Some requirements span multiple pages"]


def test_empty_journal_shows_none_yet(ws: Workspace) -> None:
    text = build(ws)
    assert section(text, "Accomplishments") == ["- (none yet)"]
    assert section(text, "Notes") == ["- (none yet)"]


def test_accomplishments_are_capped_to_the_latest(ws: Workspace) -> None:
    journal = Journal(ws)
    total = MAX_ACCOMPLISHMENTS + 3
    for i in range(total):
        journal.add_accomplishment(f"milestone {i}")
    shown = section(build(ws), "Accomplishments")
    assert shown[0] == "- … 3 earlier entries in notes.md"
    assert shown[1:] == [f"- milestone {i}" for i in range(3, total)]


def test_notes_are_capped_to_the_latest(ws: Workspace) -> None:
    journal = Journal(ws)
    for i in range(MAX_NOTES + 1):
        journal.add_note(f"note {i}")
    shown = section(build(ws), "Notes")
    assert len(shown) == MAX_NOTES + 1
    assert shown[0] == "- … 1 earlier entries in notes.md"
    assert "- note 0" not in shown


# ── current state ────────────────────────────────────────────────────────────


def test_current_state_for_a_phase_in_progress(ws: Workspace) -> None:
    ws.write_text(PLAN_FILE, PLAN)
    todos = TodoList.of(
        [TodoItem("a", True), TodoItem("b", True), "c", "d", "e"],
        phase_number=2,
        phase_total=4,
        phase_name="Requirement Extraction",
    )
    state = section(build(ws, todos), "Current State")
    assert any("Phase 2" in s and "Requirement Extraction" in s for s in state)
    assert "- 2 of 5 tasks complete in current phase" in state
    assert "- 1 of 4 phases complete in main_plan.md" in state
    assert state[-1] == "- No blocking issues"


def test_current_state_without_a_plan(ws: Workspace) -> None:
    state = section(build(ws), "Current State")
    assert "- No plan yet (main_plan.md does not exist)" in state
    assert "- Next: update the plan and write the next todo list" in state


def test_current_state_reports_blocking_issue_and_just_finished(ws: Workspace) -> None:
    state = section(
        build(ws, blocking="API has no batch mode", just_finished="Phase 1: complete"),
        "Current State",
    )
    assert state[0] == "- Just finished: Phase 1: complete"
    assert "- Blocking issue: API has no batch mode" in state
    assert "- No blocking issues" not in state


def test_current_state_for_bootstrap_and_job_completion(ws: Workspace) -> None:
    bootstrap = TodoList.of(["a"], kind="bootstrap")
    finale = TodoList.of(["a"], kind="job_completion")
    assert "- Bootstrapping: building the execution plan" in section(
        build(ws, bootstrap), "Current State"
    )
    assert "- All phases complete; finishing the job" in section(build(ws, finale), "Current State")


def test_building_does_not_write_the_summary_file(ws: Workspace) -> None:
    build(ws)
    assert not ws.exists(SUMMARY_FILE)


def test_summary_never_reads_through_a_symlink_to_outside(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("# the launch codes\n")
    ws = Workspace(tmp_path / "ws")
    (ws.root / "leak.md").symlink_to(secret)
    text = build_workspace_summary(ws, plan_file="main_plan.md", todos=TodoList(), clock=lambda: 0)
    assert "launch codes" not in text and "leak.md" not in text


def test_a_file_is_read_once_per_version(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each transition rebuilds the summary; a file not rewritten since is not read again,
    and one that was is (its purpose follows its new first line)."""
    import gr_notebook.workflow.summary as summary

    for i in range(5):
        ws.write_text(f"docs/part_{i}.md", f"# Part {i}\n")
    reads: list[str] = []
    real = summary.read_regular

    def counting(path: Path, **kwargs: object) -> bytes:
        reads.append(path.name)
        return real(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(summary, "read_regular", counting)
    first = build(ws)
    assert sorted(reads) == [f"part_{i}.md" for i in range(5)]
    reads.clear()
    assert build(ws) == first and reads == []
    ws.write_text("docs/part_2.md", "# Part two, rewritten\n")
    again = build(ws)
    assert reads == ["part_2.md"] and row_for(again, "docs/part_2.md")[1] == "Part two, rewritten"
