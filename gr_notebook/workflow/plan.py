"""The strategic plan file (``main_plan.md``): phases of checkbox steps, as the seeds draw it.

Parsing is lenient on purpose: people edit this file by hand and models write it freely,
so a line the parser does not understand is kept verbatim and survives a round-trip, and
problems become :attr:`Plan.warnings` the model is shown instead of exceptions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from gr_notebook.eventdata import clip
from gr_notebook.reprs import to_html

__all__ = ["MAX_PHASE_STEPS", "MIN_PHASE_STEPS", "Phase", "PhaseStatus", "Plan", "Step"]

PhaseStatus: TypeAlias = Literal["complete", "current", "pending"]

MIN_PHASE_STEPS = 5
MAX_PHASE_STEPS = 20
MAX_PHASE_DIGITS = 6
"""A phase number longer than this is refused: ``int()`` of 4,300+ digits raises."""

_PHASE_HEADING = re.compile(r"^##\s+Phase\s+(\d+)\s*[:.\-–—]\s*(.*?)\s*$", re.IGNORECASE)
_LOOSE_PHASE_HEADING = re.compile(r"^##\s+Phase\b", re.IGNORECASE)
_COMPLETE = re.compile(r"\s*(?:✓\s*COMPLETED?|\(COMPLETED?\)|\[COMPLETED?\]|COMPLETED? ✓)$", re.I)
_CURRENT = re.compile(r"\s*(?:←\s*CURRENT|<-+\s*CURRENT|\(CURRENT\)|\[CURRENT\])$", re.I)
_STEP = re.compile(r"^[-*]\s+\[([ xX])\]\s+(.*?)\s*$")  # top level only; nested stay verbatim

_MARKERS: dict[PhaseStatus, str] = {
    "complete": " ✓ COMPLETE",
    "current": " ← CURRENT",
    "pending": "",
}


@dataclass(frozen=True, slots=True)
class Step:
    text: str
    done: bool = False

    def render(self) -> str:
        return f"- [{'x' if self.done else ' '}] {self.text}"


@dataclass(frozen=True, slots=True)
class Phase:
    number: int
    name: str
    status: PhaseStatus = "pending"
    lines: tuple[Step | str, ...] = ()
    """The phase's body in order: its steps, and any other line kept verbatim."""

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(line for line in self.lines if isinstance(line, Step))

    def heading(self) -> str:
        return f"## Phase {self.number}: {self.name}{_MARKERS[self.status]}"

    def with_status(self, status: PhaseStatus) -> Phase:
        lines = self.lines
        if status == "complete":
            lines = tuple(replace(x, done=True) if isinstance(x, Step) else x for x in lines)
        return replace(self, status=status, lines=lines)


