"""The diligent agent: the :class:`Profile` every simulated behaviour subclasses, and the
registry of profiles by name.

A profile reads the situation from the request and decides the next turn: it writes a
phased plan, completes the bootstrap todos, works each todo through the workspace tools,
calls ``todo_complete()``, answers transition and rewind prompts by updating the plan and
writing the next todos, and finishes with ``job_complete``. The behaviour profiles
(:mod:`.profiles`, :mod:`.struggles`, :mod:`.literal`) override one decision each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.simulated import auditing, habits
from gr_notebook.models.simulated.planner import plan_from_instructions, slug, work_text
from gr_notebook.models.simulated.situation import Situation, Task
from gr_notebook.workflow import prompts
from gr_notebook.workflow.plan import Phase, Plan, Step

__all__ = ["PROFILES", "Profile", "ToolCalls", "register_profile", "respond"]

ToolCalls = Sequence[tuple[str, Mapping[str, Any]]]
_FINISHED = re.compile(r"Phase (\d+) '")
_FAILING = re.compile(r"Task '(.+?)' keeps failing")
_ISSUE = re.compile(r'\n  "(.*)"\n')
_COMPLETED = re.compile(r"^Task \d+ '(.*)' marked complete\.")
MAX_ERROR_TURNS = 3
MAX_REWINDS_PER_PHASE = 3


class Profile:
    """The diligent agent. Subclasses override single decisions to misbehave on purpose."""

    name: ClassVar[str] = "diligent"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, s: Situation) -> ModelResponse:
        if s.erring:
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
        if s.marker == prompts.REWIND_MARKER and _rewinds_of_phase(s) >= MAX_REWINDS_PER_PHASE:
            return self.give_up(s)
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
        active = plan.active
        if s.marker == prompts.REWIND_MARKER and active is not None:
            return _revised_after_rewind(plan, active, s)
        finished = _FINISHED.search(s.marker_text)
        if s.marker == prompts.TRANSITION_MARKER and finished:
            number = int(finished.group(1))
            try:
                if plan.phase(number).status != "complete":
                    if active is not None and active.number == number:
                        return plan.advance()
                    return plan.with_status(number, "complete")
            except KeyError:
                return plan
        return plan

    def work_for(self, s: Situation, task: Task) -> tuple[ToolCalls, tuple[str, str | None] | None]:
        """The tool calls that do ``task``, and the call that shows it is done.

        Workflow tasks are recognised by their exact titles, and only in their own list, so
        a plan step that merely mentions a file or a tool is ordinary work.
        """
        title = task.title
        if s.phase_name == "Bootstrap" and title in prompts.bootstrap_todos(s.plan_file):
            return self._bootstrap_work(s, prompts.bootstrap_todos(s.plan_file).index(title))
        if s.phase_name == "Job Completion" and title in prompts.JOB_COMPLETION_TODOS:
            if title == "Verify all deliverables":
                return [("list_files", {})], ("list_files", None)
            if title == "Generate summary report":
                report = ("write_file", {"path": "report.md", "content": self.report(s)})
                return [report], ("write_file", "report.md")
            return self.finish_calls(s), None
        if auditing.is_audit_task(task):
            return auditing.audit_work(s, task)
        if title.startswith("Write the audit report"):
            return auditing.report_work(s)
        path = f"work/phase_{s.phase_number:02d}/{task.number:02d}_{slug(title)}.md"
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

    def _bootstrap_work(
        self, s: Situation, index: int
    ) -> tuple[ToolCalls, tuple[str, str | None] | None]:
        plan_file = s.plan_file
        if index == 0:
            return [("generate_workspace_summary", {})], ("generate_workspace_summary", None)
        if index in (1, 2):
            path = ("workspace_summary.md", "instructions.md")[index - 1]
            return [("read_file", {"path": path})], ("read_file", path)
        if index == 3:
            instructions = s.latest_read("instructions.md")
            if instructions is None:
                return [("read_file", {"path": "instructions.md"})], ("write_file", plan_file)
            content = plan_from_instructions(instructions).render()
            write = ("write_file", {"path": plan_file, "content": content})
            return [write], ("write_file", plan_file)
        return [("read_file", {"path": plan_file})], ("read_file", plan_file)

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

    def give_up(self, s: Situation) -> ModelResponse:
        """The seed's last resort: job_complete with low confidence and detailed notes."""
        failures = s.latest_read("experiences.md") or ""
        notes = "Stopped after repeated rewinds. " + " ".join(
            line[2:] for line in failures.splitlines() if line.startswith("- Phase")
        )
        return respond(
            "This phase cannot be done; finishing with low confidence.",
            [
                (
                    "job_complete",
                    {
                        "summary": "Unfinished: a phase failed repeatedly.",
                        "confidence": 0.2,
                        "notes": notes[:1000],
                    },
                )
            ],
        )

    def finish(self, s: Situation) -> ModelResponse:
        return respond("All done.", self.finish_calls(s))

    # -- seed 003's resource management, when the tools are offered ----------------------------

    def regulate(
        self, s: Situation, response: ModelResponse, task_types: Sequence[str]
    ) -> ModelResponse:
        """Add the self-regulation calls the system prompt asks for to a working turn."""
        uses = response.tool_uses
        if "assess_task" not in s.tools or not uses or any(u.name == "job_complete" for u in uses):
            return response
        if s.erring:
            return response  # error handling reads the previous turn; keep it clean
        before: list[tuple[str, Mapping[str, Any]]] = []
        after: list[tuple[str, Mapping[str, Any]]] = []
        written = next((u.input.get("todos") for u in uses if u.name == "todo_write"), None)
        assess = habits.assessment_for(s, task_types, written if isinstance(written, list) else ())
        if assess is not None:
            before.append(("assess_task", assess))
        if self.checks_resources(s):
            before.append(("check_resources", {}))
        if self.summarizes(s):
            after.append(("summarize_progress", habits.summary_for(s)))
        if not before and not after:
            return response
        calls = [*before, *((u.name, u.input) for u in uses), *after]
        return respond(response.text, calls)

    def checks_resources(self, s: Situation) -> bool:
        return habits.due_check(s)

    def summarizes(self, s: Situation) -> bool:
        return habits.due_summary(s)


