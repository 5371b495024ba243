"""A run SIGKILLed around a ``once`` call resumes without running the call twice.

Each child is this process forked (no second import of gr_notebook, so 20 random instants
take seconds): it runs a three-turn job whose turns each write a note (``idempotent``), send
a message (``once``: it appends its idempotency key to ``sent.log``, outside the workspace)
and read the note back (``read``), and kills itself with SIGKILL at the chosen instant. This
process then resumes the run, and checks the counter and the records.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_calls
from gr_notebook.display.state import RunTracker
from gr_notebook.display.timeline import describe, tone_of
from gr_notebook.events import Event, ToolCallEvent, ToolIntentEvent
from gr_notebook.history.store import Store
from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelRequest, ModelResponse
from gr_notebook.tools.base import Probe, Tool, ToolContext, object_schema

TURNS = 3


class Kill:
    """Where the child kills itself: at an event, inside the n-th send after it counted, or
    after the n-th send returned and before its completion was recorded."""

    def __init__(
        self,
        event: Callable[[Event], bool] | None = None,
        during: int | None = None,
        returned: int | None = None,
    ) -> None:
        self.event, self.during, self.returned = event, during, returned
        self.sends = 0

    @staticmethod
    def now() -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def sent(root: Path) -> list[str]:
    log = root / "sent.log"
    return log.read_text().split() if log.exists() else []


def send_tool(root: Path, kill: Kill | None = None, probe: Probe | None = None) -> Tool:
    def send(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        with open(root / "sent.log", "a") as log:  # outside the workspace
            log.write(ctx.key + "\n")
        if kill is not None:
            kill.sends += 1
            if kill.sends == kill.during:
                Kill.now()
        return f"sent to {params['to']}"

    schema = object_schema(["to"], to={"type": "string"})
    return Tool("send", "Send a message.", schema, send, probe=probe)


class KillAfterReturn:
    """A policy whose ``on_result`` (after the handler returned, before the ``tool_call``
    record) kills the process at the chosen send."""

    name = "kill_after_return"

    def __init__(self, kill: Kill) -> None:
        self.kill = kill

    def check(self, tool: Tool, params: Any, *, context: Any) -> gr.PolicyDecision:
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Tool, params: Any, result: Any, *, context: Any) -> None:
        if tool.name == "send" and self.kill.sends == self.kill.returned:
            Kill.now()


def job(recipients: Sequence[str] = ("x1", "x2", "x3")) -> Callable[..., Any]:
    async def model(request: ModelRequest) -> ModelResponse:
        t = request.turn
        if t > TURNS:
            return ModelResponse((TextBlock("done"),), "end_turn")
        return ModelResponse(
            (
                ToolUseBlock(f"w{t}", "write_file", {"path": f"n{t}.txt", "content": f"note {t}"}),
                ToolUseBlock(f"s{t}", "send", {"to": recipients[t - 1]}),
                ToolUseBlock(f"r{t}", "read_file", {"path": f"n{t}.txt"}),
            ),
            "tool_use",
        )

    return model


def agent(
    root: Path,
    *,
    kill: Kill | None = None,
    probe: Probe | None = None,
    policies: Sequence[Any] = (),
    confirm: Any = None,
    model: Any = None,
    workspace: Path | None = None,
) -> gr.Agent:
    root.mkdir(parents=True, exist_ok=True)  # a store's folder must exist
    tools: list[Tool | gr.Toolset] = [send_tool(root, kill, probe)]
    extra = [KillAfterReturn(kill)] if kill is not None and kill.returned else []
    return gr.Agent(
        model or job(),
        tools=tools,
        policies=[*policies, *extra],
        confirm=confirm,
        workspace=workspace or root / "ws",
        store=root / "store.sqlite",
        max_iterations=20,
    )


def killed(root: Path, kill: Kill, **kwargs: Any) -> str:
    """Run the job in a forked child that SIGKILLs itself at ``kill``; the run's id."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            child = agent(root, kill=kill, **kwargs)

            def die(event: Event) -> None:
                if kill.event is not None and kill.event(event):
                    Kill.now()

            async def main() -> None:
                run = child.start("Send the notes.")
                os.write(write, run.run_id.encode())
                os.close(write)
                run.subscribe(die)
                await run.wait()

            asyncio.run(main())
        finally:
            os._exit(3)  # the kill never landed
    os.close(write)
    with os.fdopen(read) as pipe:
        run_id = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    return run_id


