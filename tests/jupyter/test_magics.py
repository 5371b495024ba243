"""The magics, through IPython's in-process testing shell: no kernel, no browser."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import gr_notebook as gr
from gr_notebook import run as run_module
from gr_notebook.jupyter.cells import TopLevelAwait
from tests.test_run_controls import until

JOB = "# Job\n\n## Drafting\n- Write a\n- Write b\n- Write c\n- Write d\n- Write e\n"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def run_cell(ip: InteractiveShell, source: str) -> tuple[Any, Any]:
    with capture_output() as captured:
        result = ip.run_cell(source)
    return result, captured


def test_agent_cell_runs_the_job_and_binds_the_run(ip: InteractiveShell) -> None:
    result, captured = run_cell(ip, f"%%agent --max-iterations 300\n{JOB}")
    assert result.success, captured.stderr
    run = ip.user_ns["run"]
    assert isinstance(run, gr.Run) and gr.current_run() is run
    assert run.status == "completed" and run.job is not None
    assert run.workspace.read_text("instructions.md") == JOB.strip() + "\n"
    dashboard, ended, final = captured.outputs
    assert WIDGET_VIEW in dashboard.data  # the live dashboard, shown while the job ran
    assert ended.update and WIDGET_VIEW not in ended.data  # replaced by the run as it ended
    assert final.data["text/plain"] == repr(run)  # then the final state
    assert "completed" in final.data["text/plain"]


def test_agent_cell_options_reach_the_agent(ip: InteractiveShell, tmp_path: Path) -> None:
    source = (
        "%%agent --model simulated:diligent --workspace ws --name tutor --max-iterations 4 "
        f"--out short\n{JOB}"
    )
    result, captured = run_cell(ip, source)
    assert result.success, captured.stderr
    run = ip.user_ns["short"]
    assert "run" not in ip.user_ns
    assert run.status == "budget_exhausted" and run.turns == 4
    assert run.workspace.root == (tmp_path / "ws").resolve()
    started = next(e for e in run.events if e.kind == "run_started")
    assert started.data["config"]["name"] == "tutor"
    assert started.data["model"] == "simulated:diligent"


def test_agent_option_takes_a_prebuilt_agent(ip: InteractiveShell, tmp_path: Path) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files"), gr.text("all done")])
    ip.user_ns["mine"] = gr.Agent(model, workspace=tmp_path / "mine", store=False)
    result, captured = run_cell(ip, "%%agent --agent mine --out r\nList the files.")
    assert result.success, captured.stderr
    assert ip.user_ns["r"].status == "ended" and len(model.requests) == 2


def test_plain_cell_magic_call_blocks_without_top_level_await(ip: InteractiveShell) -> None:
    with capture_output():
        ip.run_cell_magic("agent", "--max-iterations 300 --out direct", JOB)
    assert ip.user_ns["direct"].status == "completed"


MISUSE = [
    ("%%agent\n   \n", "the cell body is empty"),
    ("%%agent --model gpt-9\nx", "unknown model spec 'gpt-9'; use --model simulated"),
    ("%%agent --model anthropic:claude-sonnet-4-6\nx", "set the ANTHROPIC_API_KEY environment"),
    ("%%agent --model anthropic:\nx", "'anthropic' needs a model id"),
    ("%%agent --agent nothing_here\nx", "no variable named 'nothing_here'"),
    ("%%agent --agent not_an_agent\nx", "not_an_agent is a int, not a gr.Agent"),
    ("%%agent --agent mine --model simulated\nx", "drop --model"),
    ("%%agent --out 2fast\nx", "not a variable name"),
    ("%%agent --out class\nx", "not a variable name"),
    ("%%agent --frobnicate\nx", "unrecognized arguments: --frobnicate"),
    ("%%agent --max-iterations 0\nx", "--max-iterations must be at least 1, not 0"),
    ("%%agent --max-iterations lots\nx", "invalid int value"),
    ("%%agent --background\nx", "--background needs a Jupyter kernel"),
    ("%agent", "unknown %agent action ''"),
    ("%agent explode", "type %agent status, %agent stop"),
    ("%todo frob", "type %todo add TEXT or %todo complete (%todo alone shows the list)"),
    ("%todo add", "say what the task is: %todo add"),
    ("%todo --run not_an_agent", "not a gr.Run"),
    ("%todo --run missing", "no variable named 'missing'"),
    ("%rewind", "say what is wrong: %rewind"),
    ("%rewind --run finished Too late", "has finished"),
    ("%%agent --name 'unbalanced\nx", "check its quotes"),
    ("%%agent --workspace ''\nx", "--workspace is empty"),
    ("%%agent --workspace a_file/below\nx", "pick a writable directory with --workspace DIR"),
    ("%%agent -h\nx", "%agent? lists the options"),
    ("%agent pause --run finished", "has finished"),
    ("%agent unpause --run finished", "has finished"),
    ("%agent resume", "to let a paused run go on, type %agent unpause"),
    ("%agent resume --run finished", "takes its id: %agent resume RUN_ID"),
    ("%todo complete --run finished", "has finished"),
]


@pytest.mark.parametrize(("source", "message"), MISUSE)
def test_misuse_is_one_line_saying_what_to_type(
    ip: InteractiveShell, tmp_path: Path, source: str, message: str
) -> None:
    ip.user_ns["not_an_agent"] = 3
    (tmp_path / "a_file").write_text("not a directory")
    ip.user_ns["mine"] = gr.Agent(workspace=tmp_path / "m", store=False)
    ip.user_ns["finished"] = gr.Agent(
        gr.ScriptedModel([gr.text("ok")]), workspace=tmp_path / "f", store=False
    ).run_sync("job")
    result, captured = run_cell(ip, source)
    assert isinstance(result.error_in_exec or result.error_before_exec, UsageError)
    shown = captured.stderr.strip()
    assert message in shown, shown
    assert shown.startswith("UsageError: ") and "\n" not in shown
    assert "Traceback" not in captured.stdout + captured.stderr


def test_background_outside_a_running_loop_says_what_to_do(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="--background needs the kernel's running event loop"):
        ip.run_cell_magic("agent", "--background", "x")


@pytest.mark.parametrize("with_a_run", [False, True])
def test_a_misspelt_subcommand_is_named_with_the_nearest_one(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, with_a_run: bool
) -> None:
    monkeypatch.setattr(run_module, "_latest", None)
    if with_a_run:
        ip.user_ns["done"] = gr.Agent(
            gr.ScriptedModel([gr.text("ok")]), workspace=tmp_path / "d", store=False
        ).run_sync("job")
    for source, said in (
        ("%agent stauts", "unknown %agent action 'stauts'; did you mean %agent status?"),
        ("%agent unpuase --run done", "'unpuase'; did you mean %agent unpause?"),
        ("%agent froks --turn 3", "'froks'; did you mean %agent fork --turn N?"),
        ("%todo compelte", "unknown %todo action 'compelte'; did you mean %todo complete?"),
        ("%agent explode", "unknown %agent action 'explode'; type %agent status, %agent stop"),
    ):
        result, captured = run_cell(ip, source)
        assert isinstance(result.error_in_exec, UsageError), source
        assert said in captured.stderr, captured.stderr
        assert "no run yet" not in captured.stderr


def test_magics_without_any_run_say_how_to_start_one(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_module, "_latest", None)
    for source in ("%todo", "%rewind wrong", "%agent status"):
        result, captured = run_cell(ip, source)
        assert isinstance(result.error_in_exec, UsageError)
        assert "no run yet; start one with %%agent" in captured.stderr


async def test_steering_a_background_run(ip: InteractiveShell, tmp_path: Path) -> None:
    ip.user_ns["slow"] = gr.Agent(
        gr.SimulatedModel(latency=0.002), workspace=tmp_path / "bg", max_iterations=300
    )
    with capture_output() as started:
        ip.run_cell_magic("agent", "--background --agent slow --out bg", JOB)
    run = ip.user_ns["bg"]
    assert run.status == "running" and gr.current_run() is run
    assert WIDGET_VIEW in started.outputs[0].data
    assert f"Run {run.run_id} goes on in the background as `bg`" in started.stdout

    await until(lambda: run.todos.phase_name == "Drafting" and bool(run.todos.items))
    with capture_output() as shown:
        ip.run_line_magic("agent", "pause")
    assert "pauses at the next safe point" in shown.stdout
    await until(lambda: run.paused)
    with capture_output() as shown:
        ip.run_line_magic("agent", "status")
        ip.run_line_magic("todo", "")
        ip.run_line_magic("todo", "")
    assert shown.stdout.startswith(f"Run {run.run_id}: paused; turn ")
    first, second = shown.outputs
    assert first.data[WIDGET_VIEW] == second.data[WIDGET_VIEW]  # one widget, shown twice
    assert first.data["text/plain"] == run.todos.render()

    with capture_output() as shown:
        ip.run_line_magic("todo", "add Check the spelling --run bg")
        ip.run_line_magic("rewind", "The drafts repeat each other; merge a and b")
        ip.run_line_magic("agent", "unpause")
    assert "Added task 6 'Check the spelling'." in shown.stdout
    assert "Rewind requested for run" in shown.stdout

    await asyncio.wait_for(run.wait(), 30)
    assert run.status == "completed"
    person = [e for e in run.events if e.data.get("source") == "person"]
    assert [e.kind for e in person] == ["todos_written", "rewind"]
    assert person[1].data["issue"] == "The drafts repeat each other; merge a and b"
    assert "merge a and b" in run.workspace.read_text("experiences.md")
    with capture_output() as shown:
        ip.run_line_magic("agent", "stop")
    assert "has already finished (completed)" in shown.stdout


def documented_background_example() -> tuple[str, str, list[str]]:
    """The background example of docs/magics.md: the cell that builds the agent, the %%agent
    cell, and the lines that steer it, as a person types them."""
    page = (Path(__file__).parents[2] / "docs" / "magics.md").read_text()
    after = page.split("`--background` returns at once", 1)[1]
    setup, cell, steering = re.findall(r"```(?:python)?\n(.*?)```", after, re.S)[:3]
    return setup, cell, steering.splitlines()


async def test_the_documented_background_example_can_be_steered(ip: InteractiveShell) -> None:
    setup, cell, steering = documented_background_example()
    assert ip.run_cell(setup).success
    slow = ip.user_ns["slow"]
    quick = gr.Agent(gr.SimulatedModel(), store=False, workspace="quick")
    head, body = cell.split("\n", 1)
    turns = quick.run_sync(body).turns
    assert slow.model.latency * turns >= 10  # seconds: time enough to type the next cell
    with capture_output():
        ip.run_cell_magic("agent", head.removeprefix("%%agent").strip(), body)
    run = ip.user_ns["run"]
    assert steering[0] == "%agent pause"
    with capture_output() as shown:
        assert ip.run_cell(steering[0]).success
    assert "pauses at the next safe point" in shown.stdout
    await until(lambda: run.paused, limit=2 * slow.model.latency + 5)
    with capture_output() as shown:
        for typed in steering[1:]:  # %todo, %todo add ..., %rewind ...: each as typed
            assert ip.run_cell(typed).success, typed
    assert "Added task" in shown.stdout and "Rewind requested" in shown.stdout
    assert run.todos.items[-1].title == "Check the index"
    run.cancel()
    await asyncio.wait_for(run.wait(), 10)


async def test_agent_stop_cancels_a_background_run(ip: InteractiveShell, tmp_path: Path) -> None:
    ip.user_ns["slow"] = gr.Agent(
        gr.SimulatedModel(latency=0.002), workspace=tmp_path / "stop", max_iterations=300
    )
    with capture_output():
        ip.run_cell_magic("agent", "--background --agent slow --out victim", JOB)
        ip.run_line_magic("agent", "stop --run victim")
    run = ip.user_ns["victim"]
    await asyncio.wait_for(run.wait(), 10)
    assert run.status == "cancelled" and run.reason == "stopped by the person"


def transformer(ip: InteractiveShell) -> TopLevelAwait:
    (found,) = [t for t in ip.input_transformers_cleanup if isinstance(t, TopLevelAwait)]
    return found


@pytest.mark.parametrize(
    "body",
    [
        'Say """hi""" and \'bye\'.\n',
        "C:\\path\\to \\n not a newline\n",
        "one\r\ntwo\r\n",
        "ünï ✓\n",
    ],
)
def test_agent_cells_become_top_level_await_with_the_exact_body(
    ip: InteractiveShell, body: str
) -> None:
    (code,) = transformer(ip)(["%%agent --out r --name 'x y'\n", body])
    call = ast.parse(code, mode="exec").body[0].value.value  # type: ignore[attr-defined]
    assert isinstance(call, ast.Call) and call.func.attr == "run_async"  # type: ignore[attr-defined]
    line, cell = call.args
    assert ast.literal_eval(line.args[0]) == "--out r --name 'x y'"  # type: ignore[attr-defined]
    assert ast.literal_eval(cell) == body


def test_only_top_level_agent_cells_are_rewritten(ip: InteractiveShell) -> None:
    rewrite = transformer(ip)
    assert rewrite(["%%agentish\n", "x\n"]) == ["%%agentish\n", "x\n"]
    assert rewrite(["print(1)\n"]) == ["print(1)\n"]
    assert rewrite(["%%agent\r\n", "x\r\n"])[0].startswith("await ")
    rewrite.depth = 1  # inside another cell (%%time, %%capture, run_cell)
    assert rewrite(["%%agent\n", "x\n"]) == ["%%agent\n", "x\n"]
    rewrite.depth = 0
    ip.autoawait = False
    try:
        assert rewrite(["%%agent\n", "x\n"]) == ["%%agent\n", "x\n"]
    finally:
        ip.autoawait = True


@pytest.mark.parametrize("outer", ["%%capture captured", "%%time"])
def test_agent_cells_nested_in_other_cell_magics_still_run(
    ip: InteractiveShell, outer: str
) -> None:
    result, captured = run_cell(ip, f"{outer}\n%%agent --max-iterations 300 --out nested\n{JOB}")
    assert result.success, captured.stderr
    assert ip.user_ns["nested"].status == "completed"


def test_the_magic_line_is_expanded_like_any_magic_line(ip: InteractiveShell) -> None:
    ip.user_ns["cap"] = 3
    result, captured = run_cell(ip, f"%%agent --max-iterations {{cap}} --out capped\n{JOB}")
    assert result.success, captured.stderr
    assert ip.user_ns["capped"].turns == 3


def test_quoted_option_values_lose_their_quotes(ip: InteractiveShell, tmp_path: Path) -> None:
    source = f"%%agent --name 'field guide' --workspace \"my job\" --max-iterations 3\n{JOB}"
    result, captured = run_cell(ip, source)
    assert result.success, captured.stderr
    run = ip.user_ns["run"]
    assert run.workspace.root == (tmp_path / "my job").resolve()
    started = next(e for e in run.events if e.kind == "run_started")
    assert started.data["config"]["name"] == "field guide"


def test_run_option_is_only_the_first_or_last_word(ip: InteractiveShell, tmp_path: Path) -> None:
    ip.user_ns["slow"] = gr.Agent(
        gr.SimulatedModel(latency=0.01), workspace=tmp_path / "w", max_iterations=300
    )

    async def main() -> None:
        with capture_output() as shown:
            ip.run_cell_magic("agent", "--background --agent slow --out bg", JOB)
            run = ip.user_ns["bg"]
            await until(lambda: run.todos.phase_name == "Drafting" and bool(run.todos.items))
            ip.run_line_magic("todo", "add Use the --run flag properly")
            ip.run_line_magic("todo", "--run bg add\tCheck\tthe index")
            ip.run_line_magic("rewind", "Wrong order; try --run=other next time --run bg")
            ip.run_line_magic("agent", "stop")
            await run.wait()
        titles = [e.data["titles"][-1] for e in run.events if e.data.get("source") == "person"
                  and e.kind == "todos_written"]  # fmt: skip
        assert titles == ["Use the --run flag properly", "Check the index"]
        assert "Rewind requested" in shown.stdout

    asyncio.run(main())


def test_unpause_and_pause_say_what_state_the_run_is_in(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    ip.user_ns["slow"] = gr.Agent(
        gr.SimulatedModel(latency=0.01), workspace=tmp_path / "w", max_iterations=300
    )

    async def main() -> None:
        with capture_output() as shown:
            ip.run_cell_magic("agent", "--background --agent slow --out bg", JOB)
            ip.run_line_magic("agent", "unpause")
            ip.run_line_magic("agent", "stop")
        assert "is not paused (running); nothing to unpause" in shown.stdout
        with pytest.raises(UsageError, match=r"cannot pause: run .* is stopping"):
            ip.run_line_magic("agent", "pause")
        await ip.user_ns["bg"].wait()

    asyncio.run(main())


def test_unloading_the_extension_removes_the_transformer(ip: InteractiveShell) -> None:
    ip.run_line_magic("reload_ext", "gr_notebook")
    assert sum(isinstance(t, TopLevelAwait) for t in ip.input_transformers_cleanup) == 1
    ip.run_line_magic("unload_ext", "gr_notebook")
    assert not any(isinstance(t, TopLevelAwait) for t in ip.input_transformers_cleanup)
    ip.run_line_magic("load_ext", "gr_notebook")


def test_agent_help_lists_every_option_and_the_line_actions(ip: InteractiveShell) -> None:
    doc = ip.find_cell_magic("agent").__doc__
    assert doc is not None and "%%agent [--model MODEL]" in doc
    for option in ("--model", "--workspace", "--name", "--max-iterations", "--background",
                   "--agent", "--out"):  # fmt: skip
        assert option in doc
    assert "%agent status|stop|pause|unpause" in doc


async def test_a_persons_todo_edits_at_the_start_of_a_background_run_are_kept(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    model = gr.ScriptedModel([gr.text("Done for now.")])
    ip.user_ns["quick"] = gr.Agent(model, workspace=tmp_path / "quick", store=False)
    with capture_output():
        ip.run_cell_magic("agent", "--background --agent quick --out q", JOB)
        ip.run_line_magic("todo", "add Check the glossary")  # before the task ever ran
        ip.run_line_magic("todo", "complete")
    run = ip.user_ns["q"]
    await asyncio.wait_for(run.wait(), 10)
    titles = [item.title for item in run.todos.items]
    assert titles[-1] == "Check the glossary" and len(titles) == 6  # the bootstrap's 5, and X
    assert run.todos.items[0].done  # the person ticked the bootstrap's first task
    person = [e for e in run.events if e.data.get("source") == "person"]
    assert [e.kind for e in person] == ["todos_written", "todo_completed"]
    assert run.events.of_kind("run_started")[0].seq < person[0].seq
    request = model.requests[0].layer_text(2)
    assert "Check the glossary" in request  # the model saw the person's task at once
