"""A small coding environment: ``run_tests`` and ``start_over``, for coding jobs that seed
004's interventions watch.

The tests are declarative (a file must contain certain text), so they run at once,
need no interpreter in the workspace, and report a pass count the way a real test runner
does: ``"2 passed, 3 failed"``. That pass count is the default progress signal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gr_notebook.errors import ConfigError, WorkspaceError
from gr_notebook.tools.base import Tool, ToolContext, object_schema
from gr_notebook.tools.toolset import Toolset

__all__ = ["CodeTest", "CodingTask", "coding_tools"]


@dataclass(frozen=True, slots=True)
class CodeTest:
    """Passes when ``path`` exists and contains every one of ``must_contain``."""

    name: str
    path: str
    must_contain: tuple[str, ...]

    def __post_init__(self) -> None:
        value: object = self.must_contain
        if isinstance(value, str):
            raise ConfigError("must_contain is a tuple of strings; wrap a single one: ('x',)")
        object.__setattr__(self, "must_contain", tuple(self.must_contain))

    def failure(self, ctx: ToolContext) -> str | None:
        """Why the test fails, or None when it passes."""
        try:
            text = ctx.workspace.read_text(self.path)
        except WorkspaceError:
            return f"{self.path} does not exist"
        missing = [s for s in self.must_contain if s not in text]
        return f"{self.path} lacks " + ", ".join(map(repr, missing)) if missing else None


@dataclass(frozen=True, slots=True)
class CodingTask:
    """The tests of a coding job, and the files ``start_over`` puts back."""

    tests: Sequence[CodeTest]
    baseline: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tests = tuple(self.tests)
        if not tests or not all(isinstance(t, CodeTest) for t in tests):
            raise ConfigError(
                "a CodingTask needs at least one gr.tools.CodeTest(name, path, (...))"
            )
        object.__setattr__(self, "tests", tests)
        object.__setattr__(self, "baseline", MappingProxyType(dict(self.baseline)))


def coding_tools(task: CodingTask) -> Toolset:
    """``run_tests`` and ``start_over`` for ``task``, as one toolset."""

    def run_tests(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        failures = [(t.name, f) for t in task.tests if (f := t.failure(ctx)) is not None]
        passed = len(task.tests) - len(failures)
        lines = [f"{passed} passed, {len(failures)} failed"]
        lines += [f"FAILED {name}: {why}" for name, why in failures]
        return "\n".join(lines)

    def start_over(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        for path, content in task.baseline.items():
            ctx.workspace.write_text(path, content)
        return (
            f"Started over with the strategy: {params['strategy'].strip()}. "
            f"{len(task.baseline)} files are back to their starting state."
        )

    return Toolset(
        (
            Tool(
                "run_tests",
                "Run the test suite; reports how many tests pass.",
                object_schema(),
                run_tests,
                docs="Prints 'N passed, M failed' and one line per failing test.",
                effect="read",
            ),
            Tool(
                "start_over",
                "Reset the code to its starting state and begin again with a new strategy.",
                object_schema(
                    ["strategy"],
                    strategy={"type": "string", "minLength": 1, "description": "The new plan."},
                ),
                start_over,
                docs="Restores the starting files. The intervention safeguards give you a grace "
                "period after it to implement the new strategy.",
                effect="idempotent",
            ),
        ),
        name="coding",
    )
