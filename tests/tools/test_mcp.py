"""MCP servers in gr's own loop, against real servers the tests start (``mcp_server.py``,
built with the SDK's own server API): over stdio and streamable HTTP, well-behaved and not."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.tools import ToolOutput

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def stdio(count: Path, name: str = "demo", **options: object) -> gr.MCPServer:
    return gr.MCPServer(
        name, command=sys.executable, args=[SERVER, "--count", str(count)], **options
    )  # type: ignore[arg-type]


def ran(count: Path) -> list[str]:
    return count.read_text().split() if count.exists() else []


def agent(
    tmp_path: Path, script: list[object], *servers: gr.MCPServer, **options: object
) -> gr.Agent:
    options.setdefault("store", False)
    return gr.Agent(
        gr.ScriptedModel(script),  # type: ignore[arg-type]
        workspace=tmp_path / "ws",
        mcp_servers=list(servers),
        **options,  # type: ignore[arg-type]
    )


def results(run: gr.Run) -> list[tuple[str, bool, str]]:
    return [
        (e.data["tool"], bool(e.data["is_error"]), str(e.data["result"]))
        for e in run.events.of_kind("tool_call")
    ]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def dead(pid: int, within_s: float = 10) -> bool:
    """The process ends within ``within_s``: gone, or a zombie nobody reaped yet (an orphan
    waits on whatever adopted it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid) or _zombie(pid):
            return True
        time.sleep(0.05)
    return False


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "Z"


# -- the tools, named and called --------------------------------------------------------------


def test_a_stdio_servers_tools_are_offered_and_called_under_their_mcp_names(
    tmp_path: Path,
) -> None:
    count = tmp_path / "count"
    script = [
        gr.tool_call("mcp__demo__add", a=2, b=3),
        gr.tool_call("mcp__demo__greet", name="Ann", title="Dr"),
        gr.tool_call("mcp__demo__greet", name="Bo", title=None),  # anyOf [string, null]
        gr.tool_call("mcp__demo__pid"),
        gr.text("Done."),
    ]
    run = agent(tmp_path, script, stdio(count)).run_sync("Use the tools.")
    assert run.status in ("ended", "completed"), run.reason
    got = results(run)
    assert got[:3] == [
        ("mcp__demo__add", False, "5"),
        ("mcp__demo__greet", False, "Hello, Dr Ann!"),
        ("mcp__demo__greet", False, "Hello, Bo!"),
    ]
    assert ran(count) == ["add", "greet", "greet", "pid"]
    # the server is closed when the run ends: its process is gone
    assert gone(int(got[3][2]))
    docs = (tmp_path / "ws" / "tools" / "mcp__demo__greet.md").read_text()
    assert "title" in docs and "Greet a person" in docs


def test_the_model_sees_the_servers_schemas_before_its_first_request(tmp_path: Path) -> None:
    model = gr.ScriptedModel([gr.text("Done.")])
    gr.Agent(
        model, workspace=tmp_path / "ws", store=False, mcp_servers=[stdio(tmp_path / "c")]
    ).run_sync("Look.")
    specs = {s.name: s for s in model.requests[0].tools}
    greet = specs["mcp__demo__greet"]
    assert greet.input_schema["required"] == ["name"]
    assert "title" not in greet.input_schema  # FastMCP's "greetArguments" title is dropped
    assert "Greet a person" in greet.description and "'demo'" in greet.description


def test_a_call_with_wrong_arguments_is_refused_before_the_server_sees_it(tmp_path: Path) -> None:
    count = tmp_path / "count"
    script = [gr.tool_call("mcp__demo__add", a="two", b=3), gr.text("Done.")]
    run = agent(tmp_path, script, stdio(count)).run_sync("Add.")
    [(_, is_error, text)] = results(run)
    assert is_error and "'a' must be an integer" in text
    assert ran(count) == []


# -- a server that misbehaves -----------------------------------------------------------------


