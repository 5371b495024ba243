"""How the simulated agent turns instructions into a phased plan, and plans into work.

Deterministic text generation: the same instructions and seed give the same plan and the
same files, byte for byte, so simulated runs are reproducible in tests and notebooks.
"""

from __future__ import annotations

import random
import re

from gr_notebook.workflow.plan import MAX_PHASE_STEPS, MIN_PHASE_STEPS, Plan

__all__ = ["derive_phases", "slug", "work_text"]

_HEADING = re.compile(r"^#{2,3}\s+(.+?)\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.+?)\s*$")
_PAD = (
    "Check the {name} work against instructions.md",
    "Record open questions about {name}",
    "Cross-link the {name} notes",
    "Tidy the {name} files",
    "Review {name} for gaps",
)
_GENERIC = (
    (
        "Research and draft",
        (
            "Collect background on {topic}",
            "Outline the deliverable",
            "Draft the main body",
            "Draft the introduction and conclusion",
            "Assemble the draft",
        ),
    ),
    (
        "Review",
        (
            "Check the facts",
            "Check the structure",
            "Polish the wording",
            "Verify completeness against instructions.md",
            "Finalise the deliverable",
        ),
    ),
)
_WORDS = (
    "analysis",
    "evidence",
    "structure",
    "finding",
    "constraint",
    "example",
    "detail",
    "summary",
    "section",
    "source",
    "result",
    "pattern",
    "decision",
    "risk",
    "assumption",
    "measure",
    "outline",
    "draft",
    "review",
    "context",
    "detail",
    "theme",
    "question",
)


def derive_phases(instructions: str) -> list[tuple[str, list[str]]]:
    """Phases from the instructions: ``##`` headings with their bullets, else bullets in
    groups, else a generic research/draft/review plan. Every phase gets 5-20 steps."""
    sections: list[tuple[str, list[str]]] = []
    loose: list[str] = []
    for line in instructions.splitlines():
        heading = _HEADING.match(line)
        if heading:
            sections.append((heading.group(1), []))
            continue
        bullet = _BULLET.match(line)
        if bullet:
            (sections[-1][1] if sections else loose).append(bullet.group(1))
    if sections and loose:  # bullets before the first heading are work too
        sections.insert(0, ("Preliminaries", loose))
    elif loose:
        sections = [(f"Part {i // 6 + 1}", loose[i : i + 6]) for i in range(0, len(loose), 6)]
    if not sections:
        topic = _topic(instructions)
        sections = [(name, [s.format(topic=topic) for s in steps]) for name, steps in _GENERIC]
    phases: list[tuple[str, list[str]]] = []
    for name, steps in sections:
        for start in range(0, max(len(steps), 1), MAX_PHASE_STEPS):
            chunk = steps[start : start + MAX_PHASE_STEPS]
            part = name if start == 0 else f"{name} (continued)"
            pads = (p.format(name=part) for p in _PAD)
            while len(chunk) < MIN_PHASE_STEPS:
                chunk.append(next(pads))
            phases.append((part, chunk))
    return phases


def plan_from_instructions(instructions: str) -> Plan:
    overview = f"Plan for: {_topic(instructions)}. Work phase by phase; one todo per step."
    return Plan.from_phases(derive_phases(instructions), overview=overview)


def work_text(step: str, *, phase: int, seed: int, words: tuple[int, int] = (70, 140)) -> str:
    """A deterministic document body for one plan step."""
    rng = random.Random(f"{seed}:{phase}:{step}")
    count = rng.randint(*words)
    sentences, sentence = [], []
    for i in range(count):
        sentence.append(rng.choice(_WORDS))
        if len(sentence) >= rng.randint(6, 12) or i == count - 1:
            sentences.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return f"# {step}\n\nPhase {phase} work product.\n\n" + " ".join(sentences) + "\n"


def slug(text: str, limit: int = 40) -> str:
    cleaned = re.sub(r"\W+", "_", text.lower()).strip("_")
    return cleaned[:limit].rstrip("_") or "step"


def _topic(instructions: str) -> str:
    for line in instructions.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text if len(text) <= 60 else text[:59] + "…"
    return "the job"
