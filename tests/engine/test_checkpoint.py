"""A checkpoint at every turn boundary brings back the whole run state of that turn."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine import checkpoint as checkpoint_module
from gr_notebook.engine.checkpoint import Checkpointer
from gr_notebook.engine.state import RunState
from gr_notebook.examples import QUICKSTART
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.checkpoint_store import load_checkpoint
from gr_notebook.messages import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.workflow.workspace_files import hash_files


def comparable(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot without what is the run's own (identity) or the clock's."""
    out = {k: v for k, v in snapshot.items() if k not in ("run", "events")}
    out["counters"] = {k: v for k, v in snapshot["counters"].items() if k != "elapsed_s"}
    out["guardrails"] = dict(snapshot["guardrails"])
    return out


def recorded(agent: gr.Agent, instructions: str, **hooks: Any) -> tuple[gr.Run, dict[int, Any]]:
    """Run to the end, keeping the full snapshot (and the files) taken at each boundary."""
    seen: dict[int, Any] = {}
    take = Checkpointer.__call__

    def keeping(self: Checkpointer) -> None:
        take(self)
        state = self.state
        seen[state.turn + 1] = (
            comparable(state.snapshot()),
            [e.seq for e in state.events],
            {p: d for p, d in hash_files(state.workspace.root).items()},
        )
        for turn, hook in hooks.items():
            if state.turn + 1 == int(turn.removeprefix("turn_")):
                hook(self)

    Checkpointer.__call__ = keeping  # type: ignore[method-assign]
    try:
        run = agent.run_sync(instructions)
    finally:
        Checkpointer.__call__ = take  # type: ignore[method-assign]
    return run, seen


def restored(agent: gr.Agent, store: gr.Store, run: gr.Run, turn: int) -> tuple[Any, Any, Any]:
    checkpoint = load_checkpoint(store, run.run_id, turn)
    fresh = RunState(agent.definition(), workspace=run.workspace, clock=agent.clock, run_id="x")
    fresh.restore(checkpoint.snapshot, events=checkpoint.events)
    return comparable(fresh.snapshot()), [e.seq for e in fresh.events], checkpoint.files


def test_every_turn_restores_to_the_state_it_had(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.SimulatedModel(),
        workspace=tmp_path / "ws",
        store=tmp_path / "store.sqlite",
        max_iterations=200,
        policies=[gr.ReadBeforeWritePolicy()],
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Keep going."), gr.FeedbackTrigger(every_n_calls=7)
            )
        ],
    )
    run, seen = recorded(agent, QUICKSTART)
    assert run.status == "completed" and len(seen) == run.turns
    compactions = [e.turn for e in run.events if e.kind == "compaction"]
    assert compactions  # the conversation was rewritten, not only grown, at least once
    with gr.Store(tmp_path / "store.sqlite") as store:
        assert rows.checkpoint_turns(store, run.run_id) == list(range(1, run.turns + 1))
        for turn, (snapshot, seqs, files) in seen.items():
            again, again_seqs, again_files = restored(agent, store, run, turn)
            assert again == snapshot, f"turn {turn}"
            assert again_seqs == seqs, f"turn {turn}"
            assert again_files == files, f"turn {turn}"


def test_every_kind_of_block_comes_back_as_it_was(tmp_path: Path) -> None:
    nested = MappingProxyType({"path": "notes.md", "opts": MappingProxyType({"n": (1, 2.5)})})
    script = [
        ModelResponse(
            (
                ThinkingBlock("Which file first?", "sig-1"),
                RedactedThinkingBlock("opaque=="),
                TextBlock("Looking around."),
                ToolUseBlock("", "list_files", nested),
            ),
            "tool_use",
        ),
        gr.tool_call("read_file", path="missing.md"),  # an error result
        gr.tool_calls([("list_files", {}), ("read_file", {"path": "instructions.md"})]),
        gr.text("done"),
    ]
    agent = gr.Agent(
        gr.ScriptedModel(script), workspace=tmp_path / "ws", store=tmp_path / "s.sqlite"
    )
    run, seen = recorded(agent, "Look around.")
    assert len(seen) == 4
    with gr.Store(tmp_path / "s.sqlite") as store:
        for turn, (snapshot, _, _) in seen.items():
            again = restored(agent, store, run, turn)[0]
            assert again["context"] == snapshot["context"], f"turn {turn}"
        messages = seen[4][0]["context"]["messages"]
        kinds = {block["type"] for m in messages for block in m["content"]}
        assert kinds >= {"thinking", "redacted_thinking", "text", "tool_use", "tool_result"}
        assert any(b.get("is_error") for m in messages for b in m["content"])


