"""The OpenAI adapter end to end: the real ``openai`` SDK, the local chat-completions server
and the loop. The mapping, retries, the mistakes small models make, and bad input."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, ModelError, ModelSpecError
from gr_notebook.models import ModelRequest, SystemBlock, resolve_model
from gr_notebook.models.openai_model import LOCAL_KEY, MISSING_KEY, OpenAIModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import ChatServer, Fault, MessagesServer, bad_arguments, empty_reply
from tests.conftest import agent_at, full_job_script

MODEL = "qwen2.5:7b"
SECRET = "sk-proj-SECRET-do-not-leak-1234567890abcdef"
FAST = RetryPolicy(max_retries=3, base_s=0.01, max_s=0.05)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ChatServer, OpenAIModel]]]:
    servers: list[ChatServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[ChatServer, OpenAIModel]:
        server = ChatServer(turns, **options.pop("server", {})).start()
        servers.append(server)
        options.setdefault("retry", FAST)
        return server, OpenAIModel(MODEL, base_url=f"{server.url}/v1", **options)

    yield start
    for server in servers:
        server.close()


def chat_requests(server: ChatServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path == "/v1/chat/completions"]


def tool_calls(run: gr.Run) -> list[dict[str, Any]]:
    return [dict(e.data) for e in run.events if e.kind == "tool_call"]


class TestTheLoop:
    def test_a_full_job_runs_its_tool_loop_over_http(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve(full_job_script())
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "completed" and run.job is not None
        assert server.remaining == 0
        assert run.events.of_kind("run_started")[0].data["model"] == f"openai:{MODEL}"
        turns = run.turns_df()
        assert (turns.input_tokens > 0).all()
        assert turns.cost_usd.isna().all()  # an unpriced model costs NaN, not a guess

    def test_a_priced_model_has_a_cost(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([gr.text("done")], prices={MODEL: gr.Price(1.0, 2.0, 0.0, 0.5)})
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.turns_df().cost_usd.notna().all()


class TestTheRequest:
    def test_layers_tools_and_tool_results_map_onto_the_wire(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve(
            [gr.tool_call("write_file", path="a.md", content="x\n"), gr.text("done")]
        )
        agent_at(tmp_path, model).run_sync("job")
        first, second = chat_requests(server)
        assert first["model"] == MODEL and first["max_tokens"] == 4096
        system = first["messages"][0]
        assert system["role"] == "system" and "job" in json.dumps(first["messages"])
        assert [m["role"] for m in first["messages"]].count("system") == 1
        tools = {t["function"]["name"]: t for t in first["tools"]}
        assert all(t["type"] == "function" for t in first["tools"])
        assert tools["write_file"]["function"]["parameters"]["type"] == "object"
        assistant, result = second["messages"][-2:]
        [call] = assistant["tool_calls"]
        assert call["type"] == "function" and call["function"]["name"] == "write_file"
        assert json.loads(call["function"]["arguments"]) == {"path": "a.md", "content": "x\n"}
        assert result == {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": result["content"],
        }
        assert "a.md" in result["content"]
        assert server.requests[0].headers["authorization"] == f"Bearer {LOCAL_KEY}"

    def test_layer_1_comes_before_layer_2_in_the_system_message(self) -> None:
        model = OpenAIModel(MODEL, base_url="http://127.0.0.1:9/v1")
        request = ModelRequest((SystemBlock(2, "todos"), SystemBlock(1, "rules")), (), ())
        params = model.request_params(request)
        assert params["messages"] == [{"role": "system", "content": "rules\n\ntodos"}]
        assert "tools" not in params

    def test_the_official_endpoint_gets_max_completion_tokens(self) -> None:
        model = OpenAIModel("gpt-4.1", api_key="sk-test")
        params = model.request_params(ModelRequest((), (), ()))
        assert params["max_completion_tokens"] == 4096 and "max_tokens" not in params


class TestRetries:
    def test_429_is_retried_with_a_model_retry_event(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([Fault.rate_limited(0.05), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [retry] = [dict(e.data) for e in run.events.of_kind("model_retry")]
        assert retry["status"] == 429 and retry["error_type"] == "RateLimitError"
        assert retry["retry_after"] == 0.05 and retry["operation"] == "chat.completions.create"
        assert len(chat_requests(server)) == 2

    def test_500_and_malformed_json_are_retried(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([Fault.status(500), Fault.malformed(), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert len(run.events.of_kind("model_retry")) == 2

    def test_a_key_the_server_echoes_is_redacted(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve(
            [Fault.status(500, message=f"bad key {SECRET}"), gr.text("done")], api_key=SECRET
        )
        run = agent_at(tmp_path, model).run_sync("job")
        [retry] = [dict(e.data) for e in run.events.of_kind("model_retry")]
        assert "[redacted]" in retry["message"] and SECRET[-12:] not in retry["message"]


class TestModelMistakes:
    def test_invalid_json_arguments_become_an_error_result(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve([bad_arguments("read_file"), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [call] = tool_calls(run)
        assert call["is_error"] and call["tool"] == "read_file"
        assert "were not valid JSON" in call["result"]
        assert "call it again with a JSON object" in call["result"]
        # the model sees what it wrote, and the refusal
        sent = chat_requests(server)[1]["messages"]
        assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"path": "notes.md",'
        assert sent[-1]["role"] == "tool" and sent[-1]["content"].startswith("Error: ")

    def test_a_json_array_of_arguments_is_refused_too(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([bad_arguments("read_file", "[1, 2]"), gr.text("done")])
        [call] = tool_calls(agent_at(tmp_path, model).run_sync("job"))
        assert call["is_error"] and "expected a JSON object, got list" in call["result"]

    def test_an_unknown_tool_becomes_an_error_result(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([gr.tool_call("fly_to_the_moon", speed=3), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [call] = tool_calls(run)
        assert call["is_error"] and "Unknown tool 'fly_to_the_moon'" in call["result"]
        assert "read_file" in call["result"]  # it lists what there is

    def test_an_empty_reply_is_asked_again(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([empty_reply(), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [retry] = [dict(e.data) for e in run.events.of_kind("model_retry")]
        assert retry["error_type"] == "EmptyReply"
        again = chat_requests(server)[1]["messages"][-1]
        assert again["role"] == "user" and "Your reply was empty" in again["content"]

    def test_three_empty_replies_end_the_run_as_for_any_model(
        self, serve: Any, tmp_path: Path
    ) -> None:
        _, model = serve([empty_reply(), empty_reply(), empty_reply()])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and "empty response" in run.reason
        assert len(run.events.of_kind("model_retry")) == 2

    def test_the_run_goes_on_after_all_three(self, serve: Any, tmp_path: Path) -> None:
        script = [
            bad_arguments("write_file"),
            gr.tool_call("no_such_tool"),
            empty_reply(),
            gr.tool_call("write_file", path="a.md", content="ok\n"),
            gr.text("done"),
        ]
        _, model = serve(script)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert [c["is_error"] for c in tool_calls(run)] == [True, True, False]
        assert run.workspace.read_text("a.md") == "ok\n"

    def test_empty_arguments_are_an_empty_object(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([bad_arguments("todo_complete", ""), gr.text("done")])
        [call] = tool_calls(agent_at(tmp_path, model).run_sync("job"))
        assert "valid JSON" not in call["result"] and call["input"] == {}


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message
    return message


class TestBadInput:
    def test_a_wrong_base_url_says_so_at_once(self, tmp_path: Path) -> None:
        with ChatServer() as server:
            url = f"{server.url}/v1"  # a port nothing listens on once it is closed
        model = OpenAIModel(MODEL, base_url=url, retry=RetryPolicy(max_retries=4, base_s=5))
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed"
        assert isinstance(run.error, ModelError)
        message = one_line(run.error)
        assert "could not connect to" in message and "check base_url" in message
        assert not run.events.of_kind("model_retry")

    def test_a_server_that_speaks_the_other_api(self, tmp_path: Path) -> None:
        with MessagesServer([gr.text("hi")]) as server:
            model = OpenAIModel(MODEL, base_url=f"{server.url}/v1", retry=FAST)
            run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and isinstance(run.error, ModelError)
        message = one_line(run.error)
        assert "answers chat completions" in message and "/v1" in message

    def test_a_401(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([gr.text("hi")], api_key=SECRET, server={"api_key": "other"})
        run = agent_at(tmp_path, model).run_sync("job")
        assert isinstance(run.error, ModelError)
        message = one_line(run.error)
        assert "rejected the API key (401)" in message and "OPENAI_API_KEY" in message
        assert SECRET not in message and SECRET[-12:] not in message

    def test_a_model_the_server_lacks(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([gr.text("hi")], server={"models": ["llama3.2"]})
        run = agent_at(tmp_path, model).run_sync("job")
        assert isinstance(run.error, ModelError)
        message = one_line(run.error)
        assert f"has no model {MODEL!r}" in message and "/models lists them" in message

    def test_no_key_for_a_local_server_uses_a_placeholder(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        assert OpenAIModel(MODEL, base_url="http://localhost:11434/v1")._key == LOCAL_KEY
        with pytest.raises(ConfigError) as raised:
            OpenAIModel("gpt-4.1")
        assert one_line(raised.value) == MISSING_KEY

    def test_a_key_with_whitespace_is_refused(self) -> None:
        with pytest.raises(ConfigError, match="whitespace"):
            OpenAIModel(MODEL, api_key="sk-a\nsk-b")

    def test_a_base_url_that_is_not_a_url(self) -> None:
        with pytest.raises(ConfigError, match="http"):
            OpenAIModel(MODEL, base_url="localhost:11434")


class TestAClientPassedIn:
    """``client=`` takes an ``openai.AsyncOpenAI`` configured elsewhere (an Azure client,
    a proxy, custom headers); the adapter's guard, retries and redaction still apply."""

    def test_it_runs_the_loop_and_keeps_its_key_out_of_errors(
        self, serve: Any, tmp_path: Path
    ) -> None:
        import openai

        server, _ = serve(full_job_script(), server={"api_key": SECRET})
        client = openai.AsyncOpenAI(api_key=SECRET, base_url=f"{server.url}/v1", max_retries=0)
        model = OpenAIModel(MODEL, client=client, retry=FAST)
        assert model.base_url == f"{server.url}/v1" and model._key == SECRET
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "completed" and server.remaining == 0
        assert SECRET not in repr(model)

    def test_it_stays_in_its_event_loop(self, serve: Any, tmp_path: Path) -> None:
        import openai

        server, _ = serve([gr.text("one"), gr.text("two")])
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
        model = OpenAIModel(MODEL, client=client, retry=FAST)
        assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
        second = agent_at(tmp_path / "b", model).run_sync("job")
        assert second.status == "failed" and "used in another event loop" in second.reason
        assert len(chat_requests(server)) == 1

    def test_its_own_client_is_rebuilt_for_each_event_loop(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve([gr.text("one"), gr.text("two")])
        assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
        assert agent_at(tmp_path / "b", model).run_sync("job").status == "ended"
        assert len(chat_requests(server)) == 2

    def test_the_network_guard_covers_it(self, tmp_path: Path) -> None:
        import openai

        client = openai.AsyncOpenAI(api_key="k", base_url="https://api.openai.com/v1")
        run = agent_at(tmp_path, OpenAIModel("gpt-4.1", client=client)).run_sync("job")
        assert run.status == "failed" and "api.openai.com was not sent" in run.reason

    def test_a_timeout_holds_for_it(self, serve: Any, tmp_path: Path) -> None:
        import openai

        server, _ = serve([Fault.hang(5.0)])
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
        model = OpenAIModel(MODEL, client=client, timeout=0.2, retry=RetryPolicy(0))
        started = time.monotonic()
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and time.monotonic() - started < 4

    def test_misuse_is_one_line_that_says_what_to_pass(self) -> None:
        import openai

        client = openai.AsyncOpenAI(api_key="k", base_url="http://localhost:11434/v1")
        with pytest.raises(ConfigError, match="either client= or api_key=/base_url="):
            OpenAIModel(MODEL, client=client, base_url="http://localhost:1/v1")
        with pytest.raises(ConfigError, match=r"openai\.AsyncOpenAI") as raised:
            OpenAIModel(MODEL, client=openai.OpenAI(api_key="k"))  # type: ignore[arg-type]
        assert "\n" not in str(raised.value)


class TestSpecStrings:
    def test_model_and_base_url(self) -> None:
        model = resolve_model("openai:qwen2.5:7b@http://localhost:11434/v1")
        assert isinstance(model, OpenAIModel)
        assert (model.model, model.base_url) == ("qwen2.5:7b", "http://localhost:11434/v1")

    def test_model_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        model = resolve_model("openai:gpt-4.1")
        assert isinstance(model, OpenAIModel) and model.base_url == "https://api.openai.com/v1"

    def test_no_model_id(self) -> None:
        with pytest.raises(ModelSpecError, match="needs a model id"):
            resolve_model("openai:@http://localhost:1/v1")

    def test_the_public_name(self) -> None:
        assert gr.OpenAIModel is OpenAIModel and "OpenAIModel" in gr.__all__


def test_the_network_guard_stops_a_remote_base_url(tmp_path: Path) -> None:
    model = OpenAIModel("gpt-4.1", api_key="sk-test")
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "failed"
    assert "network access is off" in str(run.error)