def test_a_server_that_fails_hangs_or_crashes_gives_error_results_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    count = tmp_path / "count"
    script = [
        gr.tool_call("mcp__demo__fail", reason="no disk"),
        gr.tool_call("mcp__demo__hang"),
        gr.tool_call("mcp__demo__add", a=1, b=1),  # still answers after a hang
        gr.tool_call("mcp__demo__crash"),
        gr.tool_call("mcp__demo__add", a=1, b=1),
        gr.text("Done."),
    ]
    started = time.monotonic()
    run = agent(tmp_path, script, stdio(count, call_timeout_s=1)).run_sync("Try.")
    assert time.monotonic() - started < 20
    assert run.status in ("ended", "completed"), run.reason
    fail, hang, add, crash, after = results(run)
    assert fail[1] and "mcp__demo__fail failed" in fail[2] and "try again" in fail[2]
    assert hang[1] and "did not answer within 1s" in hang[2]
    assert "may or may not have taken effect" in hang[2]
    assert add == ("mcp__demo__add", False, "2")
    assert crash[1] and "has stopped" in crash[2] and "Go on with the other tools" in crash[2]
    assert after[1] and "has stopped" in after[2]
    assert ran(count) == ["fail", "hang", "add", "crash"]  # nothing sent once it stopped


def test_a_server_that_answers_with_what_is_not_mcp_gives_an_error_result(tmp_path: Path) -> None:
    count = tmp_path / "count"
    script = [gr.tool_call("mcp__demo__malformed"), gr.text("Done.")]
    run = agent(tmp_path, script, stdio(count, call_timeout_s=1)).run_sync("Try.")
    [(_, is_error, text)] = results(run)
    assert is_error and "did not answer" in text and "not MCP" in text


# -- a server that cannot start ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "said"),
    [
        (
            gr.MCPServer("nope", command="no-such-mcp-server-command"),
            ["'nope'", "'no-such-mcp-server-command' was not found"],
        ),
        (
            gr.MCPServer("quits", command=sys.executable, args=[SERVER, "--exit-at-once"]),
            ["'quits'", "could not start"],
        ),
        (
            gr.MCPServer(
                "mute",
                command=sys.executable,
                args=["-c", "import time; time.sleep(60)"],
                connect_timeout_s=1,
            ),
            ["'mute'", "within connect_timeout_s=1"],
        ),
    ],
    ids=["command-not-found", "exits-at-once", "never-initializes"],
)
def test_a_server_that_cannot_start_fails_the_run_naming_it(
    tmp_path: Path, server: gr.MCPServer, said: list[str]
) -> None:
    model = gr.ScriptedModel([gr.text("Done.")])
    started = time.monotonic()
    run = gr.Agent(model, workspace=tmp_path / "ws", store=False, mcp_servers=[server]).run_sync(
        "Go."
    )
    assert time.monotonic() - started < 20
    assert run.status == "failed"
    assert "MCPServerError" in run.reason
    for words in said:
        assert words in run.reason
    assert list(model.requests) == []  # no request was sent without the server's tools


def test_a_url_that_refuses_fails_the_run_naming_the_server(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    server = gr.MCPServer("web", url=url, connect_timeout_s=5)
    run = agent(tmp_path, [gr.text("Done.")], server).run_sync("Go.")
    assert run.status == "failed"
    assert "'web'" in run.reason and url in run.reason


# -- over streamable HTTP ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port, count = free_port(), tmp_path / "http-count"
    process = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port), "--count", str(count)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", count
    finally:
        process.kill()
        process.wait()


def test_a_streamable_http_server_is_called_and_its_session_closed(
    tmp_path: Path, http_server: tuple[str, Path]
) -> None:
    url, count = http_server
    server = gr.MCPServer("web", url=url, headers={"Authorization": "Bearer t0ken"})
    script = [gr.tool_call("mcp__web__add", a=4, b=5), gr.text("Done.")]
    run = agent(tmp_path, script, server).run_sync("Add.")
    assert results(run) == [("mcp__web__add", False, "9")]
    assert ran(count) == ["add", "DELETE", "auth=Bearer", "t0ken"]  # the session was ended


# -- guardrails see the MCP names -------------------------------------------------------------