@dataclass(frozen=True, slots=True)
class Plan:
    head: tuple[str, ...] = ("# Execution Plan", "")
    phases: tuple[Phase, ...] = ()
    parse_warnings: tuple[str, ...] = field(default=(), compare=False)
    trailing_newline: bool = True

    @classmethod
    def parse(cls, text: str) -> Plan:
        head: list[str] = []
        phases: list[Phase] = []
        body: list[Step | str] = []
        problems: list[str] = []

        def close_phase() -> None:
            if phases:
                phases[-1] = replace(phases[-1], lines=tuple(body))
            body.clear()

        for lineno, line in enumerate(text.splitlines(), start=1):
            match = _PHASE_HEADING.match(line)
            if match and len(match.group(1)) <= MAX_PHASE_DIGITS:
                close_phase()
                phases.append(_phase_from_heading(int(match.group(1)), match.group(2)))
                continue
            if _LOOSE_PHASE_HEADING.match(line):
                what = "the phase number is too long in" if match else "could not read"
                problems.append(
                    f"line {lineno}: {what} the phase heading {clip(line.strip(), 60)!r}; "
                    "write it as '## Phase 3: Name'"
                )
            step = _STEP.match(line)
            target = body if phases else head
            if step and phases:
                body.append(Step(step.group(2), step.group(1) != " "))
            else:
                target.append(line)
        close_phase()
        return cls(tuple(head), tuple(phases), tuple(problems), text.endswith("\n") or not text)

    def render(self) -> str:
        lines = list(self.head)
        for phase in self.phases:
            lines.append(phase.heading())
            lines.extend(x.render() if isinstance(x, Step) else x for x in phase.lines)
        text = "\n".join(lines)
        return text + "\n" if self.trailing_newline and text else text

    @classmethod
    def from_phases(
        cls, phases: Iterable[tuple[str, Iterable[str]]], *, overview: str = ""
    ) -> Plan:
        """Build a plan from ``(name, steps)`` pairs, with the first phase current."""
        head = ["# Execution Plan", ""]
        if overview:
            head += ["## Overview", overview, ""]
        built = []
        for number, (name, steps) in enumerate(phases, start=1):
            body: list[Step | str] = [Step(s) for s in steps]
            status: PhaseStatus = "current" if number == 1 else "pending"
            built.append(Phase(number, clean_name(name), status, (*body, "")))
        return cls(tuple(head), tuple(built))

    # -- queries ---------------------------------------------------------------------------

    @property
    def title(self) -> str:
        return next((line[2:].strip() for line in self.head if line.startswith("# ")), "")

    @property
    def current(self) -> Phase | None:
        return next((p for p in self.phases if p.status == "current"), None)

    @property
    def active(self) -> Phase | None:
        """The phase being worked: the current one, else the first one not complete."""
        return self.current or next((p for p in self.phases if p.status != "complete"), None)

    @property
    def is_complete(self) -> bool:
        return bool(self.phases) and all(p.status == "complete" for p in self.phases)

    def phase(self, number: int) -> Phase:
        for phase in self.phases:
            if phase.number == number:
                return phase
        raise KeyError(f"the plan has no phase {number}")

    @property
    def warnings(self) -> tuple[str, ...]:
        """Problems the model should fix; never fatal."""
        found = list(self.parse_warnings)
        if not self.phases:
            found.append(
                "the plan has no phases; write each as '## Phase 1: Name' followed by "
                "'- [ ] step' lines"
            )
        numbers = [p.number for p in self.phases]
        if numbers != list(range(1, len(numbers) + 1)):
            found.append(f"phases are numbered {numbers}; number them 1, 2, 3, … in order")
        current = [p.number for p in self.phases if p.status == "current"]
        if len(current) > 1:
            found.append(f"phases {current} are all marked ← CURRENT; mark only one")
        for phase in self.phases:
            count = len(phase.steps)
            if count < MIN_PHASE_STEPS and phase.status != "complete":
                found.append(
                    f"Phase {phase.number} '{phase.name}' has {count} step(s); phases should "
                    f"have {MIN_PHASE_STEPS}-{MAX_PHASE_STEPS} steps (combine it with an "
                    "adjacent phase)"
                )
            elif count > MAX_PHASE_STEPS:
                found.append(
                    f"Phase {phase.number} '{phase.name}' has {count} steps; phases should "
                    f"have {MIN_PHASE_STEPS}-{MAX_PHASE_STEPS} steps (split it into smaller "
                    "phases)"
                )
        return tuple(found)

    # -- edits (each returns a new plan) ----------------------------------------------------

    def with_status(self, number: int, status: PhaseStatus) -> Plan:
        self.phase(number)  # raises KeyError for an unknown phase
        phases = tuple(p.with_status(status) if p.number == number else p for p in self.phases)
        return replace(self, phases=phases)

    def with_current(self, number: int | None) -> Plan:
        """The plan with phase ``number`` current (unless it is complete) and no other, or
        none current for ``None``: the plan as a display shows it beside a todo layer that
        works phase ``number`` (or the bootstrap, or the job's completion)."""
        phases = tuple(
            replace(p, status="current")
            if p.number == number and p.status == "pending"
            else replace(p, status="pending")
            if p.number != number and p.status == "current"
            else p
            for p in self.phases
        )
        return self if phases == self.phases else replace(self, phases=phases)

    def advance(self) -> Plan:
        """Mark the active phase complete and the next pending one current."""
        active = self.active
        if active is None:
            return self
        plan = self.with_status(active.number, "complete")
        following = next((p for p in plan.phases if p.status == "pending"), None)
        return plan.with_status(following.number, "current") if following else plan

    def __str__(self) -> str:
        return self.render()

    def _repr_html_(self) -> str | None:
        return to_html(self)

    def __repr__(self) -> str:
        done = sum(p.status == "complete" for p in self.phases)
        active = self.active
        where = f", current: Phase {active.number} '{active.name}'" if active else ""
        return f"<Plan {len(self.phases)} phases, {done} complete{where}>"


def clean_name(name: str) -> str:
    """A phase name without trailing status markers, which would change its status when
    the plan is parsed again."""
    while True:
        marker = _COMPLETE.search(name) or _CURRENT.search(name)
        if marker is None:
            return name.strip()
        name = name[: marker.start()]


def _phase_from_heading(number: int, rest: str) -> Phase:
    status: PhaseStatus = "pending"
    for pattern, found in ((_COMPLETE, "complete"), (_CURRENT, "current")):
        marker = pattern.search(rest)
        if marker:
            rest = rest[: marker.start()].rstrip()
            status = found  # type: ignore[assignment]
            break
    return Phase(number=number, name=rest.strip() or f"Phase {number}", status=status)
