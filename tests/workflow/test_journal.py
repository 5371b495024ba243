"""Tests for the Journal: notes.md and experiences.md as sectioned bullet lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from gr_notebook.workflow.journal import EXPERIENCES_FILE, NOTES_FILE, Journal
from gr_notebook.workflow.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def journal(ws: Workspace) -> Journal:
    return Journal(ws)


def test_add_accomplishment_creates_notes_file_with_sections(
    ws: Workspace, journal: Journal
) -> None:
    journal.add_accomplishment("Completed document analysis (47 pages processed)")
    text = ws.read_text(NOTES_FILE)
    assert text.endswith("\n")
    assert text.rstrip("\n") == (
        "# Notes\n"
        "\n"
        "## Accomplishments\n"
        "- Completed document analysis (47 pages processed)\n"
        "\n"
        "## Notes"
    )


def test_add_note_goes_under_notes_section(ws: Workspace, journal: Journal) -> None:
    journal.add_note("Document uses non-standard formatting in section 4")
    lines = ws.read_text(NOTES_FILE).splitlines()
    notes_at = lines.index("## Notes")
    assert lines.index("## Accomplishments") < notes_at
    assert lines[notes_at + 1] == "- Document uses non-standard formatting in section 4"


def test_add_failed_approach_creates_experiences_in_seed_layout(
    ws: Workspace, journal: Journal
) -> None:
    journal.add_failed_approach("Tried batch API processing - doesn't support >100 items")
    text = ws.read_text(EXPERIENCES_FILE)
    assert text.rstrip("\n") == (
        "# Experiences\n"
        "\n"
        "## Failed Approaches\n"
        "- Tried batch API processing - doesn't support >100 items\n"
        "\n"
        "## Lessons Learned\n"
        "\n"
        "## Patterns That Work"
    )


def test_add_lesson_goes_under_lessons_learned(ws: Workspace, journal: Journal) -> None:
    journal.add_failed_approach("f")
    journal.add_lesson("Always check API limits before batch operations")
    lines = ws.read_text(EXPERIENCES_FILE).splitlines()
    at = lines.index("## Lessons Learned")
    assert lines[at + 1] == "- Always check API limits before batch operations"
    assert lines.index("## Failed Approaches") + 1 == lines.index("- f")


def test_entries_append_in_order_within_a_section(journal: Journal) -> None:
    journal.add_accomplishment("first")
    journal.add_note("a note")
    journal.add_accomplishment("second")
    journal.add_accomplishment("third")
    assert journal.accomplishments() == ["first", "second", "third"]
    assert journal.notes() == ["a note"]


def test_failed_approaches_read_back(journal: Journal) -> None:
    journal.add_failed_approach("one")
    journal.add_failed_approach("two")
    assert journal.failed_approaches() == ["one", "two"]
    assert journal.bullets(EXPERIENCES_FILE, "Lessons Learned") == []


def test_bullets_of_missing_file_or_section_is_empty(ws: Workspace, journal: Journal) -> None:
    assert journal.accomplishments() == []
    ws.write_text(NOTES_FILE, "# Notes\n\nno sections here\n")
    assert journal.notes() == []


def test_bullets_section_match_is_case_insensitive(ws: Workspace, journal: Journal) -> None:
    ws.write_text(NOTES_FILE, "## accomplishments\n- done it\n")
    assert journal.accomplishments() == ["done it"]


def test_multiline_text_becomes_one_bullet(ws: Workspace, journal: Journal) -> None:
    journal.add_note("line one\n## Accomplishments\n- fake")
    assert journal.notes() == ["line one ## Accomplishments - fake"]
    assert journal.accomplishments() == []
    headings = [line for line in ws.read_text(NOTES_FILE).splitlines() if line.startswith("#")]
    assert headings == ["# Notes", "## Accomplishments", "## Notes"]


def test_adding_preserves_hand_written_lines_and_other_sections(
    ws: Workspace, journal: Journal
) -> None:
    original = (
        "# Notes\n"
        "\n"
        "Written by a person; keep this.\n"
        "\n"
        "## Accomplishments\n"
        "- existing accomplishment\n"
        "  continuation of it\n"
        "\n"
        "## My Own Section\n"
        "Some prose.\n"
        "- a bullet that is not a note\n"
        "\n"
        "## Notes\n"
        "- existing note\n"
    )
    ws.write_text(NOTES_FILE, original)
    journal.add_accomplishment("new accomplishment")
    journal.add_note("new note")
    assert ws.read_text(NOTES_FILE) == (
        "# Notes\n"
        "\n"
        "Written by a person; keep this.\n"
        "\n"
        "## Accomplishments\n"
        "- existing accomplishment\n"
        "  continuation of it\n"
        "- new accomplishment\n"
        "\n"
        "## My Own Section\n"
        "Some prose.\n"
        "- a bullet that is not a note\n"
        "\n"
        "## Notes\n"
        "- existing note\n"
        "- new note\n"
    )
    assert journal.accomplishments() == ["existing accomplishment", "new accomplishment"]
    assert journal.notes() == ["existing note", "new note"]


def test_missing_section_is_appended_without_touching_the_rest(
    ws: Workspace, journal: Journal
) -> None:
    ws.write_text(EXPERIENCES_FILE, "# Experiences\n\n## Patterns That Work\n- small chunks\n")
    journal.add_failed_approach("regex missed nested structures")
    assert ws.read_text(EXPERIENCES_FILE) == (
        "# Experiences\n"
        "\n"
        "## Patterns That Work\n"
        "- small chunks\n"
        "\n"
        "## Failed Approaches\n"
        "- regex missed nested structures\n"
    )
    assert journal.failed_approaches() == ["regex missed nested structures"]


def test_notes_and_experiences_are_separate_files(ws: Workspace, journal: Journal) -> None:
    journal.add_note("n")
    assert ws.exists(NOTES_FILE)
    assert not ws.exists(EXPERIENCES_FILE)
    journal.add_failed_approach("f")
    assert journal.notes() == ["n"]
    assert journal.failed_approaches() == ["f"]