def test_a_policy_denies_an_mcp_tool_by_its_name_and_the_server_never_runs_it(
    tmp_path: Path,
) -> None:
    count = tmp_path / "count"
    needs_greet = gr.SequentialDependencyPolicy({"mcp__demo__add": {"mcp__demo__greet"}})
    script = [
        gr.tool_call("mcp__demo__add", a=1, b=2),
        gr.tool_call("mcp__demo__greet", name="Ann"),
        gr.tool_call("mcp__demo__add", a=1, b=2),
        gr.text("Done."),
    ]
    run = agent(tmp_path, script, stdio(count), policies=[needs_greet]).run_sync("Go.")
    denied, greet, add = results(run)
    assert not greet[1] and add == ("mcp__demo__add", False, "3")
    assert denied[1] and "mcp__demo__greet" in denied[2]
    assert ran(count) == ["greet", "add"]  # the denied call never reached the server
    policy = run.policy_df()
    assert set(policy["tool"]) >= {"mcp__demo__add"}
    assert list(policy["decision"]) == ["deny", "allow", "allow"]
    assert policy["guardrail"][0] == needs_greet.name
    called = ["mcp__demo__add", "mcp__demo__greet", "mcp__demo__add"]
    assert list(run.tool_calls_df()["tool"]) == called


def test_a_policy_naming_an_mcp_tool_the_server_lacks_fails_the_run_at_its_start(
    tmp_path: Path,
) -> None:
    typo = gr.SequentialDependencyPolicy({"mcp__demo__ad": {"mcp__demo__greet"}})
    run = agent(tmp_path, [gr.text("Done.")], stdio(tmp_path / "c"), policies=[typo]).run_sync(
        "Go."
    )
    assert run.status == "failed" and "mcp__demo__ad" in run.reason


def test_an_agent_tool_under_an_mcp_name_is_an_error_at_the_start(tmp_path: Path) -> None:
    clash = gr.Tool("mcp__demo__add", "Adds.", {"type": "object"}, lambda c, p: "0")
    run = agent(tmp_path, [gr.text("Done.")], stdio(tmp_path / "c"), tools=[clash]).run_sync("Go.")
    assert run.status == "failed"
    assert "'mcp__demo__add'" in run.reason and "rename the agent's tool" in run.reason


def test_a_resumed_run_connects_to_its_servers_again(tmp_path: Path) -> None:
    count = tmp_path / "count"
    store = tmp_path / "runs.db"
    script = [gr.tool_call("mcp__demo__add", a=1, b=1)] * 2  # then the script runs dry
    first = agent(tmp_path, script, stdio(count), store=store).run_sync("Go.")
    assert first.status == "failed", first.reason
    later = agent(
        tmp_path,
        [gr.tool_call("mcp__demo__add", a=2, b=2), gr.text("Done.")],
        stdio(count),
        store=store,
    )
    resumed = gr.resume(first.run_id, store=store, agent=later)
    assert ("mcp__demo__add", False, "4") in results(resumed)
    assert ran(count) == ["add", "add", "add"]


# -- what a person can get wrong ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: gr.MCPServer("a__b", command="x"), "holds no '__'"),
        (lambda: gr.MCPServer("files_", command="x"), "ends with '_'"),
        (lambda: gr.MCPServer("my server", command="x"), "letters, digits"),
        (lambda: gr.MCPServer("s"), "exactly one of command="),
        (lambda: gr.MCPServer("s", command="x", url="http://h/mcp"), "exactly one of"),
        (lambda: gr.MCPServer("s", url="localhost:8000"), "http:// or https://"),
        (lambda: gr.MCPServer("s", command="x", args="a b"), "list of strings"),
        (lambda: gr.MCPServer("s", command="x", call_timeout_s=0), "above 0"),
        (lambda: gr.MCPServer("s", url="http://h/mcp", env={"A": "b"}), "command= server"),
        (lambda: gr.MCPServer("x" * 60, command="x"), "too long"),
    ],
)
def test_a_server_defined_wrongly_is_one_clear_error(make: object, said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
        make()  # type: ignore[operator]


def test_two_servers_with_one_name_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two MCP servers are named 'demo'"):
        gr.Agent(None, mcp_servers=[stdio(tmp_path / "a"), stdio(tmp_path / "b")])
    with pytest.raises(ConfigError, match=r"list of gr\.MCPServer"):
        gr.Agent(None, mcp_servers=stdio(tmp_path / "a"))  # type: ignore[arg-type]


def test_a_missing_extra_is_one_line_with_the_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gr_notebook.tools import mcp_client

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ConfigError) as caught:
        mcp_client.load_mcp()
    assert str(caught.value) == "mcp_servers= needs the MCP SDK: pip install 'gr-notebook[mcp]'"


