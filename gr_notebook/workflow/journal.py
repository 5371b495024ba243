"""The agent's long-term memory, kept as markdown a person can read and edit.

``notes.md`` holds accomplishments and working notes; ``experiences.md`` holds failed
approaches and lessons (seed 001's deferred ``experiences.md``, built here). Both are
sectioned bullet lists. Edits insert a bullet into its section and leave every other line
of the file alone, so hand-written content is never lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from gr_notebook.workflow.workspace import Workspace

__all__ = ["EXPERIENCES_FILE", "NOTES_FILE", "Journal"]

NOTES_FILE = "notes.md"
EXPERIENCES_FILE = "experiences.md"

ACCOMPLISHMENTS = "Accomplishments"
NOTES = "Notes"
FAILED = "Failed Approaches"
LESSONS = "Lessons Learned"
PATTERNS = "Patterns That Work"

_TEMPLATES = {
    NOTES_FILE: ("# Notes", (ACCOMPLISHMENTS, NOTES)),
    EXPERIENCES_FILE: ("# Experiences", (FAILED, LESSONS, PATTERNS)),
}


class Journal:
    """Reads and appends the bullet sections of ``notes.md`` and ``experiences.md``."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._parsed: dict[str, tuple[tuple[int, int, int], dict[str, list[str]]]] = {}

    def add_accomplishment(self, text: str) -> None:
        self._add(NOTES_FILE, ACCOMPLISHMENTS, text)

    def add_note(self, text: str) -> None:
        self._add(NOTES_FILE, NOTES, text)

    def add_failed_approach(self, text: str) -> None:
        self._add(EXPERIENCES_FILE, FAILED, text)

    def add_lesson(self, text: str) -> None:
        self._add(EXPERIENCES_FILE, LESSONS, text)

    def accomplishments(self) -> list[str]:
        return self.bullets(NOTES_FILE, ACCOMPLISHMENTS)

    def notes(self) -> list[str]:
        return self.bullets(NOTES_FILE, NOTES)

    def failed_approaches(self) -> list[str]:
        return self.bullets(EXPERIENCES_FILE, FAILED)

    def bullets(self, filename: str, section: str) -> list[str]:
        return list(self._sections(filename).get(section.lower(), ()))

    def _sections(self, filename: str) -> dict[str, list[str]]:
        """Every section's bullets, parsed again only when the file changes."""
        key = self._workspace.version(filename)
        if key is None:
            return {}
        cached = self._parsed.get(filename)
        if cached is not None and cached[0] == key:
            return cached[1]
        sections: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in self._workspace.read_text(filename).splitlines():
            if line.startswith("## "):
                current = sections.setdefault(line[3:].strip().lower(), [])
            elif current is not None and line.startswith("- "):
                current.append(line[2:].strip())
        self._parsed[filename] = (key, sections)
        return sections

    def _add(self, filename: str, section: str, text: str) -> None:
        bullet = "- " + " ".join(text.split())
        title, sections = _TEMPLATES[filename]
        if self._workspace.exists(filename):
            lines = self._workspace.read_text(filename).splitlines()
        else:
            lines = [title, ""]
            for name in sections:
                lines += [f"## {name}", ""]
        start, end = _section_bounds(lines, section)
        if start is None:
            if lines and lines[-1].strip():
                lines.append("")
            lines += [f"## {section}", bullet]
        else:
            insert_at = end
            while insert_at > start and not lines[insert_at - 1].strip():
                insert_at -= 1
            lines.insert(insert_at, bullet)
        self._workspace.write_text(filename, "\n".join(lines) + "\n")


def _section_bounds(lines: Sequence[str], section: str) -> tuple[int | None, int]:
    """Line range of a ``## section`` body: (first body line, one past the last)."""
    start = None
    for i, line in enumerate(lines):
        if line.startswith("## "):
            if start is not None:
                return start, i
            if line[3:].strip().lower() == section.lower():
                start = i + 1
    return start, len(lines)