def test_a_prompt_merged_into_a_recorded_message_reads_back_merged(tmp_path: Path) -> None:
    agent = gr.Agent(
        gr.SimulatedModel(),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
        max_iterations=200,
    )

    def rewind(checkpointer: Checkpointer) -> None:  # applied between turns: merged
        checkpointer.state.rewinds.append(("the drafts read badly", False))

    run, seen = recorded(agent, QUICKSTART, turn_30=rewind)
    assert any(e.kind == "rewind" and e.data.get("source") == "person" for e in run.events)
    with gr.Store(tmp_path / "s.sqlite") as store:
        for turn in (30, 31, 32):
            assert restored(agent, store, run, turn)[0] == seen[turn][0]


def test_an_unchanged_file_costs_nothing(tmp_path: Path) -> None:
    big = "x" * 200_000
    model = gr.ScriptedModel(
        [
            gr.tool_call("write_file", path="big.md", content=big),
            gr.tool_call("read_file", path="big.md"),
            gr.tool_call("write_file", path="big.md", content=big),  # the same bytes again
            gr.tool_call("write_file", path="small.md", content="hello\n"),
            gr.text("done"),
        ]
    )
    store = gr.Store(tmp_path / "s.sqlite")
    agent = gr.Agent(model, workspace=tmp_path / "ws", store=store, self_regulation=False)
    handed: list[int] = []  # the sizes of the blobs each checkpoint found new
    write = rows.write_checkpoint

    def counting(store: gr.Store, row: Any, blobs: dict[str, bytes]) -> int:
        handed.extend(len(b) for b in blobs.values())
        return write(store, row, blobs)

    checkpoint_module.write_checkpoint = counting  # type: ignore[assignment]
    try:
        run = agent.run_sync("Write big.md.")
    finally:
        checkpoint_module.write_checkpoint = write
    assert run.status == "ended"
    assert handed.count(len(big)) == 1  # not again after the read, nor the same bytes
    with sqlite3.connect(store.path) as conn:
        (big_blobs,) = conn.execute(
            "SELECT COUNT(*) FROM blobs WHERE size = ?", (len(big),)
        ).fetchone()
    assert big_blobs == 1  # written once, read, written again with the same bytes
    store.close()


def test_a_file_edited_by_hand_during_a_pause_is_in_the_next_checkpoint(tmp_path: Path) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files") for _ in range(4)] + [gr.text("done")])
    store = gr.Store(tmp_path / "s.sqlite")
    agent = gr.Agent(model, workspace=tmp_path / "ws", store=store, self_regulation=False)

    async def main() -> gr.Run:
        run = agent.start("List the files.")
        run.pause()
        while not run.paused:
            await __import__("asyncio").sleep(0.001)
        (tmp_path / "ws" / "by_hand.md").write_text("mine\n", encoding="utf-8")
        run.unpause()
        return await run.wait()

    run = __import__("asyncio").run(main())
    latest = load_checkpoint(store, run.run_id)
    assert "by_hand.md" in latest.files
    assert latest.read(latest.files["by_hand.md"]) == b"mine\n"
    store.close()


def test_a_failing_checkpoint_is_one_error_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(store: gr.Store, *args: object) -> int:
        with store.transaction():
            raise sqlite3.OperationalError("disk full")

    monkeypatch.setattr(checkpoint_module, "write_checkpoint", broken)
    run = gr.Agent(
        gr.SimulatedModel(),
        workspace=tmp_path / "ws",
        store=tmp_path / "s.sqlite",
        max_iterations=200,
    ).run_sync(QUICKSTART)
    assert run.status == "completed"
    errors = [e for e in run.events if e.kind == "error"]
    assert [(e.data["source"], e.data["error_type"]) for e in errors] == [
        ("checkpoint", "StoreError")
    ]
    assert "checkpoints are off for the rest of this run" in errors[0].data["message"]
    assert errors[0].data["message"].endswith("failed: disk full")
    with gr.Store(tmp_path / "s.sqlite") as store:  # every event was stored all the same
        assert len(store.events(run.run_id)) == len(run.events)
        assert rows.checkpoint_turns(store, run.run_id) == []


def test_no_store_no_checkpoints_and_the_journal_goes_at_the_end(tmp_path: Path) -> None:
    run = gr.Agent(
        gr.SimulatedModel(), workspace=tmp_path / "ws", store=False, max_iterations=200
    ).run_sync(QUICKSTART)
    assert run._loop is not None and run._loop.checkpoint is None
    run = gr.Agent(
        gr.SimulatedModel(), workspace=tmp_path / "ws2", store=tmp_path / "s", max_iterations=200
    ).run_sync(QUICKSTART)
    assert not list((tmp_path / "ws2" / ".gr").glob("writes-*"))  # completed: it goes
    with pytest.raises(gr.ConfigError, match="checkpoints takes True or False"):
        gr.Agent(checkpoints="yes")  # type: ignore[arg-type]
