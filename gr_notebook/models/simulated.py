"""The simulated agent: a deterministic, rule-based model that really works the phased loop.

It reads the instructions, writes a phased plan, completes the bootstrap todos, works each
todo through the workspace tools, calls ``todo_complete()``, answers transition and rewind
prompts by updating the plan and writing the next todos, and finishes with
``job_complete``. Behaviour profiles subclass :class:`Profile` and override one decision
each, to reproduce the failure modes the guardrails exist for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gr_notebook import prompts
from gr_notebook.errors import ModelSpecError
from gr_notebook.messages import TextBlock, ToolUseBlock, Usage, block_tokens
from gr_notebook.models.base import ModelRequest, ModelResponse
from gr_notebook.models.planner import plan_from_instructions, slug, work_text
from gr_notebook.models.situation import Situation, Task
from gr_notebook.plan import Plan, Step

__all__ = ["PROFILES", "Profile", "SimulatedModel", "register_profile"]

ToolCalls = Sequence[tuple[str, Mapping[str, Any]]]
_FINISHED = re.compile(r"Phase (\d+) '")
_PLAN_TASK = re.compile(r"execution plan in (\S+)")
_READ_TASK = re.compile(r"^Read (\S+)$")
MAX_ERROR_TURNS = 3


class Profile:
    """The diligent agent. Subclasses override single decisions to misbehave on purpose."""

    name: ClassVar[str] = "diligent"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, s: Situation) -> ModelResponse:
        if s.last_calls and all(c.is_error for c in s.last_calls):
            handled = self.on_error(s)
            if handled is not None:
                return handled
        task = s.current
        if task is None:
            if s.tasks:  # a finished list that does not transition: the job's finale
                return self.finish(s)
            return self.on_transition(s)
        calls, final = self.work_for(s, task)
        if final is not None and self.work_done(s, final):
            return self.complete(s, task)
        return respond(f"Working on task {task.number}: {task.title}", calls)

    # -- decisions profiles override --------------------------------------------------------

    def complete(self, s: Situation, task: Task) -> ModelResponse:
        return respond(f"Task {task.number} is done.", [("todo_complete", {})])

    def on_error(self, s: Situation) -> ModelResponse | None:
        """Retry by default; rewind when the same failure keeps coming back."""
        streak = _error_streak(s)
        if streak >= MAX_ERROR_TURNS + 1:
            return respond(f"I cannot make progress: {s.calls[-1].result}", [])
        if streak >= MAX_ERROR_TURNS and s.current is not None:
            issue = f"Task '{s.current.title}' keeps failing: {s.calls[-1].result}"
            return respond(
                "This approach is not working.", [("todo_rewind", {"issue": issue[:300]})]
            )
        return None

    def on_transition(self, s: Situation) -> ModelResponse:
        plan_file = s.plan_file
        since = s.calls_since_marker
        if not any(c.name == "read_file" for c in since):
            paths = [plan_file, "instructions.md", "workspace_summary.md"]
            if "experiences.md" in s.marker_text:
                paths.append("experiences.md")
            return respond(
                "Re-reading the plan, the instructions and the workspace summary.",
                [("read_file", {"path": p}) for p in paths],
            )
        written = _written_plan(since, plan_file)
        if written is None:
            current = s.latest_read(plan_file)
            plan = Plan.parse(current) if current else None
            if plan is None or not plan.phases:
                plan = plan_from_instructions(s.latest_read("instructions.md") or "")
            revised = self.revise_plan(plan, s)
            if revised is not plan or current is None:
                return respond(
                    f"Updating {plan_file}.",
                    [("write_file", {"path": plan_file, "content": revised.render()})],
                )
            written = plan
        active = written.active
        steps = [st.text for st in active.steps if not st.done] if active else []
        if active is None or not steps:
            return respond("Every phase is complete.", [("list_files", {})])
        return respond(
            f"Writing the todo list for Phase {active.number}: {active.name}.",
            [("todo_write", {"todos": steps})],
        )

    def revise_plan(self, plan: Plan, s: Situation) -> Plan:
        if s.marker == prompts.REWIND_MARKER and plan.active:
            issue = s.marker_text.split('"')[1] if '"' in s.marker_text else "the rewind"
            active = plan.active
            lesson = Step(f"Apply the lesson: {issue[:70]}")
            lines = (
                lesson,
                *(line for line in active.lines if not isinstance(line, Step) or not line.done),
            )
            phases = tuple(
                p if p.number != active.number else _with_lines(p, lines) for p in plan.phases
            )
            return Plan(plan.head, phases, trailing_newline=plan.trailing_newline)
        finished = _FINISHED.search(s.marker_text)
        if s.marker == prompts.TRANSITION_MARKER and finished:
            number = int(finished.group(1))
            try:
                if plan.phase(number).status != "complete":
                    return (
                        plan.advance()
                        if plan.active and plan.active.number == number
                        else (plan.with_status(number, "complete"))
                    )
            except KeyError:
                return plan
        return plan

    def work_for(self, s: Situation, task: Task) -> tuple[ToolCalls, tuple[str, str | None] | None]:
        """The tool calls that do ``task``, and the call that shows it is done."""
        title = task.title
        if "generate_workspace_summary" in title:
            return [("generate_workspace_summary", {})], ("generate_workspace_summary", None)
        read = _READ_TASK.match(title)
        if read:
            return [("read_file", {"path": read.group(1)})], ("read_file", read.group(1))
        plan_task = _PLAN_TASK.search(title)
        if plan_task:
            path = plan_task.group(1)
            instructions = s.latest_read("instructions.md")
            if instructions is None:
                return [("read_file", {"path": "instructions.md"})], ("write_file", path)
            content = plan_from_instructions(instructions).render()
            return [("write_file", {"path": path, "content": content})], ("write_file", path)
        if title.startswith("Divide plan"):
            return [("read_file", {"path": s.plan_file})], ("read_file", s.plan_file)
        if title == "Verify all deliverables":
            return [("list_files", {})], ("list_files", None)
        if title == "Generate summary report":
            return [("write_file", {"path": "report.md", "content": self.report(s)})], (
                "write_file",
                "report.md",
            )
        if title == "Call job_complete()":
            return self.finish_calls(s), None
        path = f"work/phase_{s.phase_number:02d}/{slug(title)}.md"
        calls: list[tuple[str, Mapping[str, Any]]] = [
            (
                "write_file",
                {"path": path, "content": work_text(title, phase=s.phase_number, seed=self.seed)},
            )
        ]
        if task.number == len(s.tasks):
            done = f"Finished phase {s.phase_number} '{s.phase_name}' ({len(s.tasks)} steps)"
            calls.append(("add_accomplishment", {"text": done}))
        return calls, ("write_file", path)

    def work_done(self, s: Situation, final: tuple[str, str | None]) -> bool:
        name, path = final
        return any(
            c.name == name and not c.is_error and (path is None or c.input.get("path") == path)
            for c in s.last_calls
        )

    def report(self, s: Situation) -> str:
        plan = s.latest_read(s.plan_file)
        phases = Plan.parse(plan).phases if plan else ()
        lines = ["# Summary report", "", f"The job is complete: {len(phases)} phases.", ""]
        lines += [f"- Phase {p.number}: {p.name} ({len(p.steps)} steps)" for p in phases]
        return "\n".join(lines) + "\n"

    def finish_calls(self, s: Situation) -> ToolCalls:
        return [
            (
                "job_complete",
                {
                    "summary": "Worked through every phase of the plan and wrote report.md.",
                    "deliverables": ["report.md"],
                    "confidence": 0.9,
                    "notes": "Simulated run; deliverables are generated text.",
                },
            )
        ]

    def finish(self, s: Situation) -> ModelResponse:
        return respond("All done.", self.finish_calls(s))


PROFILES: dict[str, type[Profile]] = {}


def register_profile(cls: type[Profile]) -> type[Profile]:
    """Make a profile available as ``SimulatedModel(profile=cls.name)``."""
    PROFILES[cls.name] = cls
    return cls


register_profile(Profile)


class SimulatedModel:
    """A deterministic, rule-based agent; the embedded default model."""

    def __init__(self, profile: str = "diligent", seed: int = 0) -> None:
        if profile not in PROFILES:
            known = ", ".join(sorted(PROFILES))
            raise ModelSpecError(f"unknown simulated profile {profile!r}; choose one of: {known}")
        self.profile = PROFILES[profile](seed)
        self.seed = seed

    @property
    def name(self) -> str:
        return f"simulated:{self.profile.name}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.profile.act(Situation.read(request))
        content = tuple(
            ToolUseBlock(f"toolu_sim_{request.turn:05d}_{i}", b.name, b.input)
            if isinstance(b, ToolUseBlock)
            else b
            for i, b in enumerate(response.content)
        )
        usage = Usage(request.estimated_tokens, sum(block_tokens(b) for b in content) + 12)
        return ModelResponse(content, response.stop_reason, usage, self.name)

    def __repr__(self) -> str:
        return f"SimulatedModel(profile={self.profile.name!r}, seed={self.seed})"


def respond(text: str, calls: ToolCalls) -> ModelResponse:
    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text)]
    blocks += [ToolUseBlock("", name, dict(params)) for name, params in calls]
    return ModelResponse(tuple(blocks), "tool_use" if calls else "end_turn")


def _written_plan(calls: Sequence[Any], plan_file: str) -> Plan | None:
    for call in reversed(calls):
        if call.name == "write_file" and call.input.get("path") == plan_file and not call.is_error:
            return Plan.parse(call.input["content"])
    return None


def _with_lines(phase: Any, lines: tuple[Any, ...]) -> Any:
    from dataclasses import replace

    return replace(phase, lines=lines)


def _error_streak(s: Situation) -> int:
    streak, turn = 0, None
    for call in reversed(s.calls):
        if call.turn_index != turn:
            if not call.is_error:
                break
            turn = call.turn_index
            streak += 1
    return streak
