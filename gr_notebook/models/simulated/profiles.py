"""Simulated agents that misbehave on purpose, one guardrail each.

- ``reckless`` overwrites ``notes.md`` without reading it (a :class:`ReadBeforeWritePolicy`
  stops it; told to read first, it reads and merges);
- ``impatient`` calls ``job_complete`` before verifying the deliverables (a
  :class:`SequentialDependencyPolicy` or a completion checker stops it);
- ``quitter`` declares victory halfway through each phase (a completion checker sends it
  back to work).

Without the guardrail, each does the damage it is named for, which is the point of
running them side by side.
"""

from __future__ import annotations

import re
from typing import ClassVar

from gr_notebook.models.base import ModelResponse
from gr_notebook.models.simulated.diligent import Profile, register_profile, respond
from gr_notebook.models.simulated.situation import Call, Situation
from gr_notebook.workflow.journal import NOTES_FILE

__all__ = ["Impatient", "Quitter", "Reckless"]

_READ_HINT = re.compile(r"with read_file\('([^']+)'\)")


@register_profile
class Reckless(Profile):
    """Starts every work phase by rewriting notes.md from memory, unread. Told to read it
    first, it reads and merges; denied for any other reason, it lets the rewrite go."""

    name: ClassVar[str] = "reckless"

    def act(self, s: Situation) -> ModelResponse:
        path = _read_hint(s.last_calls)
        if path is not None:
            return respond(f"I will read {path} first.", [("read_file", {"path": path})])
        task = s.current
        if task is not None and task.number == 1 and s.in_work_phase:
            line = f"- Starting phase {s.phase_number}: {s.phase_name}"
            tries = [c for c in s.calls if _writes(c, NOTES_FILE, line)]
            done = any(not c.is_error for c in tries)
            refused = bool(tries) and _read_hint((tries[-1],)) is None  # denied for good
            if not done and not refused:
                return respond(
                    "Starting the phase with a fresh notes file.",
                    [("write_file", {"path": NOTES_FILE, "content": _notes(s, line)})],
                )
        return super().act(s)


@register_profile
class Impatient(Profile):
    """Calls job_complete first on reaching the final list, skipping verification."""

    name: ClassVar[str] = "impatient"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if (
            s.phase_name == "Job Completion"
            and task is not None
            and task.number == 1
            and not any(c.name == "job_complete" for c in s.calls_since_marker)
        ):
            return respond("Everything looks done; finishing now.", self.finish_calls(s))
        return super().act(s)


@register_profile
class Quitter(Profile):
    """Stops halfway through each phase's list, once per phase, claiming it is done."""

    name: ClassVar[str] = "quitter"

    def act(self, s: Situation) -> ModelResponse:
        task = s.current
        if (
            task is not None
            and s.in_work_phase
            and task.number == len(s.tasks) // 2 + 1  # the halfway task, once
            and s.refused_stops == 0
            and not s.erring
        ):
            return respond("That should be enough; the rest is straightforward. Done.", [])
        return super().act(s)


def _read_hint(calls: tuple[Call, ...]) -> str | None:
    """The file a policy denial said to read first, when every call of the turn failed."""
    if not calls or not all(c.is_error for c in calls):
        return None
    for call in calls:
        match = _READ_HINT.search(call.result or "")
        if match:
            return match.group(1)
    return None


def _writes(call: Call, path: str, line: str) -> bool:
    return (
        call.name == "write_file"
        and call.input.get("path") == path
        and line in str(call.input.get("content", ""))
    )


def _notes(s: Situation, line: str) -> str:
    """Merged into the file as last read, when it was read; from scratch otherwise."""
    current = s.latest_read(NOTES_FILE)
    if current is None:
        return f"# Notes\n\n## Notes\n{line}\n"
    return current.rstrip("\n") + "\n" + line + "\n"
