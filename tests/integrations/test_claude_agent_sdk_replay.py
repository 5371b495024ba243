"""``gr.replay_guardrails`` on Claude Agent SDK sessions recorded by the bridge: the policies
see Claude's calls under gr's names, as they do live, and with no checkpoints the guardrails
that read files cannot tell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.review.guardrail_replay import CANNOT_TELL
from tests.integrations.conftest import sdk_session

SCRIPT = [
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.tool_call("read_file", path="data.md"),
    gr.tool_call("write_file", path="data.md", content="new\n"),
    gr.text("Done."),
]
FIRST_READ = gr.SequentialDependencyPolicy({"write_file": {"read_file"}})


def agent_at(ws: Path, **kwargs: Any) -> gr.Agent:
    ws.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("store", ws.parent / "store.sqlite")
    return gr.Agent(workspace=ws, self_regulation=False, **kwargs)


async def test_a_policy_live_in_a_session_replays_to_its_live_decisions(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    session = await sdk_session(agent_at(ws, policies=[FIRST_READ]), SCRIPT, ws)
    run = session.run
    await run.wait()
    live = run.policy_df()
    # both Writes: the Read of a file not written yet fails, so no read has succeeded
    assert live["decision"].tolist() == ["deny", "allow", "deny"]
    replay = gr.replay_guardrails(run, policies=[FIRST_READ])
    frame = replay.df
    assert frame["tool"].tolist() == ["Write", "Read", "Write"]
    assert frame["decision"].tolist() == ["deny", "allow", "deny"]
    assert (frame["decision"] == frame["live"]).all()
    assert replay.first_divergence(run) is None
    # from the store, by id
    store = tmp_path / "store.sqlite"
    stored = gr.replay_guardrails([run.run_id], store=store, policies=[FIRST_READ])
    assert stored.df["decision"].tolist() == frame["decision"].tolist()


async def test_a_session_has_no_checkpoints_so_file_readers_cannot_tell(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    (ws / "data.md").write_text("old\n")
    session = await sdk_session(agent_at(ws), SCRIPT, ws)
    run = session.run
    await run.wait()
    replay = gr.replay_guardrails(
        run,
        policies=[gr.ReadBeforeWritePolicy()],
        task_completion_checker=gr.FileOutputChecker(["data.md"]),
    )
    frame = replay.df
    writes = frame[frame["tool"] == "Write"]
    assert len(writes) == 2 and (writes["decision"] == CANNOT_TELL).all()
    assert (frame.loc[frame["tool"] == "Read", "decision"] == "allow").all()
    [stop] = frame[frame["kind"] == "checker"].to_dict("records")
    assert (stop["point"], stop["decision"], stop["live"]) == ("stop", CANNOT_TELL, "accept")
    assert replay.first_divergence(run) is None
