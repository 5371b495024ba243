"""``%agent resume RUN_ID`` and ``%agent fork --turn N --agent VAR``, the dashboard's fork
controls, ``%agent fork``'s picker and a recorded run's dashboard, through IPython's testing
shell: no kernel, no browser."""

from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Any

import pytest
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output
from ipywidgets.widgets.widget import _instances

import gr_notebook as gr
from gr_notebook.examples import QUICKSTART
from gr_notebook.jupyter.widgets import Dashboard, ForkPicker
from gr_notebook.runner import started_by
from tests.review.test_timetravel import Interrupt
from tests.test_run_controls import until

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def agent(root: Path, model: Any = None, **kwargs: Any) -> gr.Agent:
    return gr.Agent(
        model or gr.SimulatedModel(),
        workspace=root / "ws",
        store=root / "store.sqlite",
        max_iterations=200,
        **kwargs,
    )


def line(ip: InteractiveShell, text: str) -> Any:
    with capture_output() as shown:
        ip.run_line_magic("agent", text)
    return shown


def test_agent_resume_run_id_continues_an_interrupted_run(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    with pytest.raises(KeyboardInterrupt):
        agent(tmp_path, Interrupt(17)).run_sync(QUICKSTART)
    stopped = gr.current_run()
    assert stopped is not None and stopped.status == "interrupted"
    del started_by[stopped.run_id]  # a new kernel: the agent must be named
    ip.user_ns["again"] = agent(tmp_path)
    with pytest.raises(UsageError, match="pass it"):
        ip.run_line_magic("agent", f"resume {stopped.run_id} --store store.sqlite")
    shown = line(ip, f"resume {stopped.run_id} --agent again --store store.sqlite --out back")
    resumed = ip.user_ns["back"]
    assert resumed.status == "completed" and resumed.run_id != stopped.run_id
    assert f"Run {stopped.run_id} resumed as run {resumed.run_id}: completed" in shown.stdout
    assert shown.outputs and "completed" in shown.outputs[-1].data["text/plain"]


def test_agent_fork_plays_a_turn_again_under_another_agent(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    parent = agent(tmp_path).run_sync(QUICKSTART)
    ip.user_ns["parent"] = parent
    ip.user_ns["strict"] = gr.Agent(
        gr.SimulatedModel(), max_iterations=200, policies=[gr.ReadBeforeWritePolicy()]
    )
    shown = line(ip, "fork --turn 12 --agent strict --workspace forked --run parent")
    fork = ip.user_ns["fork"]
    assert f"Run {parent.run_id} forked at turn 12 as run {fork.run_id}" in shown.stdout
    assert fork.status == "completed" and fork.workspace.root == (tmp_path / "forked").resolve()
    (event,) = [e for e in fork.events if e.kind == "run_resumed"]
    assert (event.parent_run_id, event.parent_turn, event.relation) == (parent.run_id, 12, "fork")
    assert fork.events[0].kind == "run_started"


MISUSE = [
    ("fork --workspace elsewhere", "--workspace goes with --turn N"),
    ("fork --turn twelve", "invalid int value"),
    ("fork --turn 99", "has no turn 99: its checkpoints are of turns 1–"),
    ("fork --turn 3 --agent nobody", "no variable named 'nobody'"),
    ("fork --turn 3 --agent number", "number is a int, not a gr.Agent"),
    ("fork --turn 3 --out 9lives", "not a variable name"),
    ("resume no-such-run", "there is no run store at gr_runs/store.sqlite; pass store="),
    ("resume no-such-run --store store.sqlite", "no run 'no-such-run' in run store"),
    ("resume no-such-run --frob", "unrecognized arguments: --frob; type %agent resume RUN_ID"),
]


@pytest.mark.parametrize(("text", "message"), MISUSE)
def test_misuse_is_one_line(ip: InteractiveShell, tmp_path: Path, text: str, message: str) -> None:
    agent(tmp_path).run_sync(QUICKSTART)  # the latest run: %agent fork forks it
    ip.user_ns["number"] = 3
    with capture_output() as captured:
        result = ip.run_cell(f"%agent {text}")
    assert isinstance(result.error_in_exec or result.error_before_exec, UsageError)
    shown = captured.stderr.strip()
    assert message in shown, shown
    assert shown.startswith("UsageError: ") and "\n" not in shown


def test_the_dashboard_forks_at_a_turn_picked_on_its_timeline(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    parent = agent(tmp_path).run_sync(QUICKSTART)
    ip.user_ns["strict"] = gr.Agent(gr.SimulatedModel(), max_iterations=200)
    dash = Dashboard(parent)
    turns = [turn for _, turn in dash.fork_turn.options]
    assert turns and turns == sorted(turns, reverse=True)  # the timeline's, newest first
    assert ("strict", "strict") in dash.fork_agent.options
    dash.fork_turn.value = turns[-1]
    dash.fork_agent.value = "strict"
    with capture_output() as shown:
        dash.fork_button.click()
    fork = ip.user_ns["fork"]
    assert fork.status == "completed"
    # The fork has its own dashboard: it ended here (no loop ran), so it is static.
    [board] = shown.outputs
    assert board.data == Dashboard.for_run(fork).static_bundle()
    (event,) = [e for e in fork.events if e.kind == "run_resumed"]
    assert event.parent_turn == turns[-1]
    assert f"Forked at turn {turns[-1]} as run {fork.run_id}" in dash.log_panel.value
    assert dash.fork(turn=999) is None
    assert "has no turn 999" in dash.log_panel.value


def test_agent_fork_without_a_turn_shows_a_picker_that_forks(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    """A finished run's dashboard is static: Fork… for it is a picker in a cell."""
    parent = agent(tmp_path).run_sync(QUICKSTART)
    ip.user_ns.update(parent=parent, strict=gr.Agent(gr.SimulatedModel(), max_iterations=200))
    shown = line(ip, "fork --agent strict --out again --run parent")
    [picker] = shown.outputs
    assert WIDGET_VIEW in picker.data and picker.data["text/plain"].startswith("Fork… run")
    view = _instances[picker.data[WIDGET_VIEW]["model_id"]]
    assert isinstance(view, ForkPicker)
    turns = [turn for _, turn in view.turn.options]
    assert turns and turns == sorted(turns, reverse=True) and view.turn.value == turns[0]
    assert view.agent.value == "strict"
    view.turn.value = turns[-1]
    with capture_output() as clicked:
        view.button.click()
    fork = ip.user_ns["again"]
    assert fork.status == "completed"
    [board] = clicked.outputs  # under the picker, the fork's dashboard
    assert board.data == Dashboard.for_run(fork).static_bundle()
    (event,) = [e for e in fork.events if e.kind == "run_resumed"]
    assert (event.parent_run_id, event.parent_turn) == (parent.run_id, turns[-1])
    assert f"Forked at turn {turns[-1]} as run {fork.run_id}" in view.message.value


def test_a_recorded_run_opens_read_only_from_its_id_and_store(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    """``gr.Dashboard(run_id, store=...)`` in a kernel that never ran it: the run as it
    ended, nothing to steer, and a fork that works under an agent of the notebook."""
    live = agent(tmp_path).run_sync(QUICKSTART)
    ended = Dashboard(live).static_bundle()
    run_id = live.run_id
    del started_by[run_id]  # a new kernel: the agent that ran it is gone
    board = gr.Dashboard(run_id, store=tmp_path / "store.sqlite")
    run = board.run
    assert run is not live and run.read_only and run.done and run.status == "completed"
    assert board.static_bundle() == ended  # its dashboard reads as the live one ended
    assert run.todos == live.todos and run.job == live.job and run.plan == live.plan
    assert run.summary() == live.summary()
    with capture_output() as shown:
        ip.user_ns["board"] = board
        ip.run_cell("board")
    [static] = shown.outputs
    assert static.data == ended  # static: nothing of it is live
    for steer in (run.pause, run.complete_todo, lambda: run.rewind("no")):
        with pytest.raises(gr.RunError, match=r"has finished \(completed\); fork it"):
            steer()
    assert len(run.events_df()) == len(live.events) and len(run.turns_df()) == live.turns

    assert board.fork(turn=12) is None  # no agent: say how to give one
    assert "an agent this kernel does not have" in board.log_panel.value
    ip.user_ns["strict"] = gr.Agent(gr.SimulatedModel(), max_iterations=200)
    assert board.fork_agent.options == (("strict", "strict"),)
    turn = board.fork_turn.options[-1][1]  # the timeline's oldest turn
    board.fork_turn.value = turn
    forked = board.fork()
    assert forked is ip.user_ns["fork"] and forked.status == "completed"
    assert forked.store is not None and forked.store.path == (tmp_path / "store.sqlite")
    (event,) = [e for e in forked.events if e.kind == "run_resumed"]
    assert (event.parent_run_id, event.parent_turn) == (run_id, turn)


def test_a_recorded_run_that_is_not_there_says_where_it_looked(tmp_path: Path) -> None:
    agent(tmp_path).run_sync(QUICKSTART)
    with pytest.raises(gr.RunError, match=r"no run .nope. in run store .*its runs include: "):
        gr.Dashboard("nope", store=tmp_path / "store.sqlite")
    with pytest.raises(gr.RunError, match="there is no run store at"):
        gr.Dashboard("nope", store=tmp_path / "elsewhere.sqlite")
    with pytest.raises(TypeError, match=r"takes a gr\.Run or a run id"):
        gr.Dashboard(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"open a recorded run with gr\.Dashboard\(run_id"):
        gr.Dashboard.for_run("nope")  # type: ignore[arg-type]


class CellPublisher(DisplayPublisher):  # type: ignore[misc]
    """A kernel's display publisher as far as cells go: each output sent, with the cell (the
    parent header) it went to, set per context as ipykernel's is."""

    def __init__(self) -> None:
        super().__init__()
        self.cell: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("cell")
        self.sent: list[tuple[str | None, dict[str, Any], str | None, bool]] = []

    @property
    def parent_header(self) -> dict[str, Any]:
        return self.cell.get({})

    def set_thread_parent(self, parent: dict[str, Any]) -> Any:
        return self.cell.set(parent)

    def reset_thread_parent(self, token: Any) -> None:
        self.cell.reset(token)

    def publish(self, data: Any, metadata: Any = None, source: Any = None, **kw: Any) -> None:
        display_id = (kw.get("transient") or {}).get("display_id")
        cell = self.parent_header.get("msg_id")
        self.sent.append((cell, dict(data), display_id, bool(kw.get("update"))))


async def test_a_fork_clicked_on_a_live_dashboard_shows_its_own_under_it(
    ip: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Fork button of a live dashboard shows the fork's dashboard in the dashboard's
    cell, where the person clicked (the click itself comes in no cell), live while the fork
    runs and the run as it ended once it has; ``fork()`` from a cell shows it in that cell."""
    cells = CellPublisher()
    monkeypatch.setattr(ip, "display_pub", cells)
    run = agent(tmp_path, gr.SimulatedModel(latency=0.002)).start(QUICKSTART)
    await until(lambda: run.turns >= 4)
    board = Dashboard(run)
    token = cells.set_thread_parent({"msg_id": "launch", "msg_type": "execute_request"})
    display(board)
    cells.reset_thread_parent(token)
    assert [(c, u) for c, _, _, u in cells.sent] == [("launch", False)]

    cells.set_thread_parent({"msg_id": "click", "msg_type": "comm_msg"})
    board.fork_open.click()
    await until(lambda: bool(board.fork_turn.options), limit=20)  # a turn worth forking at
    board.fork_button.click()
    fork = ip.user_ns.get("fork")
    assert fork is not None, board.log_panel.value
    assert not fork.done  # it goes on in the background
    cell, data, display_id, update = cells.sent[1]
    assert (cell, update) == ("launch", False)
    assert (
        WIDGET_VIEW in data
        and data["text/plain"] == f"Dashboard of run {fork.run_id} (a live widget)"
    )
    await fork.wait()
    ended = [(c, d) for c, d, i, u in cells.sent if u and i == display_id]
    assert [c for c, _ in ended] == ["launch"]  # no cell ran since: only the dashboard's
    assert ended[0][1] == Dashboard.for_run(fork).static_bundle()
    assert ">completed</span>" in ended[0][1]["text/html"]

    cells.set_thread_parent({"msg_id": "later", "msg_type": "execute_request"})
    again = board.fork()  # from a cell's code: in that cell
    assert again is not None
    assert cells.sent[-1][0] == "later" and again.run_id in cells.sent[-1][1]["text/plain"]
    run.cancel("done with it")
    await run.wait()
    await again.wait()
