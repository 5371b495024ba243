"""Tests for the built-in tools, called as the loop calls them: check_call, then invoke."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gr_notebook.errors import ToolError
from gr_notebook.tools import (
    CORE_TOOLS,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    workspace_tools,
)
from gr_notebook.tools.workspace_tools import MAX_READ_CHARS
from gr_notebook.workflow.journal import EXPERIENCES_FILE, Journal
from gr_notebook.workflow.phases import PhaseController
from gr_notebook.workflow.prompts import BOOTSTRAP_TODOS, JOB_COMPLETION_TODOS
from gr_notebook.workflow.summary import SUMMARY_FILE
from gr_notebook.workflow.todos import TODOS_FILE, TodoItem, TodoList
from gr_notebook.workflow.workspace import Workspace

PLAN_FILE = "main_plan.md"
NOW = 1_705_329_120.0


def plan_text(*phases: tuple[str, int]) -> str:
    lines = ["# Execution Plan", ""]
    for number, (name, steps) in enumerate(phases, start=1):
        marker = " ← CURRENT" if number == 1 else ""
        lines.append(f"## Phase {number}: {name}{marker}")
        lines += [f"- [ ] {name} step {i}" for i in range(1, steps + 1)]
        lines.append("")
    return "\n".join(lines)


@dataclass
class Env:
    workspace: Workspace
    controller: PhaseController
    registry: ToolRegistry
    context: ToolContext
    events: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)

    def call(self, name: str, **params: Any) -> ToolOutput:
        tool, problem = self.registry.check_call(name, params)
        if problem is not None:
            return problem
        assert tool is not None
        return asyncio.run(self.registry.invoke(tool, self.context, params))

    def ok(self, name: str, **params: Any) -> str:
        out = self.call(name, **params)
        assert not out.is_error, out.content
        return out.content

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def finish_bootstrap(self, plan: str) -> None:
        self.ok("write_file", path=PLAN_FILE, content=plan)
        for _ in BOOTSTRAP_TODOS:
            self.ok("todo_complete")


@pytest.fixture
def env(tmp_path: Path) -> Env:
    workspace = Workspace(tmp_path / "ws")
    events: list[tuple[str, Mapping[str, Any]]] = []
    controller = PhaseController(
        workspace=workspace,
        plan_file=PLAN_FILE,
        emit=lambda event: events.append((event.kind, event.data)),
        clock=lambda: NOW,
    )
    controller.start()
    context = ToolContext(workspace=workspace, phases=controller, clock=lambda: NOW)
    return Env(workspace, controller, ToolRegistry(CORE_TOOLS), context, events)


# ── registry ─────────────────────────────────────────────────────────────────


def test_start_sets_the_seeds_bootstrap_todos(env: Env) -> None:
    todos = env.controller.todos
    assert [i.title for i in todos.items] == [
        "Generate workspace summary using generate_workspace_summary()",
        "Read workspace_summary.md",
        "Read instructions.md",
        "Create comprehensive execution plan in main_plan.md",
        "Divide plan into executable phases (5-20 steps each)",
    ]
    assert todos.kind == "bootstrap"
    assert TodoList.loads(env.workspace.read_text(TODOS_FILE)) == todos


def test_unknown_tool_is_an_error_listing_available_tools(env: Env) -> None:
    out = env.call("delete_everything")
    assert out.is_error
    assert "Unknown tool 'delete_everything'" in out.content
    for name in ("todo_complete", "todo_write", "read_file", "job_complete"):
        assert name in out.content


def test_registry_refuses_duplicate_names() -> None:
    tool = Tool("twin", "A tool.", {"type": "object"}, lambda ctx, params: "ok")
    with pytest.raises(ValueError, match="twin"):
        ToolRegistry([tool, tool])


def test_registry_lists_core_tools(env: Env) -> None:
    names = {spec.name for spec in env.registry.specs()}
    assert {"todo_write", "todo_complete", "todo_rewind", "archive_and_reset"} <= names
    assert {"read_file", "write_file", "edit_file", "list_files", "job_complete"} <= names
    assert "generate_workspace_summary" in env.registry
    assert len(env.registry) == len(CORE_TOOLS)


def test_tool_without_arguments_rejects_extra_arguments(env: Env) -> None:
    out = env.call("todo_complete", index=2)
    assert out.is_error
    assert "unexpected argument 'index'" in out.content
    assert env.controller.todos.done_count == 0


def test_handler_tool_error_becomes_is_error_result(env: Env) -> None:
    def fail(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        raise ToolError("try again with a smaller batch")

    tool = Tool("fail", "Fails.", {"type": "object"}, fail)
    out = asyncio.run(ToolRegistry.invoke(tool, env.context, {}))
    assert out == ToolOutput("Error: try again with a smaller batch", True)


def test_handler_tool_output_passes_through(env: Env) -> None:
    tool = Tool("raw", "Raw.", {"type": "object"}, lambda ctx, params: ToolOutput("x", True))
    assert asyncio.run(ToolRegistry.invoke(tool, env.context, {})) == ToolOutput("x", True)


# ── todo_write ───────────────────────────────────────────────────────────────


def test_todo_write_with_strings(env: Env) -> None:
    text = env.ok("todo_write", todos=["first", "second", "third"])
    assert [i.title for i in env.controller.todos.items] == ["first", "second", "third"]
    assert "3 tasks" in text
    assert "Current task: 1. first" in text
    assert TodoList.loads(env.workspace.read_text(TODOS_FILE)).items[0] == TodoItem("first")


def test_todo_write_with_objects(env: Env) -> None:
    text = env.ok("todo_write", todos=[{"title": "a", "done": True}, {"title": "b"}, "c"])
    assert env.controller.todos.items == (TodoItem("a", True), TodoItem("b"), TodoItem("c"))
    assert "Current task: 2. b" in text


def test_todo_write_strips_titles(env: Env) -> None:
    env.ok("todo_write", todos=["  padded  ", {"title": " obj "}])
    assert [i.title for i in env.controller.todos.items] == ["padded", "obj"]


def test_todo_write_rejects_whitespace_only_title(env: Env) -> None:
    out = env.call("todo_write", todos=["real task", "   "])
    assert out.is_error
    assert env.controller.todos.kind == "bootstrap"


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"todos": [1, 2]}, "'todos[0]'"),
        ({}, "missing required argument 'todos'"),
        ({"todos": []}, "'todos' needs at least 1"),
        ({"todos": "a, b"}, "'todos' must be an array"),
        ({"todos": [{"title": "a", "priority": 1}]}, "'todos[0]'"),
    ],
)
def test_todo_write_bad_arguments_name_the_argument(
    env: Env, params: dict[str, Any], fragment: str
) -> None:
    out = env.call("todo_write", **params)
    assert out.is_error
    assert out.content.startswith("Invalid arguments for todo_write")
    assert fragment in out.content
    assert env.controller.todos.kind == "bootstrap"


def test_todo_write_without_plan_says_to_create_it(env: Env) -> None:
    assert f"{PLAN_FILE} does not exist yet" in env.ok("todo_write", todos=["a"])


# ── todo_complete ────────────────────────────────────────────────────────────


def test_todo_complete_uses_the_seeds_wording(env: Env) -> None:
    assert env.ok("todo_complete") == (
        "Task 1 'Generate workspace summary using generate_workspace_summary()' marked "
        "complete. 4 tasks remaining."
    )
    assert env.ok("todo_complete") == (
        "Task 2 'Read workspace_summary.md' marked complete. 3 tasks remaining."
    )


def test_todo_complete_singular_remaining(env: Env) -> None:
    for _ in range(3):
        env.ok("todo_complete")
    assert env.ok("todo_complete") == (
        "Task 4 'Create comprehensive execution plan in main_plan.md' marked complete. "
        "1 task remaining."
    )


def test_todo_complete_emits_event_and_persists(env: Env) -> None:
    env.ok("todo_complete")
    (data,) = [d for k, d in env.events if k == "todo_completed"]
    assert data["index"] == 1
    assert data["remaining"] == 4
    assert TodoList.loads(env.workspace.read_text(TODOS_FILE)).done_count == 1


def test_todos_json_broken_by_hand_mid_run_is_moved_aside_not_overwritten(env: Env) -> None:
    broken = b'{"items": [\n  "half-typed title\n'
    (env.workspace.root / TODOS_FILE).write_bytes(broken)
    env.ok("todo_complete")
    assert (env.workspace.root / "todos.json.corrupt").read_bytes() == broken
    assert TodoList.loads(env.workspace.read_text(TODOS_FILE)).done_count == 1
    (error,) = [d for k, d in env.events if k == "error"]
    assert error["source"] == "todos"
    assert "todos.json" in error["message"] and "todos.json.corrupt" in error["message"]


def test_todos_json_edited_by_hand_and_still_valid_raises_no_error(env: Env) -> None:
    path = env.workspace.root / TODOS_FILE
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    env.ok("todo_complete")
    assert not (env.workspace.root / "todos.json.corrupt").exists()
    assert "error" not in env.kinds()


def test_todo_complete_after_archive_and_reset_is_an_error(env: Env) -> None:
    text = env.ok("archive_and_reset")
    assert "archive/phase_00_reset.json" in text
    out = env.call("todo_complete")
    assert out.is_error
    assert "todo_write" in out.content


def test_archive_and_reset_archives_the_list(env: Env) -> None:
    env.ok("todo_complete")
    env.ok("archive_and_reset")
    record = json.loads(env.workspace.read_text("archive/phase_00_reset.json"))
    assert record["outcome"] == "reset"
    assert record["items"][0]["done"] is True
    assert env.controller.todos.items == ()


def test_last_bootstrap_task_archives_and_starts_transition(env: Env) -> None:
    env.finish_bootstrap(plan_text(("Setup", 5), ("Build", 5)))
    assert env.workspace.exists("archive/phase_00_complete.json")
    assert env.workspace.exists(SUMMARY_FILE)
    assert env.controller.todos.items == ()
    assert env.controller.transition_pending
    assert env.controller.take_prompts()


def test_todo_write_after_bootstrap_takes_phase_from_plan(env: Env) -> None:
    env.finish_bootstrap(plan_text(("Setup", 5), ("Build", 5)))
    text = env.ok("todo_write", todos=[f"s{i}" for i in range(5)])
    todos = env.controller.todos
    assert (todos.phase_number, todos.phase_total, todos.phase_name) == (1, 2, "Setup")
    assert "Phase: Setup (1 of 2)" in text
    assert not env.controller.transition_pending


def test_todo_complete_when_final_list_is_done_points_to_job_complete(env: Env) -> None:
    env.finish_bootstrap(plan_text(("Only", 5)))
    env.ok("todo_write", todos=[f"s{i}" for i in range(5)])
    for _ in range(5):
        env.ok("todo_complete")
    assert env.controller.todos.kind == "job_completion"
    assert [i.title for i in env.controller.todos.items] == list(JOB_COMPLETION_TODOS)
    for _ in JOB_COMPLETION_TODOS:
        env.ok("todo_complete")
    out = env.call("todo_complete")
    assert out.is_error
    assert "job_complete" in out.content


# ── todo_rewind ──────────────────────────────────────────────────────────────


def test_todo_rewind_records_issue_and_archives_as_rewound(env: Env) -> None:
    env.finish_bootstrap(plan_text(("Setup", 5), ("Build", 5)))
    env.ok("todo_write", todos=[f"s{i}" for i in range(5)])
    env.ok("todo_complete")
    issue = "Step 2 is impossible because the API has no batch mode. Try sequential calls."
    text = env.ok("todo_rewind", issue=issue)
    assert "archive/phase_01_rewound.json" in text
    record = json.loads(env.workspace.read_text("archive/phase_01_rewound.json"))
    assert record["outcome"] == "rewound"
    assert record["note"] == issue
    failed = Journal(env.workspace).failed_approaches()
    assert len(failed) == 1
    assert issue in failed[0]
    assert "## Failed Approaches" in env.workspace.read_text(EXPERIENCES_FILE)
    assert "rewind" in env.kinds()
    assert env.controller.todos.items == ()


def test_todo_rewind_during_bootstrap_archives_phase_zero(env: Env) -> None:
    env.ok("todo_rewind", issue="wrong approach")
    assert env.workspace.exists("archive/phase_00_rewound.json")
    assert Journal(env.workspace).failed_approaches()[0].endswith("wrong approach")


def test_todo_rewind_requires_an_issue(env: Env) -> None:
    assert env.call("todo_rewind").is_error
    assert env.call("todo_rewind", issue="").is_error
    out = env.call("todo_rewind", issue="   ")
    assert out.is_error
    assert not env.workspace.exists(EXPERIENCES_FILE)


# ── job_complete ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("confidence", "fragment"),
    [(1.5, "at most 1, got 1.5"), (-0.1, "at least 0, got -0.1"), (True, "must be a number")],
)
def test_job_complete_rejects_out_of_range_confidence(
    env: Env, confidence: Any, fragment: str
) -> None:
    out = env.call("job_complete", summary="done", confidence=confidence)
    assert out.is_error
    assert "'confidence'" in out.content and fragment in out.content
    assert env.controller.job is None


def test_job_complete_with_escaping_deliverable_is_an_error(env: Env) -> None:
    out = env.call("job_complete", summary="done", confidence=0.9, deliverables=["../x"])
    assert out.is_error
    assert "'../x'" in out.content
    assert env.controller.job is None


def test_job_complete_records_result_and_missing_deliverables(env: Env) -> None:
    env.ok("write_file", path="output/requirements.json", content="[]")
    text = env.ok(
        "job_complete",
        summary="Extracted 47 requirements",
        deliverables=["output/requirements.json", "output/summary.md"],
        confidence=0.92,
        notes="3 flagged for review",
    )
    assert text == "Job complete (confidence 0.92). Missing deliverables: output/summary.md."
    job = env.controller.job
    assert job is not None
    assert job.deliverables == ("output/requirements.json", "output/summary.md")
    assert (job.confidence, job.notes) == (0.92, "3 flagged for review")
    assert "job_complete" in env.kinds()


# ── file tools ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "a/../../x"])
def test_read_file_outside_workspace_is_an_error_result(env: Env, path: str) -> None:
    out = env.call("read_file", path=path)
    assert out.is_error
    assert out.content.startswith("Error:")
    assert "root:" not in out.content


def test_read_missing_file_is_an_error_mentioning_list_files(env: Env) -> None:
    out = env.call("read_file", path="instructions.md")
    assert out.is_error
    assert "list_files" in out.content


def test_write_then_read_file(env: Env) -> None:
    assert env.ok("write_file", path="out/a.md", content="hello") == (
        "Created out/a.md (5 characters)."
    )
    assert env.ok("write_file", path="out/a.md", content="bye") == (
        "Overwrote out/a.md (3 characters)."
    )
    assert env.ok("read_file", path="out/a.md") == "bye"


def test_write_file_outside_workspace_is_an_error(env: Env, tmp_path: Path) -> None:
    assert env.call("write_file", path="../evil.md", content="x").is_error
    assert not (tmp_path / "evil.md").exists()


def test_read_file_truncates_long_files(env: Env) -> None:
    env.workspace.write_text("big.txt", "x" * (MAX_READ_CHARS + 10))
    text = env.ok("read_file", path="big.txt")
    assert text.startswith("x" * MAX_READ_CHARS + "\n[truncated:")
    assert f"{MAX_READ_CHARS + 10} characters" in text


def test_edit_file_replaces_one_occurrence(env: Env) -> None:
    env.workspace.write_text("f.md", "alpha beta gamma")
    assert env.ok("edit_file", path="f.md", old_text="beta", new_text="BETA") == (
        "Edited f.md: replaced 1 occurrence."
    )
    assert env.workspace.read_text("f.md") == "alpha BETA gamma"


def test_edit_file_text_not_found_is_an_error(env: Env) -> None:
    env.workspace.write_text("f.md", "alpha")
    out = env.call("edit_file", path="f.md", old_text="omega", new_text="x")
    assert out.is_error
    assert "not found" in out.content
    assert env.workspace.read_text("f.md") == "alpha"


def test_edit_file_text_found_twice_is_an_error(env: Env) -> None:
    env.workspace.write_text("f.md", "ab ab")
    out = env.call("edit_file", path="f.md", old_text="ab", new_text="x")
    assert out.is_error
    assert "2 times" in out.content
    assert env.workspace.read_text("f.md") == "ab ab"


def test_writing_plan_with_small_phase_returns_warnings(env: Env) -> None:
    text = env.ok("write_file", path=PLAN_FILE, content=plan_text(("Tiny", 3), ("Fine", 5)))
    assert "Plan warnings" in text
    assert "Phase 1 'Tiny' has 3 step(s)" in text
    assert "'Fine'" not in text
    (data,) = [d for k, d in env.events if k == "plan_updated"]
    assert data["phases"] == 2
    assert len(data["warnings"]) == 1


def test_writing_good_plan_reports_phase_count(env: Env) -> None:
    text = env.ok("write_file", path=PLAN_FILE, content=plan_text(("A", 5), ("B", 6)))
    assert text.endswith("The plan has 2 phases.")
    assert "warnings" not in text


def test_editing_plan_into_a_small_phase_returns_warnings(env: Env) -> None:
    env.ok("write_file", path=PLAN_FILE, content=plan_text(("A", 5)))
    text = env.ok("edit_file", path=PLAN_FILE, old_text="- [ ] A step 5\n", new_text="")
    assert "Phase 1 'A' has 4 step(s)" in text


def test_writing_other_files_does_not_parse_a_plan(env: Env) -> None:
    env.ok("write_file", path="notes/plan_ideas.md", content="## Phase 1: X\n")
    assert "plan_updated" not in env.kinds()


def test_list_files_lists_written_files(env: Env) -> None:
    env.ok("write_file", path="a.txt", content="12345")
    env.ok("write_file", path="sub/b.md", content="x")
    listing = env.ok("list_files").splitlines()
    assert "a.txt  (5 bytes)" in listing
    assert "sub/b.md  (1 bytes)" in listing
    assert any(line.startswith(f"{TODOS_FILE}  (") for line in listing)


def test_list_files_of_a_subdirectory(env: Env) -> None:
    env.ok("write_file", path="sub/b.md", content="x")
    env.ok("write_file", path="c.md", content="x")
    assert env.ok("list_files", path="sub") == "sub/b.md  (1 bytes)"


def test_list_files_of_missing_directory_is_an_error(env: Env) -> None:
    assert env.call("list_files", path="nope").is_error


@pytest.mark.usefixtures("fails_if_it_hangs")
def test_file_tools_refuse_or_skip_a_fifo_and_a_socket(special_files: Path, env: Env) -> None:
    for name, kind in (("pipe", "FIFO"), ("sock", "socket")):
        out = env.call("read_file", path=name)
        assert out.is_error and f"is a {kind}, not a regular file" in out.content
        assert env.call("edit_file", path=name, old_text="a", new_text="b").is_error
    assert env.ok("search", pattern="hello|pipe") == "1 file match:\nnotes.txt:1: hello pipe"
    listing = env.ok("list_files").splitlines()
    assert "notes.txt  (11 bytes)" in listing
    assert "pipe  (FIFO: not a regular file, so it cannot be read)" in listing
    assert "sock  (socket: not a regular file, so it cannot be read)" in listing


@pytest.mark.usefixtures("fails_if_it_hangs")
def test_summary_labels_a_fifo_and_a_socket_without_opening_them(
    special_files: Path, env: Env
) -> None:
    env.ok("generate_workspace_summary")
    summary = env.workspace.read_text(SUMMARY_FILE)
    assert "| pipe | FIFO (not a regular file; not read) |" in summary
    assert "| sock | Socket (not a regular file; not read) |" in summary
    assert "| notes.txt | hello pipe |" in summary


@pytest.mark.usefixtures("fails_if_it_hangs")
def test_catastrophic_search_patterns_are_bounded_in_time(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace_tools, "SEARCH_TIMEOUT_S", 0.3)
    env.ok("write_file", path="a.txt", content="a" * 40 + "\n")
    assert env.ok("search", pattern="(a+)+b", path="a.txt").startswith("No lines under a.txt")
    out = env.call("search", pattern="(a|aa)+b", path="a.txt")
    assert out.is_error
    assert "took longer than 0.3 s" in out.content
    assert "nested repetition" in out.content and "plain word" in out.content


def test_non_utf8_file_names_are_listed_escaped_and_rewind_goes_on(env: Env) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # 'caf\udce9.txt': not encodable as UTF-8
    (env.workspace.root / name).write_text("menu\n", encoding="utf-8")
    assert "caf\\xe9.txt  (5 bytes)" in env.ok("list_files").splitlines()
    assert env.ok("search", pattern="menu") == "1 file match:\ncaf\\xe9.txt:1: menu"
    env.ok("todo_rewind", issue="the menu file is odd")
    assert "| caf\\xe9.txt | menu |" in env.workspace.read_text(SUMMARY_FILE)
    assert "error" not in env.kinds()


# ── workspace memory tools ───────────────────────────────────────────────────


def test_generate_workspace_summary_writes_the_file(env: Env) -> None:
    text = env.ok("generate_workspace_summary")
    assert text.startswith(f"Wrote {SUMMARY_FILE}")
    summary = env.workspace.read_text(SUMMARY_FILE)
    assert summary.startswith("# Workspace Summary\n")
    assert "| todos.json | Active todo list |" in summary
    assert "workspace_summary" in env.kinds()


def test_add_accomplishment_and_note_tools_feed_the_summary(env: Env) -> None:
    env.ok("add_accomplishment", text="Processed 47 pages")
    env.ok("add_note", text="Section 4 uses odd formatting")
    journal = Journal(env.workspace)
    assert journal.accomplishments() == ["Processed 47 pages"]
    assert journal.notes() == ["Section 4 uses odd formatting"]
    env.ok("generate_workspace_summary")
    summary = env.workspace.read_text(SUMMARY_FILE)
    assert "- Processed 47 pages" in summary
    assert "- Section 4 uses odd formatting" in summary


def test_add_note_rejects_empty_text(env: Env) -> None:
    out = env.call("add_note", text="")
    assert out.is_error
    assert "'text' must not be empty" in out.content
