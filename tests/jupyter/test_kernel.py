"""In a real kernel: what only ipykernel shows (comm messages, parent headers, saved state)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.jupyter.conftest import collect, execute, replies

JOB = "# Job\n\n" + "".join(
    f"## Part {p}\n" + "".join(f"- Write {p}.{s}\n" for s in range(1, 6)) + "\n"
    for p in range(1, 7)
)
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
Kernel = tuple[KernelManager, BlockingKernelClient]


def test_stop_button_works_while_a_blocking_agent_cell_runs(
    real_kernel: Kernel, tmp_path: Path
) -> None:
    _, client = real_kernel
    setup = (
        "%load_ext gr_notebook\nimport gr_notebook as gr\n"
        "slow = gr.Agent(gr.SimulatedModel(latency=0.05), workspace='ws', store=False, "
        "max_iterations=500)"
    )
    assert execute(client, setup) == ""
    msg_id = client.execute(f"%%agent --agent slow --out r\n{JOB}")
    clicked: list[str] = []

    def click_stop(msg: dict[str, Any]) -> None:
        # The dashboard's buttons arrive as comm_open messages; click Stop after a moment.
        data = msg["content"].get("data", {})
        state = data.get("state", {})
        if msg["msg_type"] == "comm_open" and state.get("description") == "Stop" and not clicked:
            clicked.append(msg["content"]["comm_id"])
            time.sleep(0.5)
            click = {"method": "custom", "content": {"event": "click"}}
            request = client.session.msg("comm_msg", {"comm_id": clicked[0], "data": click})
            client.shell_channel.send(request)

    output = collect(client, msg_id, timeout=60, on_message=click_stop)
    assert clicked, "the dashboard's Stop button never appeared"
    assert "cannot enter context" not in output and "Traceback" not in output, output
    status = execute(client, "print(r.status, '|', r.reason, '|', r.turns)")
    state, reason, turns = (part.strip() for part in status.split("|"))
    assert (state, reason) == ("cancelled", "stopped by the person")
    assert 0 < int(turns) < 100  # stopped well before the ~100-turn job could end


def test_a_background_run_leaves_its_final_state_in_the_saved_notebook(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext gr_notebook\nimport gr_notebook as gr\n"
            "slow = gr.Agent(gr.SimulatedModel(latency=0.01), store=False, max_iterations=300)"
        ),
        nbformat.v4.new_code_cell(f"%%agent --background --agent slow --out bg\n{JOB}"),
        nbformat.v4.new_code_cell("await bg.wait()\nbg.status"),
    ]
    NotebookClient(
        notebook,
        timeout=60,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        store_widget_state=True,
    ).execute()
    assert notebook.cells[2].outputs[0]["data"]["text/plain"] == "'completed'"
    # The launch cell's dashboard was replaced, as the run ended during a later cell, by the
    # run as it ended: static HTML and text that a saved notebook shows without a kernel.
    dashboard = notebook.cells[1].outputs[0]
    assert set(dashboard["data"]) == {"text/html", "text/plain"}, dashboard["data"].keys()
    assert ">completed</span>" in dashboard["data"]["text/html"]
    assert dashboard["data"]["text/plain"].startswith("Run ")
    assert "Timeline (newest first):" in dashboard["data"]["text/plain"]
    states = notebook.metadata["widgets"][WIDGET_STATE]["state"]
    headers = [
        m["state"]["value"]
        for m in states.values()
        if "gr-header" in str(m["state"].get("value", ""))
    ]
    # Without a fresh context for the run's task, ipykernel 7 credits the updates to the
    # finished launch cell and nbclient drops them: the saved header would say "running".
    assert len(headers) == 1 and ">completed</span>" in headers[0], headers
    meters = [v["state"]["value"] for v in states.values() if "gr-meters" in str(v["state"])]
    assert "Iterations: 0 /" not in meters[0]


def test_a_views_replacement_reaches_the_cell_that_showed_it_and_the_cell_running_now(
    real_kernel: Kernel,
) -> None:
    """JupyterLab applies an update only to the cell its parent header names; nbclient reads
    only the messages of the cell it runs: a background run's end is sent to both."""
    _, client = real_kernel
    setup = (
        "%load_ext gr_notebook\nimport gr_notebook as gr\n"
        "slow = gr.Agent(gr.SimulatedModel(latency=0.01), store=False, max_iterations=300)"
    )
    assert execute(client, setup) == ""
    launch = client.execute(f"%%agent --background --agent slow --out bg\n{JOB}")
    shown = [m for m in replies(client, launch) if m["msg_type"] == "display_data"]
    [dashboard] = [m for m in shown if WIDGET_VIEW in m["content"]["data"]]
    display_id = dashboard["content"]["transient"]["display_id"]
    updates: list[dict[str, Any]] = []

    def keep(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "update_display_data":
            updates.append(msg)

    wait = client.execute("await bg.wait()")
    assert collect(client, wait, timeout=60, on_message=keep) == ""
    assert {m["parent_header"]["msg_id"] for m in updates} == {launch, wait}
    for update in updates:
        assert update["content"]["transient"]["display_id"] == display_id
        data = update["content"]["data"]
        assert set(data) == {"text/html", "text/plain"} and ">completed</span>" in data["text/html"]


def test_agent_cells_nested_in_time_and_capture_run_in_a_kernel(
    real_kernel: Kernel,
) -> None:
    _, client = real_kernel
    short = "# Job\n\n## A\n- Write a\n- Write b\n- Write c\n- Write d\n- Write e\n"
    assert execute(client, "%load_ext gr_notebook") == ""
    timed = execute(client, f"%%time\n%%agent --max-iterations 300 --out timed\n{short}")
    assert "Wall time" in timed and "Traceback" not in timed, timed
    captured = execute(client, f"%%capture cap\n%%agent --max-iterations 300 --out kept\n{short}")
    assert "Traceback" not in captured, captured
    assert execute(client, "print(timed.status, kept.status)").strip() == "completed completed"


@pytest.mark.parametrize("outer", ["", "%%time\n"], ids=["top-level-await", "nested-blocking"])
def test_a_kernel_interrupt_ends_a_blocking_agent_cell_interrupted(
    real_kernel: Kernel, outer: str
) -> None:
    """Ctrl-C in a notebook: the run ends ``interrupted`` with run_finished, and the cell
    shows the interrupt; under %%time the cell blocks instead, waiting for the run on a worker
    thread's loop (``run_blocking``)."""
    manager, client = real_kernel
    setup = (
        "%load_ext gr_notebook\nimport gr_notebook as gr\n"
        "slow = gr.Agent(gr.SimulatedModel(latency=0.02), workspace='ws', "
        "store='runs.sqlite', max_iterations=500)"
    )
    assert execute(client, setup) == ""
    msg_id = client.execute(f"{outer}%%agent --agent slow --out r\n{JOB}")
    updates: list[str] = []

    def interrupt_once_running(msg: dict[str, Any]) -> None:
        # the dashboard's updates show the run is under way; then press Ctrl-C, once
        if msg["msg_type"] == "comm_msg":
            updates.append(msg["msg_id"])
            if len(updates) == 10:
                manager.interrupt_kernel()

    output = collect(client, msg_id, timeout=60, on_message=interrupt_once_running)
    assert len(updates) >= 10, "the run never got going"
    assert "KeyboardInterrupt" in output, output
    report = execute(
        client,
        "await r.wait()\nprint(r.status, '|', r.events[-1].kind, '|', r.turns, '|', "
        "gr.runs_df('runs.sqlite').status.tolist())",
    )
    status, last, turns, stored = (part.strip() for part in report.split("|"))
    assert (status, last) == ("interrupted", "run_finished"), report
    assert stored == "['interrupted']"
    assert int(turns) < 100  # stopped well before the ~100-turn job could end


def test_cells_queued_behind_a_blocking_run_wait_their_turn(
    real_kernel: Kernel,
) -> None:
    """JupyterLab's Run All sends every cell at once; ipykernel 7 runs each as a task on its
    loop. A cell that blocks on a run must not step the next cell inside itself."""
    _, client = real_kernel
    cells = [
        "import gr_notebook as gr\nagent = gr.Agent('simulated', store=False, max_iterations=300)",
        f"run = agent.run_sync({JOB!r})\nprint('first', run.status)",
        "print('second', run.turns > 0)",
        f"again = agent.run_sync({JOB!r})\nprint('third', again.status)",
    ]
    ids = [client.execute(code) for code in cells]  # all queued before any has run
    outputs = [collect(client, msg_id, timeout=120) for msg_id in ids]
    for output in outputs:
        assert "Traceback" not in output and "already entered" not in output, output
    assert [o.strip() for o in outputs[1:]] == ["first completed", "second True", "third completed"]


def subshell(client: BlockingKernelClient) -> str:
    """A new kernel subshell's id (JupyterLab 4.6 sends widget messages on one)."""
    client.control_channel.send(client.session.msg("create_subshell_request", {}))
    reply = client.get_control_msg(timeout=10)
    assert reply["content"]["status"] == "ok", reply
    return str(reply["content"]["subshell_id"])


@pytest.mark.parametrize(
    ("outer", "stopped"),
    [("", True), ("%%time\n", False)],
    ids=["top-level-await", "nested-blocking"],
)
def test_a_stop_clicked_on_a_subshell_reaches_only_a_cell_that_awaits(
    real_kernel: Kernel, outer: str, stopped: bool
) -> None:
    """Decision 94: ipykernel hands a widget's message to the shell that last sent on the
    widget, the cell's own. A cell that awaits serves it at once; a blocking cell's thread
    waits, so the click comes too late, and a blocking cell offers no Approve/Deny."""
    _, client = real_kernel
    setup = (
        "%load_ext gr_notebook\nimport gr_notebook as gr\n"
        "slow = gr.Agent(gr.SimulatedModel(latency=0.03), workspace='ws', store=False, "
        "max_iterations=500)"
    )
    assert execute(client, setup) == ""
    on = subshell(client)
    msg_id = client.execute(f"{outer}%%agent --agent slow --out r\n{JOB}")
    clicked: list[str] = []

    def click_stop_on_the_subshell(msg: dict[str, Any]) -> None:
        state = msg["content"].get("data", {}).get("state", {})
        if msg["msg_type"] == "comm_open" and state.get("description") == "Stop" and not clicked:
            clicked.append(msg["content"]["comm_id"])
            time.sleep(0.3)
            click = {"method": "custom", "content": {"event": "click"}}
            request = client.session.msg("comm_msg", {"comm_id": clicked[0], "data": click})
            request["header"]["subshell_id"] = on
            client.shell_channel.send(request)

    output = collect(client, msg_id, timeout=60, on_message=click_stop_on_the_subshell)
    assert clicked and "Traceback" not in output, output
    status = execute(client, "print(r.status, '|', r.turns)")
    state, turns = (part.strip() for part in status.split("|"))
    if stopped:
        assert state == "cancelled" and int(turns) < 60, status
    else:
        assert state == "completed" and int(turns) > 60, status  # the ~90-turn job went on