async def test_a_run_stopped_mid_call_closes_its_server(tmp_path: Path) -> None:
    """Stopped while a call hangs: the run ends cancelled and the server's process is gone."""
    count = tmp_path / "count"
    script = [gr.tool_call("mcp__demo__pid"), gr.tool_call("mcp__demo__hang"), gr.text("Done.")]
    run = agent(tmp_path, script, stdio(count, call_timeout_s=60)).start("Go.")
    deadline = time.monotonic() + 20
    while "hang" not in ran(count):
        assert time.monotonic() < deadline and not run.done, run.reason
        await asyncio.sleep(0.05)
    run.cancel("stop now")
    await run.wait()
    assert run.status == "cancelled"
    [(_, _, pid)] = results(run)
    assert gone(int(pid))


# -- results and names, without a server -------------------------------------------------------


def test_an_mcp_result_becomes_what_the_model_reads() -> None:
    from mcp import types

    from gr_notebook.tools.mcp import tool_output

    mixed = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a chart:"),
            types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///n.txt", text="notes"),
            ),
        ]
    )
    out = tool_output(mixed, name="mcp__s__t")
    assert not out.is_error
    assert (
        out.content == "a chart:\n[image (image/png) returned by the tool; not shown here]\nnotes"
    )
    only_data = types.CallToolResult(content=[], structured_content={"total": 3})
    assert tool_output(only_data, name="mcp__s__t").content == '{"total": 3}'
    failed = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such row")], is_error=True
    )
    out = tool_output(failed, name="mcp__s__t")
    assert out.is_error and out.content.startswith("Error: mcp__s__t failed: no such row.")
    assert tool_output(types.CallToolResult(content=[]), name="x").content == (
        "(the tool returned nothing)"
    )


def test_a_server_tool_whose_name_a_model_api_refuses_is_named_in_the_error() -> None:
    from mcp import types

    from gr_notebook.tools.mcp import mcp_tool

    server = gr.MCPServer("files", command="x")

    async def call(tool: str, params: object) -> ToolOutput:
        raise AssertionError

    for bad in ("read file", "x" * 60, "naïve"):
        listed = types.Tool(name=bad, input_schema={"type": "object"})
        with pytest.raises(ConfigError, match="the model APIs refuse") as caught:
            mcp_tool(server, listed, call)  # type: ignore[arg-type]
        assert "'files'" in str(caught.value) and repr(bad) in str(caught.value)
    tool = mcp_tool(server, types.Tool(name="read-file", input_schema={"type": "object"}), call)  # type: ignore[arg-type]
    assert tool.name == "mcp__files__read-file"


def test_a_model_argument_is_validated_through_its_schema_definitions(tmp_path: Path) -> None:
    """FastMCP writes a pydantic argument as a ``$ref`` into ``$defs``: gr checks inside it."""
    count = tmp_path / "count"
    model = gr.ScriptedModel(
        [
            gr.tool_call("mcp__demo__manhattan", point={"x": 3, "y": "four"}),
            gr.tool_call("mcp__demo__manhattan", point={"x": 3, "y": -4}, origin=None),
            gr.text("Done."),
        ]
    )
    run = gr.Agent(
        model, workspace=tmp_path / "ws", store=False, mcp_servers=[stdio(count)]
    ).run_sync("Measure.")
    refused, measured = results(run)
    assert refused[1] and "'point.y' must be an integer" in refused[2]
    assert measured == ("mcp__demo__manhattan", False, "7")
    assert ran(count) == ["manhattan"]
    schema = {s.name: s for s in model.requests[0].tools}["mcp__demo__manhattan"].input_schema
    assert "$defs" not in schema and schema["properties"]["point"]["properties"]["x"]["type"]


