"""The SDK hooks against input the CLI should never send, and after the run has ended.

The callbacks are called as the SDK calls them (``await hook(input, tool_use_id, context)``),
without the CLI: a malformed input must never raise out of a hook (the CLI would block or go
on while the run records nothing). ``PreToolUse`` denies with a reason the model can act on;
``PostToolUse`` and ``PostToolUseFailure`` record the call and run the guardrails after it;
each records an ``error`` event. Once the run has ended, no hook records anything more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, ToolUseBlock

import gr_notebook as gr
from gr_notebook.display.timeline import describe
from gr_notebook.integrations.claude_agent_sdk import GuardrailHooks, guardrail_hooks, local_env
from gr_notebook.testing import MessagesServer
from tests.integrations.conftest import MODEL, claude_script, side_request

Hook = Callable[[Any, str | None, Any], Awaitable[dict[str, Any]]]
SESSION = "session-1"


def hooks_at(tmp_path: Path, **kwargs: Any) -> GuardrailHooks:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.md").write_text("old\n")
    kwargs.setdefault("policies", [gr.ReadBeforeWritePolicy()])
    agent = gr.Agent(workspace=ws, store=False, self_regulation=False, **kwargs)
    return guardrail_hooks(agent, cwd=ws, tools=["Read", "Write", "Bash"])


def hook(hooks: GuardrailHooks, event: str) -> Hook:
    callback: Hook = hooks.hooks[event][0].hooks[0]
    return callback


def call_input(**fields: Any) -> dict[str, Any]:
    """A well-formed hook input, with ``fields`` replaced (``...`` removes a field)."""
    base: dict[str, Any] = {
        "session_id": SESSION,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "toolu_1",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


#: Each malformed shape of a tool hook's input, with a word its error event must name.
MALFORMED: dict[str, tuple[Any, str]] = {
    "missing tool_name": (call_input(tool_name=...), "tool_name"),
    "tool_name a number": (call_input(tool_name=42), "tool_name"),
    "tool_name empty": (call_input(tool_name=""), "tool_name"),
    "tool_name a list": (call_input(tool_name=["Bash"]), "tool_name"),
    "tool_input a string": (call_input(tool_input="ls -la"), "tool_input"),
    "tool_input a list": (call_input(tool_input=["ls"]), "tool_input"),
    "tool_input a number": (call_input(tool_input=7), "tool_input"),
    "tool_input null": (call_input(tool_input=None), "tool_input"),
    "input a string": ("PreToolUse Bash", "input"),
    "input a list": ([call_input()], "input"),
    "input null": (None, "input"),
}


def errors(hooks: GuardrailHooks) -> list[Any]:
    return [e for e in hooks.run.events if e.kind == "error"]


def tool_calls(hooks: GuardrailHooks) -> list[Any]:
    return [e for e in hooks.run.events if e.kind == "tool_call"]


# -- PreToolUse: denied, with an order the model can follow ---------------------------------


@pytest.mark.parametrize("shape", list(MALFORMED))
async def test_pre_tool_use_denies_malformed_input(tmp_path: Path, shape: str) -> None:
    hooks = hooks_at(tmp_path)
    hook_input, named = MALFORMED[shape]
    tool_use_id = "toolu_1"
    reply = await hook(hooks, "PreToolUse")(hook_input, tool_use_id, None)
    output = reply["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    reason = output["permissionDecisionReason"]
    assert reason.startswith("Not run: the guardrails could not read this tool call")
    assert "Call the tool again" in reason and "end your turn" in reason
    assert reply.get("continue_") is not False  # the session goes on: the model may retry
    [error] = errors(hooks)
    assert error.source == "hook" and named in error.message
    assert "PreToolUse" in error.message and "denied" in error.message
    [call] = tool_calls(hooks)  # recorded as a refused call, as gr's loop records one
    assert call.is_error and call.result == reason
    assert describe(error).startswith("Error in ")


@pytest.mark.parametrize(
    "hook_input",
    [call_input(tool_input=...), call_input(tool_use_id=...)],
    ids=["no tool_input", "no tool_use_id"],
)
async def test_pre_tool_use_reads_an_absent_input_or_id_as_none_given(
    tmp_path: Path, hook_input: dict[str, Any]
) -> None:
    """A tool without parameters may come with no ``tool_input``, and a call with no id is
    only not matched to its result: neither is malformed, so the policies decide."""
    hooks = hooks_at(tmp_path)
    reply = await hook(hooks, "PreToolUse")(hook_input, None, None)
    decision = reply.get("hookSpecificOutput", {}).get("permissionDecision")
    assert decision != "deny" and errors(hooks) == []


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
@pytest.mark.parametrize("shape", list(MALFORMED))
async def test_post_tool_use_records_malformed_input_and_goes_on(
    tmp_path: Path, shape: str, event: str
) -> None:
    """The call ran: it is recorded, and the guardrails after a call run (here a feedback
    provider on every call), with an error event for what could not be read."""
    every_call = gr.FeedbackProviderConfig(
        gr.StaticFeedbackProvider("Keep going."), gr.FeedbackTrigger(every_n_calls=1)
    )
    hooks = hooks_at(tmp_path, feedback_providers=[every_call])
    hook_input, named = MALFORMED[shape]
    if isinstance(hook_input, dict):
        hook_input = {**hook_input, "hook_event_name": event, "tool_response": "ok"}
    tool_use_id = "toolu_1"
    reply = await hook(hooks, event)(hook_input, tool_use_id, None)
    assert "Keep going." in reply["hookSpecificOutput"]["additionalContext"]
    assert reply.get("continue_") is not False
    [error] = errors(hooks)
    assert error.source == "hook" and named in error.message
    assert event in error.message and "recorded" in error.message
    [call] = tool_calls(hooks)
    assert call.is_error is (event == "PostToolUseFailure")
    assert [e.kind for e in hooks.run.events].count("feedback") == 1


async def test_a_post_without_tool_name_is_read_from_its_pre(tmp_path: Path) -> None:
    """The call is known from its PreToolUse: its policy's ``on_result`` still runs, so the
    read counts and the write after it is allowed."""
    hooks = hooks_at(tmp_path)
    path = str(tmp_path / "ws" / "notes.md")
    read = call_input(tool_name="Read", tool_input={"file_path": path}, tool_use_id="r1")
    assert await hook(hooks, "PreToolUse")(read, "r1", None) == {}
    post = {**read, "hook_event_name": "PostToolUse", "tool_response": "old\n"}
    del post["tool_name"], post["tool_input"]
    await hook(hooks, "PostToolUse")(post, "r1", None)
    [call] = tool_calls(hooks)
    assert call.tool == "Read" and not call.is_error
    assert call.input == {"file_path": path}  # as its PreToolUse read it
    write = call_input(tool_name="Write", tool_input={"file_path": path, "content": "new\n"})
    assert await hook(hooks, "PreToolUse")(write, "w1", None) == {}  # allowed: it was read
    [error] = errors(hooks)
    assert "it has no tool_name" in error.message


async def test_a_post_without_tool_use_id_takes_no_other_calls_place(tmp_path: Path) -> None:
    hooks = hooks_at(tmp_path)
    path = str(tmp_path / "ws" / "notes.md")
    read = call_input(tool_name="Read", tool_input={"file_path": path}, tool_use_id="r1")
    assert await hook(hooks, "PreToolUse")(read, "r1", None) == {}
    bash = {**call_input(tool_use_id=...), "hook_event_name": "PostToolUse"}
    await hook(hooks, "PostToolUse")(bash, None, None)
    await hook(hooks, "PostToolUse")({**read, "hook_event_name": "PostToolUse"}, "r1", None)
    assert [(c.tool, c.tool_use_id) for c in tool_calls(hooks)] == [("Bash", ""), ("Read", "r1")]


async def test_stop_with_malformed_input_is_judged_and_recorded(tmp_path: Path) -> None:
    hooks = hooks_at(tmp_path, task_completion_checker=gr.FileOutputChecker(["report.md"]))
    reply = await hook(hooks, "Stop")(["not", "an", "object"], None, None)
    assert reply["decision"] == "block" and "report.md" in reply["reason"]
    [error] = errors(hooks)
    assert error.source == "hook" and "Stop" in error.message


async def test_a_malformed_session_id_is_not_a_foreign_session(tmp_path: Path) -> None:
    hooks = hooks_at(tmp_path)
    assert await hook(hooks, "PreToolUse")(call_input(session_id=12), "toolu_1", None) == {}
    assert await hook(hooks, "PreToolUse")(call_input(tool_use_id="t2"), "t2", None) == {}


# -- after the end: nothing more is allowed or recorded --------------------------------------


def result_message() -> ResultMessage:
    return ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id=SESSION,
    )


async def ended(tmp_path: Path) -> GuardrailHooks:
    """A session whose result has ended its run; a checker would judge any later stop."""
    hooks = hooks_at(tmp_path, task_completion_checker=gr.FileOutputChecker(["report.md"]))
    assert await hook(hooks, "PreToolUse")(call_input(), "toolu_1", None) == {}
    hooks.observe(result_message())
    assert hooks.run.done and hooks.run.events[-1].kind == "run_finished"
    return hooks


async def test_after_the_end_pre_tool_use_denies_and_stops(tmp_path: Path) -> None:
    hooks = await ended(tmp_path)
    count = len(hooks.run.events)
    reply = await hook(hooks, "PreToolUse")(call_input(tool_use_id="t2"), "t2", None)
    output = reply["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert output["permissionDecisionReason"] == (
        f"Not run: the guarded run {hooks.run.run_id} has ended ({hooks.run.status}), so no "
        "more tool calls are allowed in this session. End your turn now."
    )
    assert reply["continue_"] is False
    assert "call guardrail_hooks(agent) again for a new session" in reply["stopReason"]
    assert len(hooks.run.events) == count


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure", "Stop"])
async def test_after_the_end_other_hooks_record_nothing(tmp_path: Path, event: str) -> None:
    hooks = await ended(tmp_path)
    count = len(hooks.run.events)
    hook_input = {**call_input(), "hook_event_name": event, "tool_response": "x", "error": "e"}
    reply = await hook(hooks, event)(hook_input, "toolu_1", None)
    assert "hookSpecificOutput" not in reply and "decision" not in reply
    assert len(hooks.run.events) == count
    assert hooks.run.events[-1].kind == "run_finished"


async def test_after_the_end_the_stream_records_nothing(tmp_path: Path) -> None:
    hooks = await ended(tmp_path)
    count = len(hooks.run.events)
    hooks.observe(
        AssistantMessage(
            content=[TextBlock("more"), ToolUseBlock("toolu_9", "Bash", {"command": "ls"})],
            model="claude-sonnet-4-6",
            message_id="msg_late",
        )
    )
    hooks.observe(result_message())
    assert len(hooks.run.events) == count and hooks.run.events[-1].kind == "run_finished"


async def test_a_hook_that_waits_while_the_run_ends_records_nothing(tmp_path: Path) -> None:
    """A PreToolUse waits for the stream to report its call; the run ends meanwhile (the
    session's result, a failure): the call is refused and nothing lands after the end."""
    hooks = hooks_at(tmp_path)
    hooks.observe(
        AssistantMessage(content=[TextBlock("hi")], model="claude-sonnet-4-6", message_id="m1")
    )
    pre = hook(hooks, "PreToolUse")(call_input(tool_use_id="late"), "late", None)
    task = asyncio.ensure_future(pre)
    await asyncio.sleep(0)  # the hook is waiting for the stream
    hooks.observe(result_message())
    reply = await asyncio.wait_for(task, 10)
    assert reply["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert hooks.run.events[-1].kind == "run_finished"


async def test_a_second_query_of_a_client_after_the_end_is_refused(tmp_path: Path) -> None:
    """Through the CLI: ``ClaudeSDKClient`` keeps its session open after the first answer,
    whose result ends the run. The second query's call is denied as after the end, the
    session stops there, and nothing is recorded after ``run_finished``."""
    from claude_agent_sdk import ClaudeSDKClient

    ws = tmp_path / "ws"
    hooks = hooks_at(tmp_path, policies=[])
    write = claude_script([gr.tool_call("write_file", path="late.md", content="x\n")], ws)
    with MessagesServer([gr.text("Done."), *write, gr.text("Done.")], side=side_request) as srv:
        options = hooks.options(
            permission_mode="acceptEdits",
            tools=["Write"],
            model=MODEL,
            env=local_env(srv.url, tmp_path / "config"),
        )
        async with ClaudeSDKClient(options=options) as client:
            await client.query("first")
            async for message in client.receive_response():
                hooks.observe(message)
            assert hooks.run.done and hooks.run.events[-1].kind == "run_finished"
            count = len(hooks.run.events)
            await client.query("second")
            second = []
            async for message in client.receive_response():
                hooks.observe(message)
                second.append(message)
    assert not (ws / "late.md").exists()
    results = [
        block
        for message in second
        if type(message).__name__ == "UserMessage"
        for block in message.content
        if type(block).__name__ == "ToolResultBlock"
    ]
    [result] = results
    assert result.is_error is True and "has ended (ended)" in str(result.content)
    assert len(hooks.run.events) == count
