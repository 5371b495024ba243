"""The docs hold together: every relative link leads to a file (and a heading) that exists, the
README points to every notebook and every docs page, and the decisions' contents list matches
their files (decision 413)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DECISIONS = DOCS / "decisions"
README = ROOT / "README.md"

LINK = re.compile(r"\]\(([^)\s]+)\)")  # the target of [text](target); text may span lines
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
RECORD = re.compile(r"^### (\d+)\. ", re.M)
ENTRY = re.compile(r"^\d+\. \[([^\]]+)\]\(([^)]+\.md)\):(.*?)(?=^\d+\. \[|\Z)", re.S | re.M)


def pages() -> list[Path]:
    """The README, the notebooks' README and every page under docs/."""
    return [README, ROOT / "notebooks" / "README.md", *sorted(DOCS.rglob("*.md"))]


def prose(page: Path) -> str:
    """The page without its code blocks: a link inside code is an example, not a link."""
    return FENCE.sub("", page.read_text())


def anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation gone, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_in_the_project(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        if ROOT not in goal.parents or not goal.exists():
            broken.append(f"{target}: no such file in the project")
        elif fragment and goal.suffix == ".md":
            ids = {anchor(h) for h in HEADING.findall(prose(goal))}
            if fragment not in ids:
                broken.append(f"{target}: no heading #{fragment} in {goal.name}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_docs_stand_alone() -> None:
    """No page links outside the project or names the design documents' folder."""
    leaks = [
        str(page.relative_to(ROOT))
        for page in pages()
        if "../shared" in page.read_text() or "shared/" in page.read_text()
    ]
    assert not leaks


def test_the_readme_lists_every_notebook_and_every_page() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
    notebooks = set((ROOT / "notebooks").glob("*.ipynb"))
    docs = set(DOCS.glob("*.md")) | {DECISIONS / "README.md"}
    assert not notebooks - linked, "README.md does not link " + str(sorted(notebooks - linked))
    assert not docs - linked, "README.md does not link " + str(sorted(docs - linked))


def test_the_readme_stays_a_guide() -> None:
    """The first five minutes: a capability's details go to its page under docs/."""
    lines = len(README.read_text().splitlines())
    assert lines <= 200, f"README.md has {lines} lines; give the new material a page in docs/"


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
