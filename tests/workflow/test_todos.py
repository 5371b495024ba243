"""Tests for the tactical todo list: the Layer-2 display, completion, JSON and the board."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gr_notebook.errors import TodoError
from gr_notebook.workflow.todos import TODOS_FILE, TodoBoard, TodoItem, TodoList
from gr_notebook.workflow.workspace import Workspace

# Copied verbatim from seed 001, "### Todo List Display".
SEED_DISPLAY = """\
═══════════════════════════════════════════════════════════════════
                         ACTIVE TODO LIST
═══════════════════════════════════════════════════════════════════

Phase: Requirement Extraction (2 of 4)

[x] 1. Process section 1-3
[x] 2. Process section 4-6
[ ] 3. Consolidate findings      ← CURRENT
[ ] 4. Write extraction_results.md
[ ] 5. Validate format

Progress: 2/5 tasks complete

───────────────────────────────────────────────────────────────────
INSTRUCTION: Complete task 3, then call todo_complete()
═══════════════════════════════════════════════════════════════════"""

SEED_ITEMS = (
    TodoItem("Process section 1-3", True),
    TodoItem("Process section 4-6", True),
    TodoItem("Consolidate findings"),
    TodoItem("Write extraction_results.md"),
    TodoItem("Validate format"),
)

# A message "says what to do" when it names a tool call to make next.
ACTIONABLE = re.compile(r"\b(todo_write|job_complete|archive_and_reset|todo_rewind)\(")


def seed_list() -> TodoList:
    return TodoList(
        items=SEED_ITEMS, phase_number=2, phase_total=4, phase_name="Requirement Extraction"
    )


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


# ── the Layer-2 display ──────────────────────────────────────────────────────


def test_render_reproduces_seed_display_exactly() -> None:
    assert seed_list().render() == SEED_DISPLAY


def test_str_is_render() -> None:
    assert str(seed_list()) == SEED_DISPLAY


def test_render_marks_first_task_current_when_none_done() -> None:
    todos = TodoList.of(["a", "b"], phase_number=1, phase_total=3, phase_name="Setup")
    lines = todos.render().splitlines()
    assert "[ ] 1. a      ← CURRENT" in lines
    assert "[ ] 2. b" in lines
    assert "Phase: Setup (1 of 3)" in lines
    assert "INSTRUCTION: Complete task 1, then call todo_complete()" in lines


def test_render_all_done_has_no_current_marker() -> None:
    todos = TodoList.of([TodoItem("a", True)], phase_number=1, phase_total=1, phase_name="X")
    text = todos.render()
    assert "← CURRENT" not in text
    assert "Progress: 1/1 tasks complete" in text
    assert "INSTRUCTION: All tasks complete." in text


def test_render_empty_list_asks_for_todo_write() -> None:
    text = TodoList().render()
    assert "(no tasks)" in text
    assert "Progress: 0/0 tasks complete" in text
    assert "INSTRUCTION: Write the todo list with todo_write(todos=[...])" in text


def test_render_uses_instruction_override() -> None:
    todos = TodoList(instruction="Follow the transition prompt")
    assert "INSTRUCTION: Follow the transition prompt" in todos.render().splitlines()


def test_bootstrap_label_has_no_phase_numbers() -> None:
    todos = TodoList.of(["a"], kind="bootstrap", phase_number=1, phase_total=3)
    assert todos.phase_label() == "Bootstrap"


def test_phase_label_omits_numbers_outside_range() -> None:
    assert TodoList.of(["a"], phase_name="X", phase_number=5, phase_total=4).phase_label() == "X"
    assert TodoList.of(["a"], phase_name="X").phase_label() == "X"
    assert TodoList.of(["a"]).phase_label() == "Unnamed phase"


def test_repr_html_escapes_titles() -> None:
    html = TodoList.of(["<b>bold</b>"])._repr_html_()
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "<b>bold" not in html


# ── counts and completion ────────────────────────────────────────────────────


def test_counts_for_seed_list() -> None:
    todos = seed_list()
    assert (todos.done_count, todos.remaining, todos.current_index) == (2, 3, 2)
    assert todos.current == TodoItem("Consolidate findings")
    assert not todos.is_finished


def test_complete_next_marks_first_incomplete_and_returns_number() -> None:
    todos, number = seed_list().complete_next()
    assert number == 3
    assert todos.items[2] == TodoItem("Consolidate findings", True)
    assert todos.done_count == 3
    assert todos.phase_name == "Requirement Extraction"


def test_complete_next_does_not_mutate_original() -> None:
    original = seed_list()
    original.complete_next()
    assert original.done_count == 2


def test_complete_next_skips_done_items_out_of_order() -> None:
    todos = TodoList.of([TodoItem("a"), TodoItem("b", True), TodoItem("c")])
    todos, first = todos.complete_next()
    todos, second = todos.complete_next()
    assert (first, second) == (1, 3)
    assert todos.is_finished


def test_complete_next_on_empty_list_raises_with_instruction() -> None:
    with pytest.raises(TodoError, match="empty") as info:
        TodoList().complete_next()
    assert ACTIONABLE.search(str(info.value))


def test_complete_next_on_all_done_raises_with_instruction() -> None:
    todos = TodoList.of([TodoItem("a", True), TodoItem("b", True)])
    with pytest.raises(TodoError, match="already complete") as info:
        todos.complete_next()
    assert ACTIONABLE.search(str(info.value)), str(info.value)


def test_empty_list_is_not_finished() -> None:
    assert not TodoList().is_finished


# ── JSON ─────────────────────────────────────────────────────────────────────


def test_json_round_trip() -> None:
    todos = TodoList.of(
        [TodoItem("a", True), TodoItem("b")],
        phase_number=3,
        phase_total=5,
        phase_name="Build ✓",
        kind="job_completion",
    )
    assert TodoList.loads(json.dumps(todos.to_json())) == todos


def test_to_json_shape() -> None:
    data = TodoList.of(["a"], phase_number=1, phase_total=2, phase_name="P").to_json()
    assert data == {
        "version": 1,
        "kind": "phase",
        "phase": {"number": 1, "total": 2, "name": "P"},
        "items": [{"title": "a", "done": False}],
    }


def test_from_json_accepts_string_items_and_defaults() -> None:
    todos = TodoList.from_json({"items": ["a", {"title": "b", "done": True}]})
    assert todos.items == (TodoItem("a"), TodoItem("b", True))
    assert (todos.kind, todos.phase_number, todos.phase_total, todos.phase_name) == (
        "phase",
        0,
        0,
        "",
    )


def test_loads_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(TodoError, match=r"line 2, column \d+") as info:
        TodoList.loads('{"items": [\n  oops]}')
    assert "todos.json" in str(info.value)


def test_loads_names_the_given_source() -> None:
    with pytest.raises(TodoError, match=r"archive/x\.json"):
        TodoList.loads("{", source="archive/x.json")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "expected a JSON object"),
        ({"items": "a, b"}, "'items' must be a list"),
        ({}, "'items' must be a list"),
        ({"items": [{"done": True}]}, r"items\[0\] needs a string 'title'"),
        ({"items": ["a", {"title": 3}]}, r"items\[1\] needs a string 'title'"),
        ({"items": [], "kind": "bogus"}, "'kind' one of"),
        ({"items": [], "phase": [1, 2]}, "'phase' must be an object"),
        ({"items": [], "phase": {"number": "two"}}, "must be integers"),
    ],
)
def test_from_json_wrong_shapes_raise(data: object, fragment: str) -> None:
    with pytest.raises(TodoError, match=fragment):
        TodoList.from_json(data)


# ── the board ────────────────────────────────────────────────────────────────


def test_board_set_writes_todos_json(ws: Workspace) -> None:
    board = TodoBoard(ws)
    board.set(seed_list())
    assert board.list == seed_list()
    assert TodoList.loads(ws.read_text(TODOS_FILE)) == seed_list()


def test_load_existing_without_file(ws: Workspace) -> None:
    assert TodoBoard(ws).load_existing() == (None, None)


def test_load_existing_reads_valid_file(ws: Workspace) -> None:
    TodoBoard(ws).set(seed_list())
    loaded, problem = TodoBoard(ws).load_existing()
    assert problem is None
    assert loaded == seed_list()


def test_load_existing_moves_corrupt_file_aside(ws: Workspace) -> None:
    raw = b'{"items": [\n  "a",, ]}\n'
    (ws.root / TODOS_FILE).write_bytes(raw)
    loaded, problem = TodoBoard(ws).load_existing()
    assert loaded is None
    assert problem is not None
    assert "not valid JSON" in problem
    assert "todos.json.corrupt" in problem
    assert not (ws.root / TODOS_FILE).exists()
    assert (ws.root / "todos.json.corrupt").read_bytes() == raw


def test_load_existing_moves_non_utf8_file_aside(ws: Workspace) -> None:
    raw = b"\xff\xfe garbage"
    (ws.root / TODOS_FILE).write_bytes(raw)
    loaded, problem = TodoBoard(ws).load_existing()
    assert loaded is None and problem
    assert (ws.root / "todos.json.corrupt").read_bytes() == raw


def test_load_existing_moves_wrong_shape_aside(ws: Workspace) -> None:
    (ws.root / TODOS_FILE).write_text('{"items": 5}', encoding="utf-8")
    loaded, problem = TodoBoard(ws).load_existing()
    assert loaded is None
    assert problem is not None and "'items' must be a list" in problem
    assert (ws.root / "todos.json.corrupt").read_text(encoding="utf-8") == '{"items": 5}'


def test_load_existing_never_overwrites_an_earlier_corrupt_file(ws: Workspace) -> None:
    (ws.root / "todos.json.corrupt").write_text("first", encoding="utf-8")
    (ws.root / TODOS_FILE).write_text("second", encoding="utf-8")
    _, problem = TodoBoard(ws).load_existing()
    assert problem is not None and "todos.json.corrupt.2" in problem
    assert (ws.root / "todos.json.corrupt").read_text(encoding="utf-8") == "first"
    assert (ws.root / "todos.json.corrupt.2").read_text(encoding="utf-8") == "second"


def test_archive_names_carry_phase_and_outcome(ws: Workspace) -> None:
    board = TodoBoard(ws)
    board.set(seed_list())
    assert board.archive("rewound", note="API has no batch mode") == "archive/phase_02_rewound.json"
    record = json.loads(ws.read_text("archive/phase_02_rewound.json"))
    assert record["note"] == "API has no batch mode"
    assert record["outcome"] == "rewound"
    assert record["items"][0] == {"title": "Process section 1-3", "done": True}
    assert record["phase"] == {"number": 2, "total": 4, "name": "Requirement Extraction"}


def test_repeated_archives_get_numbered_suffix(ws: Workspace) -> None:
    board = TodoBoard(ws)
    names = []
    for note in ("one", "two", "three"):
        board.set(seed_list())
        names.append(board.archive("rewound", note=note))
    assert names == [
        "archive/phase_02_rewound.json",
        "archive/phase_02_rewound_2.json",
        "archive/phase_02_rewound_3.json",
    ]
    assert json.loads(ws.read_text(names[1]))["note"] == "two"
    assert json.loads(ws.read_text(names[0]))["note"] == "one"


def test_archive_clears_list_but_keeps_phase_position(ws: Workspace) -> None:
    board = TodoBoard(ws)
    board.set(seed_list())
    board.archive("complete")
    assert board.list.items == ()
    assert (board.list.phase_number, board.list.phase_total) == (2, 4)
    assert TodoList.loads(ws.read_text(TODOS_FILE)).items == ()


def test_archive_of_empty_list_writes_nothing(ws: Workspace) -> None:
    board = TodoBoard(ws)
    assert board.archive("complete") is None
    assert not ws.exists("archive")


def test_each_archived_list_gets_its_own_file(ws: Workspace) -> None:
    board = TodoBoard(ws)
    board.set(TodoList.of(["a"], phase_number=1))
    board.archive("complete")
    board.set(TodoList.of(["b"], phase_number=2))
    board.archive("reset")
    assert [ws.relative(p) for p in ws.files("archive")] == [
        "archive/phase_01_complete.json",
        "archive/phase_02_reset.json",
    ]


@pytest.mark.parametrize(
    "raw",
    [
        "1e400",
        '{"items": [], "phase": {"number": 1e400, "total": 1}}',
        "9" * 5000,
        '{"items": [], "phase": {"number": ' + "9" * 5000 + "}}",
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["inf", "inf-phase-number", "5000-digits", "5000-digit-phase-number", "deep-nesting"],
)
def test_load_existing_moves_hostile_json_aside(ws: Workspace, raw: str) -> None:
    (ws.root / TODOS_FILE).write_text(raw, encoding="utf-8")
    loaded, problem = TodoBoard(ws).load_existing()
    assert loaded is None
    assert problem is not None and "todos.json.corrupt" in problem
    assert len(problem) < 400
    assert (ws.root / "todos.json.corrupt").read_text(encoding="utf-8") == raw