def records(root: Path, run_id: str) -> tuple[dict[str, ToolIntentEvent], set[str]]:
    """The killed run's intents by tool use id, and the ids of the calls that ended."""
    with Store(root / "store.sqlite") as store:
        events = store.events(run_id)
    intents = {e.tool_use_id: e for e in events if isinstance(e, ToolIntentEvent)}
    ended = {e.tool_use_id for e in events if isinstance(e, ToolCallEvent)}
    return intents, ended


def resumed(root: Path, run_id: str, **kwargs: Any) -> gr.Run:
    run = gr.resume(run_id, agent(root, **kwargs), store=root / "store.sqlite")
    assert run.status == "ended", run.reason
    return run


def check_after_resume(root: Path, run_id: str, run: gr.Run, *, probed: bool = False) -> None:
    """Each send ran at most once per call; every send of unknown outcome is listed as
    unverified (and only those; none when a probe told); every read and write ran to the
    end."""
    intents, ended = records(root, run_id)
    counts = Counter(sent(root))
    assert all(n == 1 for n in counts.values()), counts
    began = {i.key for i in intents.values() if i.effect == "once" and i.tool_use_id not in ended}
    unknown = set() if probed else began
    frame = run.tool_calls_df()
    listed = set(frame.loc[frame["unverified"], "key"])
    assert listed == unknown
    for t in range(1, TURNS + 1):
        rows = frame[frame["turn"] == t].set_index("tool")
        assert not rows.loc["write_file", "is_error"] and not rows.loc["read_file", "is_error"]
        assert rows.loc["read_file", "result"] == f"note {t}"
        key = rows.loc["send", "key"]
        assert counts[key] == (0 if key in began and key not in counts else 1)
    assert sorted(p.name for p in (root / "ws").glob("n*.txt")) == ["n1.txt", "n2.txt", "n3.txt"]


def is_kind(kind: str, turn: int, tool_use_id: str) -> Callable[[Event], bool]:
    return lambda e: e.kind == kind and e.turn == turn and e.data.get("tool_use_id") == tool_use_id


# -- a kill before, during and after a once call ---------------------------------------------------


def test_a_kill_before_the_call_began_runs_it_once_on_resume(tmp_path: Path) -> None:
    run_id = killed(tmp_path, Kill(event=is_kind("tool_call", 2, "w2")))
    assert "s2" not in records(tmp_path, run_id)[0]
    run = resumed(tmp_path, run_id)
    check_after_resume(tmp_path, run_id, run)
    assert len(sent(tmp_path)) == 3 and not run.tool_calls_df()["unverified"].any()


def test_a_kill_after_the_intent_and_before_the_handler_is_unverified(tmp_path: Path) -> None:
    run_id = killed(tmp_path, Kill(event=is_kind("tool_intent", 2, "s2")))
    run = resumed(tmp_path, run_id)
    check_after_resume(tmp_path, run_id, run)
    assert len(sent(tmp_path)) == 2  # it never ran, and nothing could tell: not run again
    row = run.tool_calls_df().set_index("turn").loc[2]
    row = row[row["tool"] == "send"].iloc[0]
    assert row["unverified"] and row["recovery"] == "unverified" and row["is_error"]
    assert row["result"].startswith("Outcome unknown: this send call of turn 2 was cut off")
    assert not row["result"].endswith("…")  # whole in the record too


def test_a_kill_during_the_call_is_unverified_and_not_run_again(tmp_path: Path) -> None:
    run_id = killed(tmp_path, Kill(during=2))
    run = resumed(tmp_path, run_id)
    check_after_resume(tmp_path, run_id, run)
    assert len(sent(tmp_path)) == 3
    told = [e for e in run.events if e.kind == "tool_recovered" and e.data["tool"] == "send"]
    assert [e.data["verdict"] for e in told] == ["unverified"]
    assert describe(told[0]).startswith("send UNVERIFIED: outcome unknown")
    assert tone_of(told[0]) == "alert"
    tracker = RunTracker()  # the dashboard: its timeline and its tool calls panel
    for event in run.events:
        tracker.add(event)
    (line,) = [e for e in tracker.timeline if e.kind == "tool_recovered" and e.tone == "alert"]
    assert "UNVERIFIED" in line.text
    (call,) = [c for c in tracker.calls if c.outcome == "unverified"]
    assert call.turn == 2 and call.tool == "send"
    assert "UNVERIFIED: outcome unknown" in render_calls(list(tracker.calls))


