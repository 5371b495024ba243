"""Simulated agents that waste resources or get stuck, one mechanism of seeds 003/004 each.

- ``looper`` repeats one identical tool call on its second task; a rewind cures it.
- ``drifter`` wanders on its first task without completing it; a strategy check (tier 1)
  sends it back to work.
- ``token_hog`` reads every large file in ``data/`` before each task and never summarizes
  unless warned; redundancy feedback and resource warnings rein it in.
- ``implementer`` starts over with the right strategy, then implements slowly: no test
  passes until the end. Told to re-plan, it abandons its work and starts over again, which
  is the harm premature interventions do.
- ``stuck_reader`` reads and runs the tests on every work task and never edits; only the
  escalation to tier 3 ends it.
"""

from __future__ import annotations

import re
from typing import ClassVar

from gr_notebook.models.base import ModelResponse
from gr_notebook.models.simulated import habits
from gr_notebook.models.simulated.diligent import Profile, register_profile, respond
from gr_notebook.models.simulated.situation import Situation, Task

__all__ = ["Drifter", "Implementer", "Looper", "StuckReader", "TokenHog"]

_MISSING = re.compile(r"'([^']+)'")
PARTS = 12
TESTS_EVERY = 4
MAX_START_OVERS = 3
HOG_READS_PER_TURN = 3


@register_profile
class Looper(Profile):
    """Reads instructions.md again and again on the first work list's second task."""

    name: ClassVar[str] = "looper"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        cured = any(t.title.startswith("Apply the lesson") for t in s.tasks)
        if task is not None and task.number == 2 and s.phase_number == 1 and not cured:
            return respond(
                "Let me check the instructions once more.",
                [("read_file", {"path": "instructions.md"})],
            )
        return super().act(s)


@register_profile
class Drifter(Profile):
    """On the first work list's first task it explores instead of working, until a
    strategy check tells it to re-plan."""

    name: ClassVar[str] = "drifter"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if (
            task is not None
            and task.number == 1
            and s.phase_number == 1
            and s.in_work_phase
            and s.strategy_checks == 0
            and not s.erring
        ):
            wander = [
                ("list_files", {}),
                ("read_file", {"path": "instructions.md"}),
                ("add_note", {"text": f"Idea {s.turn}: maybe look at this from another angle"}),
                ("read_file", {"path": s.plan_file}),
            ]
            return respond("Exploring a little first.", [wander[s.turn % len(wander)]])
        return super().act(s)


@register_profile
class TokenHog(Profile):
    """Reads every file in data/ before each work task; summarizes only when warned."""

    name: ClassVar[str] = "token_hog"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if task is not None and s.in_work_phase and not s.erring:
            since = s.calls_since("todo_complete")
            listing = next((c for c in reversed(since) if c.ok("list_files")), None)
            if listing is None:
                return respond("Listing the reference data.", [("list_files", {"path": "data"})])
            read = {str(c.input.get("path")) for c in since if c.ok("read_file")}
            files = [line.split("  (")[0] for line in (listing.result or "").splitlines()]
            todo = [p for p in files if p.startswith("data/") and p not in read]
            todo = [p for p in todo if not self._known(s, p)]
            if todo:
                calls = [("read_file", {"path": p}) for p in todo[:HOG_READS_PER_TURN]]
                return respond("Reading the references in full.", calls)
        return super().act(s)

    @staticmethod
    def _known(s: Situation, path: str) -> bool:
        """Told a read was redundant, it trusts the copy still in view."""
        return any(
            c.ok("read_file")
            and c.input.get("path") == path
            and "provider='Redundancy'" in (c.result or "")
            for c in s.calls
        )

    def summarizes(self, s: Situation) -> bool:
        return habits.due_summary(s, eager=False)


@register_profile
class Implementer(Profile):
    """Starts the implementation over with the right strategy, writes it part by part,
    and runs the tests now and then: they fail until the last part is in."""

    name: ClassVar[str] = "implementer"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if task is not None and task.title.startswith("Implement") and not s.erring:
            return self.implement(s, task)
        return super().act(s)

    def implement(self, s: Situation, task: Task) -> ModelResponse:
        in_task = s.calls_since("todo_complete")
        starts = sum(c.ok("start_over") for c in in_task)
        told = s.strategy_checks >= starts > 0 and starts < MAX_START_OVERS
        if starts == 0 or told:
            strategy = "two-phase topological sort" if starts == 0 else "a simpler propagation"
            return respond(f"Starting over: {strategy}.", [("start_over", {"strategy": strategy})])
        since = s.calls_since("start_over")
        parts = sum(
            c.ok("write_file") and str(c.input.get("path", "")).startswith("src/parts/")
            for c in since
        )
        if parts < PARTS:
            n = parts + 1
            calls: list[tuple[str, dict[str, object]]] = [
                (
                    "write_file",
                    {"path": f"src/parts/part_{n:02d}.py", "content": f"# part {n}\nSTEP = {n}\n"},
                )
            ]
            if n % TESTS_EVERY == 0:
                calls.append(("run_tests", {}))
            return respond(f"Implementing part {n} of {PARTS}.", calls)
        tests = next((c for c in reversed(since) if c.ok("run_tests")), None)
        if tests is None:
            return respond("Running the tests.", [("run_tests", {})])
        failing = [ln for ln in (tests.result or "").splitlines() if ln.startswith("FAILED")]
        if not failing:
            return respond("All tests pass.", [("todo_complete", {})])
        needed = [m for ln in failing for m in _MISSING.findall(ln.split(" lacks ")[-1])]
        body = "\n".join(f"# {m}\n{m}" for m in dict.fromkeys(needed))
        content = f"# Reactive cells, assembled from {PARTS} parts (topological)\n{body}\n"
        return respond(
            "Assembling the parts into src/cells.py.",
            [("write_file", {"path": "src/cells.py", "content": content}), ("run_tests", {})],
        )


@register_profile
class StuckReader(Profile):
    """On every work task: reads, re-reads and runs the tests, never edits."""

    name: ClassVar[str] = "stuck_reader"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if task is not None and s.in_work_phase and not s.erring:
            cycle = [
                ("read_file", {"path": "instructions.md"}),
                ("read_file", {"path": s.plan_file}),
                ("list_files", {}),
                ("run_tests", {}) if "run_tests" in s.tools else ("list_files", {"path": "."}),
            ]
            return respond("Studying the problem a bit more.", [cycle[s.turn % len(cycle)]])
        return super().act(s)