def test_a_recursive_definition_keeps_its_ref() -> None:
    from gr_notebook.tools.mcp import _inlined

    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    inlined = _inlined(tree)
    root = inlined["properties"]["root"]
    assert root["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert inlined["$defs"] == tree["$defs"]


def test_feedback_and_the_guidance_lint_read_the_mcp_names(tmp_path: Path) -> None:
    advice = gr.FeedbackProviderConfig(
        gr.StaticFeedbackProvider("Check the sum before you use it."),
        gr.FeedbackTrigger(every_n_calls=1),
    )
    script = [gr.tool_call("mcp__demo__add", a=1, b=2), gr.text("Done.")]
    run = agent(tmp_path, script, stdio(tmp_path / "c"), feedback_providers=[advice]).run_sync(
        "Add."
    )
    [(_, is_error, text)] = results(run)
    assert (is_error, text) == (False, "3")
    feedback = run.feedback_df()
    assert list(feedback["tool"]) == ["mcp__demo__add"]
    assert "Check the sum" in feedback["text"][0]
    assert gr.lint_guidance(run) == []


@pytest.mark.parametrize("end", ["budget_exhausted", "failed", "interrupted"])
async def test_the_server_is_closed_however_the_run_ends(tmp_path: Path, end: str) -> None:
    count = tmp_path / "count"
    script: list[object] = [gr.tool_call("mcp__demo__pid")]
    options: dict[str, object] = {}
    if end == "budget_exhausted":
        options["max_iterations"] = 1
    elif end == "interrupted":  # Ctrl-C in a kernel, while a call is in flight
        script.append(gr.tool_call("mcp__demo__hang"))
    # "failed": the script runs dry after the first call
    run = agent(tmp_path, script, stdio(count), **options).start("Go.")
    if end == "interrupted":
        deadline = time.monotonic() + 20
        while "hang" not in ran(count):
            assert time.monotonic() < deadline and not run.done, run.reason
            await asyncio.sleep(0.05)
        run.cancel("KeyboardInterrupt", interrupted=True)
    await run.wait()
    assert run.status == end, run.reason
    [(_, _, pid), *_] = results(run)
    assert gone(int(pid))


@pytest.mark.skipif(sys.platform == "win32", reason="a process group is POSIX's")
def test_what_the_server_started_goes_with_it_when_the_run_ends_normally(tmp_path: Path) -> None:
    """A stdio server that started a process of its own (as ``uvx``, ``npx``, a browser or a
    language server do): the run ends as it should, and that process goes too."""
    spawned = tmp_path / "spawned.pid"
    server = gr.MCPServer("demo", command=sys.executable, args=[SERVER, "--spawn", str(spawned)])
    script = [gr.tool_call("mcp__demo__add", a=1, b=2), gr.text("Done.")]
    demo = agent(tmp_path, script, server)
    try:
        run = demo.run_sync("Go.")
        assert run.status == "ended" and results(run) == [("mcp__demo__add", False, "3")]
        assert dead(int(spawned.read_text()))
    finally:
        if spawned.exists() and not gone(pid := int(spawned.read_text())):
            os.kill(pid, signal.SIGKILL)


def test_a_policy_naming_an_mcp_tool_of_an_agent_without_servers_fails_at_the_start(
    tmp_path: Path,
) -> None:
    """Accepted when the agent is built (a Claude Agent SDK session may bring the server),
    refused when gr's own loop starts a run that can never call the tool."""
    asks = gr.ApprovalPolicy(tools=["mcp__files__delete"])
    model = gr.ScriptedModel([gr.text("Done.")])
    agent = gr.Agent(model, workspace=tmp_path / "ws", store=False, policies=[asks])
    with pytest.raises(ConfigError, match="mcp__files__delete"):
        agent.run_sync("Go.")
    assert list(model.requests) == []


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_the_vendor_adapters_send_the_servers_schemas_and_call_the_tools(
    tmp_path: Path, vendor: str
) -> None:
    """The Messages API and chat-completions servers check the request as the APIs do."""
    from gr_notebook.models.retry import RetryPolicy
    from gr_notebook.testing import ChatServer, MessagesServer

    count = tmp_path / "count"
    script = [
        gr.tool_call("mcp__demo__manhattan", point={"x": 1, "y": 2}),
        gr.tool_call("mcp__demo__greet", name="Ann"),
        gr.text("Done."),
    ]
    if vendor == "anthropic":
        import anthropic

        from gr_notebook.models.anthropic_model import AnthropicModel

        server = MessagesServer(script).start()
        client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)
        model: object = AnthropicModel(
            "claude-sonnet-4-6", client=client, retry=RetryPolicy(base_s=0)
        )
    else:
        from gr_notebook.models.openai_model import OpenAIModel

        server = ChatServer(script).start()
        model = OpenAIModel("qwen2.5:7b", base_url=f"{server.url}/v1", retry=RetryPolicy(base_s=0))
    try:
        run = gr.Agent(
            model,  # type: ignore[arg-type]
            workspace=tmp_path / "ws",
            store=False,
            mcp_servers=[stdio(count)],
        ).run_sync("Measure and greet.")
        sent = server.requests[0].body["tools"]
    finally:
        server.close()
    assert [r[:3] for r in results(run)] == [
        ("mcp__demo__manhattan", False, "3"),
        ("mcp__demo__greet", False, "Hello, Ann!"),
    ]
    assert ran(count) == ["manhattan", "greet"]
    if vendor == "anthropic":
        schemas = {t["name"]: t["input_schema"] for t in sent}
    else:
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in sent}
    greet = schemas["mcp__demo__greet"]
    assert greet["properties"]["title"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert schemas["mcp__demo__manhattan"]["properties"]["point"]["required"] == ["x", "y"]


# -- what a tool does to the world ------------------------------------------------------------


def test_a_servers_annotations_give_its_tools_effect_classes(tmp_path: Path) -> None:
    """readOnlyHint gives ``read``, idempotentHint ``idempotent``; a tool without
    annotations is ``once``, as any tool that does not say."""
    script = [
        gr.tool_calls(
            [
                ("mcp__demo__look", {"name": "a"}),
                ("mcp__demo__remove", {"name": "a"}),
                ("mcp__demo__add", {"a": 1, "b": 2}),
            ]
        ),
        gr.text("Done."),
    ]
    run = agent(tmp_path, script, stdio(tmp_path / "count")).run_sync("Use the tools.")
    assert run.status == "ended", run.reason
    intents = {e.data["tool"]: e.data["effect"] for e in run.events.of_kind("tool_intent")}
    assert intents == {
        "mcp__demo__look": "read",
        "mcp__demo__remove": "idempotent",
        "mcp__demo__add": "once",
    }
    frame = run.tool_calls_df()
    assert list(frame["effect"]) == ["read", "idempotent", "once"]


@pytest.mark.parametrize(
    ("hints", "effect"),
    [
        (None, "once"),
        ({}, "once"),
        ({"readOnlyHint": True}, "read"),
        ({"readOnlyHint": True, "idempotentHint": False}, "read"),
        ({"idempotentHint": True}, "idempotent"),
        ({"idempotentHint": True, "destructiveHint": True}, "idempotent"),
        ({"destructiveHint": False}, "once"),
        ({"destructiveHint": True}, "once"),
        ({"readOnlyHint": False, "idempotentHint": False}, "once"),
    ],
)
def test_annotations_map_to_effect_classes(hints: dict[str, bool] | None, effect: str) -> None:
    from mcp import types

    from gr_notebook.tools.mcp import effect_of_annotations, mcp_tool

    annotations = None if hints is None else types.ToolAnnotations(**hints)  # type: ignore[arg-type]
    assert effect_of_annotations(annotations) == effect
    assert effect_of_annotations(hints) == effect  # as a plain mapping too

    async def call(tool: str, params: object) -> ToolOutput:
        raise AssertionError

    listed = types.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)
    server = gr.MCPServer("s", command="x")
    assert mcp_tool(server, listed, call).effect == effect  # type: ignore[arg-type]
