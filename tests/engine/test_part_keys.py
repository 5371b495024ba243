"""The run state's part keys: a checkpoint builds a part again only when its key changed,
so a key that stays the same while its part changes would lose that change."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.examples import QUICKSTART
from gr_notebook.guardrails import PolicyMemory
from gr_notebook.guardrails.interventions import ProgressTracker

TALLIED = {
    "guardrails": ("feedback", ("calls", "recent")),
    "interventions": (None, ("step", "stuck_counter")),
}
"""What moves with the tool calls, kept apart from the parts (and out of their keys)."""


def without_tallies(name: str, part: Any) -> Any:
    part = json.loads(json.dumps(part, default=dict))
    if name in TALLIED and part is not None:
        inner, keys = TALLIED[name]
        holder = part[inner] if inner else part
        for key in keys:
            del holder[key]
    return part


def test_a_memory_changes_its_revision_exactly_when_its_json_changes() -> None:
    memory = PolicyMemory("p")
    seen = {memory.revision}

    def changed(step: Any) -> bool:
        before_json, before = json.dumps(memory.to_json()), memory.revision
        step()
        assert (memory.revision != before) == (json.dumps(memory.to_json()) != before_json)
        if memory.revision != before:
            assert memory.revision not in seen  # never a revision seen before
            seen.add(memory.revision)
        return memory.revision != before

    assert changed(lambda: memory.record("read_file", "a.md", stamp=(3, 1.5)))
    assert not changed(lambda: memory.record("read_file", "a.md", stamp=(3, 1.5)))
    assert not changed(lambda: memory.record("read_file"))
    assert changed(lambda: memory.record("read_file", "a.md", stamp=(4, 1.5)))
    assert changed(lambda: memory.record("read_file", "a.md", stamp=1))
    assert changed(lambda: memory.record("read_file", "a.md", stamp=1.0))  # 1.0 == 1, not in JSON
    assert changed(lambda: memory.record("write_file"))
    before = memory.revision
    memory.load_json(memory.to_json())  # a restore: the same JSON, a new revision all the same
    assert memory.revision != before
    assert changed(memory.reset)
    assert PolicyMemory("p").revision not in seen


def test_a_key_that_did_not_change_means_its_part_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a whole job with a policy, feedback and the interventions engine, at every
    turn: each part whose key is the same as at the previous turn is the same part."""
    taken: list[tuple[dict[str, object], dict[str, Any]]] = []
    take = Checkpointer._take

    def recording(checkpointer: Checkpointer) -> None:
        state = checkpointer.state
        keys = state.part_keys()
        parts = state.snapshot(history=False)
        taken.append((keys, {name: without_tallies(name, parts[name]) for name in keys}))
        take(checkpointer)

    monkeypatch.setattr(Checkpointer, "_take", recording)
    agent = gr.Agent(
        gr.SimulatedModel(),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
        max_iterations=200,
        policies=[gr.ReadBeforeWritePolicy()],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Keep going."), gr.FeedbackTrigger(every_n_calls=3)
            )
        ],
    )
    run = agent.run_sync(QUICKSTART)
    assert run.status == "completed" and len(taken) == run.turns
    changes = dict.fromkeys(taken[0][0], 0)
    for (keys, parts), (next_keys, next_parts) in pairwise(taken):
        for name, key in next_keys.items():
            if key == keys[name]:
                assert next_parts[name] == parts[name], name
            else:
                changes[name] += 1
    # the keys did change along the way: the comparison above saw both cases
    assert changes["guardrails"] >= 5 and changes["interventions"] >= 5, changes
    assert changes["phases"] >= 5, changes


def test_the_trackers_key_changes_with_every_field_but_the_step_and_stuck_counter() -> None:
    tracker = ProgressTracker()
    changes: dict[str, Callable[[ProgressTracker], None]] = {
        "last_start_over_step": lambda t: setattr(t, "last_start_over_step", 3),
        "code_edit_count": lambda t: setattr(t, "code_edit_count", 1),
        "recent_tools": lambda t: t.recent_tools.append("read_file"),
        "last_progress_step": lambda t: setattr(t, "last_progress_step", 2),
        "tier": lambda t: setattr(t, "tier", 1),
        "best_score": lambda t: setattr(t, "best_score", 0.5),
        "fresh_window": lambda t: setattr(t, "fresh_window", True),
        "seen": lambda t: t.seen.add(7),
    }
    tallied = {"step", "stuck_counter"}
    assert set(changes) == set(tracker.to_json(seen=False)) - tallied  # a new field: add it
    for field, change in changes.items():
        changed = ProgressTracker()
        change(changed)
        assert changed.state_key() != tracker.state_key(), field
    stepped = ProgressTracker(step=5, stuck_counter=2)
    assert stepped.state_key() == tracker.state_key()


def test_self_regulations_key_changes_exactly_when_its_json_does(
    make_agent: Callable[..., gr.Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads of new, unchanged and changed files, reads a prompt asked for, a summary, a
    pruning: at every turn the key is the same as the turn before's exactly when the JSON
    is. The reads are one revision in the key, not a copy of each (decision 284)."""
    taken: list[tuple[object, str]] = []
    take = Checkpointer._take

    def recording(checkpointer: Checkpointer) -> None:
        regulation = checkpointer.state.regulation
        assert regulation is not None
        taken.append((regulation.state_key(), json.dumps(regulation.to_json())))
        take(checkpointer)

    monkeypatch.setattr(Checkpointer, "_take", recording)
    read = gr.tool_call("read_file", path="notes.txt")
    summary = {"key_findings": ["one"], "files_examined": ["notes.txt"], "next_steps": ["go"]}
    model = gr.ScriptedModel(
        [
            gr.tool_call("write_file", path="notes.txt", content="one"),
            read,  # a new file: explored
            read,  # unchanged: redundant, nothing changes
            gr.tool_call("write_file", path="notes.txt", content="two, longer"),
            read,  # changed: explored again
            gr.tool_call("summarize_progress", **summary),  # a summary, and a pruning
            read,
            gr.tool_call("read_file", path="instructions.md"),
            gr.text("ok"),
        ]
    )
    run = make_agent(model, store=True).run_sync("job")
    assert run.status == "ended" and len(taken) == run.turns
    moved = 0
    for (key, data), (next_key, next_data) in pairwise(taken):
        assert (next_key == key) == (next_data == data), (key, next_key)
        moved += next_key != key
    assert moved >= 4, moved