def test_a_kill_after_the_call_returned_before_its_record_is_unverified(tmp_path: Path) -> None:
    run_id = killed(tmp_path, Kill(returned=2))
    intents, ended = records(tmp_path, run_id)
    assert "s2" in intents and "s2" not in ended
    run = resumed(tmp_path, run_id)
    check_after_resume(tmp_path, run_id, run)
    assert len(sent(tmp_path)) == 3


def test_a_kill_after_the_record_gives_the_recorded_result(tmp_path: Path) -> None:
    run_id = killed(tmp_path, Kill(event=is_kind("tool_call", 2, "s2")))
    run = resumed(tmp_path, run_id)
    check_after_resume(tmp_path, run_id, run)
    frame = run.tool_calls_df()
    send2 = frame[(frame["turn"] == 2) & (frame["tool"] == "send")].iloc[0]
    assert send2["recovery"] == "recorded" and send2["result"] == "sent to x2"
    assert not frame["unverified"].any() and len(sent(tmp_path)) == 3


def test_the_intent_is_in_the_store_before_the_handler_runs(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def look(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        with Store(tmp_path / "store.sqlite") as other:  # another connection: committed
            (run_id,) = other.run_ids()
            seen.append([e.kind for e in other.events(run_id)][-2:])
        return "ok"

    tool = Tool("look", "Look.", object_schema(), look)
    model = gr.ScriptedModel([gr.tool_call("look"), gr.text("done")])
    run = gr.Agent(
        model, tools=[tool], workspace=tmp_path / "ws", store=tmp_path / "store.sqlite"
    ).run_sync("look")
    assert run.status == "ended"
    assert seen[0][-1] == "tool_intent"
    intent = next(e for e in run.events if isinstance(e, ToolIntentEvent))
    assert intent.effect == "once" and intent.key.startswith("gr-")


# -- 20 seeded random instants ---------------------------------------------------------------------


def instants(events: int) -> list[Kill]:
    rng = random.Random(42)
    kills = []
    for _ in range(20):
        where = rng.choice(["event", "event", "during", "returned"])
        if where == "event":
            seq = rng.randrange(8, events)
            kills.append(Kill(event=lambda e, seq=seq: e.seq == seq))
        elif where == "during":
            kills.append(Kill(during=rng.randint(1, TURNS)))
        else:
            kills.append(Kill(returned=rng.randint(1, TURNS)))
    return kills


def test_a_run_killed_at_20_random_instants_never_sends_twice(tmp_path: Path) -> None:
    whole = agent(tmp_path / "whole").run_sync("Send the notes.")
    assert whole.status == "ended"
    for i, kill in enumerate(instants(len(whole.events) - 2)):
        root = tmp_path / f"k{i}"
        root.mkdir()
        run_id = killed(root, kill)
        check_after_resume(root, run_id, resumed(root, run_id))


# -- a probe decides -------------------------------------------------------------------------------


def test_a_probe_that_finds_the_effect_keeps_the_call_from_running_again(tmp_path: Path) -> None:
    def probe(ctx: ToolContext, params: Mapping[str, Any]) -> bool:
        return ctx.key in sent(tmp_path)

    run_id = killed(tmp_path, Kill(during=2), probe=probe)
    run = resumed(tmp_path, run_id, probe=probe)
    assert len(sent(tmp_path)) == 3 and Counter(sent(tmp_path)).most_common(1)[0][1] == 1
    frame = run.tool_calls_df()
    send2 = frame[(frame["turn"] == 2) & (frame["tool"] == "send")].iloc[0]
    assert send2["recovery"] == "happened" and not send2["unverified"]
    assert "took effect before the run was interrupted" in send2["result"]


def test_a_probe_that_finds_nothing_lets_the_call_run_with_the_same_key(tmp_path: Path) -> None:
    def probe(ctx: ToolContext, params: Mapping[str, Any]) -> bool:
        return ctx.key in sent(tmp_path)

    run_id = killed(tmp_path, Kill(event=is_kind("tool_intent", 2, "s2")), probe=probe)
    key = records(tmp_path, run_id)[0]["s2"].key
    run = resumed(tmp_path, run_id, probe=probe)
    check_after_resume(tmp_path, run_id, run, probed=True)
    assert sent(tmp_path).count(key) == 1
    frame = run.tool_calls_df()
    assert frame.loc[(frame["turn"] == 2) & (frame["tool"] == "send"), "recovery"].item() == "rerun"


def test_a_probe_that_raises_leaves_the_outcome_unknown(tmp_path: Path) -> None:
    def probe(ctx: ToolContext, params: Mapping[str, Any]) -> bool:
        raise ConnectionError("the mail server is down")

    run_id = killed(tmp_path, Kill(during=2), probe=probe)
    run = resumed(tmp_path, run_id, probe=probe)
    check_after_resume(tmp_path, run_id, run)
    (told,) = [e for e in run.events if e.kind == "tool_recovered" and e.data["tool"] == "send"]
    assert told.data["verdict"] == "unverified" and told.data["by"] == "probe"
    assert "mail server is down" in told.data["reason"]


def test_a_person_who_attends_is_asked_about_an_unknown_outcome(tmp_path: Path) -> None:
    asked: list[str] = []

    def confirm(request: Any) -> bool:
        asked.append(request.reason)
        return False

    run_id = killed(tmp_path, Kill(during=2))
    run = resumed(tmp_path, run_id, confirm=confirm)
    check_after_resume(tmp_path, run_id, run)
    assert len(asked) == 1 and "nothing shows whether it took effect" in asked[0]
    (told,) = [e for e in run.events if e.kind == "tool_recovered" and e.data["tool"] == "send"]
    assert told.data["by"] == "person"


# -- an approval holds only under the same policies ------------------------------------------------


@pytest.mark.parametrize("changed", [False, True])
def test_an_approval_holds_on_resume_only_under_the_same_policies(
    tmp_path: Path, changed: bool
) -> None:
    asked: list[str] = []

    def yes(request: Any) -> bool:  # writes yes; a send of unknown outcome: not again
        asked.append(request.tool)
        return request.tool == "write_file"

    before = [gr.ApprovalPolicy(tools=["write_file"])]
    run_id = killed(tmp_path, Kill(during=1), policies=before, confirm=yes)
    assert records(tmp_path, run_id)[0]["w1"].approved_under is not None
    after = [gr.ApprovalPolicy(tools=["write_file"], timeout_s=60.0)] if changed else before
    run = resumed(tmp_path, run_id, policies=after, confirm=yes)
    check_after_resume(tmp_path, run_id, run)
    # turn 1's write ran before the kill, with a person's approval; on resume it runs again
    # (idempotent), asked again only under changed policies; turns 2 and 3 ask as new calls
    writes = ["write_file"] * 2
    assert asked == (["write_file", "send", *writes] if changed else ["send", *writes])


# -- a fork knows what its parent did --------------------------------------------------------------


def test_a_fork_knows_the_once_calls_its_parent_made_after_the_fork(tmp_path: Path) -> None:
    parent = agent(tmp_path).run_sync("Send the notes.")
    assert parent.status == "ended"
    keys = {
        e.turn: e.key
        for e in parent.events
        if isinstance(e, ToolIntentEvent) and e.effect == "once"
    }
    same = parent.fork(2, agent(tmp_path, workspace=tmp_path / "same"))
    frame = same.tool_calls_df()
    sends = frame[frame["tool"] == "send"].set_index("turn")
    assert sends.loc[2, "key"] == keys[2] and sends.loc[3, "key"] == keys[3]
    assert sends.loc[2, "parent_made"] and sends.loc[3, "parent_made"]
    assert not sends.loc[1, "parent_made"]  # before the fork: the parent's own, copied
    (told,) = [e for e in same.events if e.kind == "parent_calls"]
    assert [c["key"] for c in told.data["calls"]] == [keys[2], keys[3]]
    assert "made 2 once calls after this turn" in describe(told)

    other = agent(tmp_path, model=job(("x1", "x2", "y3")), workspace=tmp_path / "other")
    changed = parent.fork(2, other).tool_calls_df()
    sends = changed[changed["tool"] == "send"].set_index("turn")
    assert sends.loc[2, "key"] == keys[2] and sends.loc[3, "key"] != keys[3]
    assert sends.loc[2, "parent_made"] and not sends.loc[3, "parent_made"]
