"""The decisions' contents list matches their files (decision 413)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DECISIONS = DOCS / "decisions"

RECORD = re.compile(r"^### (\d+)\. ", re.M)
ENTRY = re.compile(r"^\d+\. \[([^\]]+)\]\(([^)]+\.md)\):(.*?)(?=^\d+\. \[|\Z)", re.S | re.M)


def contents() -> dict[str, list[int]]:
    """The decisions' contents list: each topic file and the numbers it lists, in order."""
    text = (DECISIONS / "README.md").read_text()
    listed = text.split("\n## Contents\n", 1)[1]
    entries = ENTRY.findall(listed)
    assert entries, "the contents list of docs/decisions/README.md is empty or unreadable"
    files = [name for _, name, _ in entries]
    assert len(files) == len(set(files)), "a file is listed twice"
    return {name: [int(n) for n in re.findall(r"\d+", numbers)] for _, name, numbers in entries}


def test_every_topic_file_is_listed_and_starts_with_its_topic() -> None:
    listed = contents()
    on_disk = {p.name for p in DECISIONS.glob("*.md")} - {"README.md"}
    assert set(listed) == on_disk
    text = (DECISIONS / "README.md").read_text()
    for title, name, _ in ENTRY.findall(text.split("\n## Contents\n", 1)[1]):
        first = (DECISIONS / name).read_text().splitlines()[0]
        assert first == f"# {' '.join(title.split())}", name


def test_the_contents_list_matches_the_records_of_each_file() -> None:
    for name, numbers in contents().items():
        headings = [int(n) for n in RECORD.findall((DECISIONS / name).read_text())]
        assert numbers == headings, (
            f"{name}: the contents list {numbers}, the file holds {headings}; "
            "list each record once, in the file's order"
        )


def test_no_decision_number_is_in_two_places() -> None:
    seen: dict[int, str] = {}
    for name, numbers in contents().items():
        for number in numbers:
            assert number not in seen, f"decision {number} is in {seen[number]} and {name}"
            seen[number] = name


def test_the_next_free_number_is_free() -> None:
    """The preamble's "next free number" is past every record (and the ranges given out)."""
    text = (DECISIONS / "README.md").read_text()
    found = re.search(r"next free number, (\d+) onward", text)
    assert found, "docs/decisions/README.md no longer says which number is next"
    used = [n for numbers in contents().values() for n in numbers]
    assert int(found.group(1)) > max(used)