PROFILES: dict[str, type[Profile]] = {}


def register_profile(cls: type[Profile]) -> type[Profile]:
    """Make a profile available as ``SimulatedModel(profile=cls.name)``."""
    PROFILES[cls.name] = cls
    return cls


register_profile(Profile)


def respond(text: str, calls: ToolCalls) -> ModelResponse:
    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text)]
    blocks += [ToolUseBlock("", name, dict(params)) for name, params in calls]
    return ModelResponse(tuple(blocks), "tool_use" if calls else "end_turn")


def _written_plan(calls: Sequence[Any], plan_file: str) -> Plan | None:
    for call in reversed(calls):
        if call.name == "write_file" and call.input.get("path") == plan_file and not call.is_error:
            return Plan.parse(call.input["content"])
    return None


def _revised_after_rewind(plan: Plan, active: Phase, s: Situation) -> Plan:
    """Keep the steps already done, drop the one that kept failing, and put the lesson
    first, so a rewind always moves the phase forward."""
    issue_match = _ISSUE.search(s.marker_text)
    issue = issue_match.group(1) if issue_match else "see experiences.md"
    failing = _FAILING.search(issue)
    done = {
        m.group(1)
        for c in s.calls
        if c.name == "todo_complete" and not c.is_error and (m := _COMPLETED.match(c.result or ""))
    }
    lines: list[Step | str] = [Step(f"Apply the lesson: {issue[:70]}")]
    for line in active.lines:
        if isinstance(line, Step):
            if line.text.startswith("Apply the lesson:") or (failing and line.text == failing[1]):
                continue
            line = replace(line, done=line.done or line.text in done)
        lines.append(line)
    phases = tuple(p if p is not active else replace(p, lines=tuple(lines)) for p in plan.phases)
    return replace(plan, phases=phases)


def _rewinds_of_phase(s: Situation) -> int:
    """How many failed approaches experiences.md records for the phase being rewound."""
    experiences = s.latest_read("experiences.md") or ""
    phase = re.search(r"The todo list of (Phase \d+) ", s.marker_text)
    if phase is None:
        return 0
    return sum(line.startswith(f"- {phase.group(1)} ") for line in experiences.splitlines())


def _error_streak(s: Situation) -> int:
    streak, turn = 0, None
    for call in reversed(s.calls):
        if call.turn_index != turn:
            if not call.is_error:
                break
            turn = call.turn_index
            streak += 1
    return streak
