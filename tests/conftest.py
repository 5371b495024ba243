"""Shared fixtures: agents that keep everything (workspace, store) inside tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr

PLAN_TWO_PHASES = """\
# Execution Plan

## Overview
Two phases of five steps.

## Phase 1: Gather ← CURRENT
- [ ] Gather a
- [ ] Gather b
- [ ] Gather c
- [ ] Gather d
- [ ] Gather e

## Phase 2: Write
- [ ] Write a
- [ ] Write b
- [ ] Write c
- [ ] Write d
- [ ] Write e
"""

PHASE_1 = ["Gather a", "Gather b", "Gather c", "Gather d", "Gather e"]
PHASE_2 = ["Write a", "Write b", "Write c", "Write d", "Write e"]


def bootstrap_script(plan: str = PLAN_TWO_PHASES) -> list[gr.ModelResponse]:
    """The five bootstrap tasks, done the way the seed describes, ending in a transition."""
    return [
        gr.tool_call("generate_workspace_summary"),
        gr.tool_call("todo_complete"),
        gr.tool_call("read_file", path="workspace_summary.md"),
        gr.tool_call("todo_complete"),
        gr.tool_call("read_file", path="instructions.md"),
        gr.tool_call("todo_complete"),
        gr.tool_call("write_file", path="main_plan.md", content=plan),
        gr.tool_call("todo_complete"),
        gr.tool_call("todo_complete"),
    ]


def complete_all(n: int) -> list[gr.ModelResponse]:
    return [gr.tool_call("todo_complete") for _ in range(n)]


@pytest.fixture
def make_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., gr.Agent]:
    monkeypatch.chdir(tmp_path)  # default workspaces and stores land in tmp_path/gr_runs

    def factory(model: Any = None, **kwargs: Any) -> gr.Agent:
        kwargs.setdefault("workspace", tmp_path / "ws")
        kwargs.setdefault("store", tmp_path / "store.sqlite")
        kwargs.setdefault("max_iterations", 200)
        return gr.Agent(model=model, **kwargs)

    return factory
