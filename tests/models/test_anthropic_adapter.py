"""The Anthropic adapter end to end: the real SDK, the local Messages API server, and the
loop. Retries, failures, cancellation, caching, costs, token counting and the API key."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.state import RunTracker
from gr_notebook.errors import NetworkDisabled
from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.pricing import DEFAULT_PRICES
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import Fault, MessagesServer
from tests.conftest import agent_at, bootstrap_script, full_job_script

SECRET = "sk-ant-api03-SECRET-do-not-leak-7f3a9c"
MODEL = "claude-sonnet-4-6"
FAST = RetryPolicy(max_retries=3, base_s=0.01, max_s=0.05)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[MessagesServer, AnthropicModel]]]:
    """A server with the given turns, and an adapter on it that builds its own client."""
    servers: list[MessagesServer] = []

    def start(turns: list[Any], **options: Any) -> tuple[MessagesServer, AnthropicModel]:
        server = MessagesServer(turns, min_cacheable_tokens=options.pop("min_cache", 1024))
        server.start()
        servers.append(server)
        options.setdefault("retry", FAST)
        model = AnthropicModel(MODEL, api_key=SECRET, base_url=server.url, **options)
        return server, model

    yield start
    for server in servers:
        server.close()


def retries(run: gr.Run) -> list[dict[str, Any]]:
    return [dict(e.data) for e in run.events.of_kind("model_retry")]


class TestRetries:
    def test_429_waits_as_told_then_succeeds(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([Fault.rate_limited(0.05), gr.text("done")])
        started = time.perf_counter()
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [retry] = retries(run)
        assert retry["status"] == 429 and retry["error_type"] == "RateLimitError"
        assert retry["retry_after"] == 0.05 and retry["delay_s"] == 0.05
        assert (retry["attempt"], retry["max_retries"]) == (1, 3)
        assert time.perf_counter() - started >= 0.05
        assert len([r for r in server.requests if r.path == "/v1/messages"]) == 2
        tracker = RunTracker()
        for event in run.events:
            tracker.add(event)
        [line] = [e for e in tracker.timeline if e.kind == "model_retry"]
        assert line.text == "Model retry 1/3 after 429 RateLimitError, in 0.05 s (retry-after)"
        assert line.tone == "notice"

    def test_529_and_500_back_off_and_retry(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([Fault.overloaded(), Fault.status(500), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert [(r["status"], r["error_type"], r["delay_s"]) for r in retries(run)] == [
            (529, "OverloadedError", 0.01),
            (500, "InternalServerError", 0.02),
        ]

    def test_malformed_json_is_retried(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([Fault.malformed(), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert [r["error_type"] for r in retries(run)] == ["JSONDecodeError"]

    def test_a_response_slower_than_the_timeout_is_retried(
        self, serve: Any, tmp_path: Path
    ) -> None:
        _, model = serve([Fault.slow(1.0, then=gr.text("late")), gr.text("done")], timeout=0.2)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended" and run.summary()["turns"] == 1
        # the adapter's deadline on the whole try, which starts before the SDK's read timeout
        assert [r["error_type"] for r in retries(run)] == ["RequestTimedOut"]

    def test_when_retries_run_out_the_run_fails_clearly_and_can_be_resumed(
        self, serve: Any, tmp_path: Path
    ) -> None:
        _, model = serve([*bootstrap_script()[:3], *[Fault.overloaded()] * 4])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed"
        assert "the Anthropic API still failed after 3 retries (messages.create)" in run.reason
        assert "529 overloaded_error" in run.reason
        assert "start the job again to resume it" in run.reason
        assert len(retries(run)) == 3
        # Nothing is lost: the workspace has the first turns' work, the store the run.
        assert run.workspace.exists("workspace_summary.md")
        with gr.Store(tmp_path / "store.sqlite") as store:
            [row] = [r for r in store.runs() if r["run_id"] == run.run_id]
            assert row["status"] == "failed"
            assert len(store.events(run.run_id)) == len(run.events)
        # The job is picked up again by a new run on the same workspace.
        _, healthy = serve(full_job_script())
        again = agent_at(tmp_path, healthy).run_sync("job")
        assert again.status == "completed" and again.job is not None

    def test_errors_that_retrying_cannot_fix_fail_at_once(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([Fault.status(401, message="invalid x-api-key")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and not retries(run)
        assert "Anthropic rejected the API key (401 authentication_error)" in run.reason
        assert "ANTHROPIC_API_KEY" in run.reason
        _, model = serve([Fault.status(400, message="messages: bad")])
        run = agent_at(tmp_path / "b", model).run_sync("job")
        assert run.status == "failed" and not retries(run)
        assert "400 invalid_request_error: messages: bad" in run.reason

    def test_the_servers_x_should_retry_decides(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([Fault.status(500, headers={"x-should-retry": "false"}), gr.text("x")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and not retries(run)

    @pytest.mark.parametrize(
        ("headers", "delay"),
        [
            ({"retry-after-ms": "30"}, 0.03),
            ({"retry-after": "3600"}, 0.01),  # too long to hold a run for: back off instead
            ({"retry-after": "0"}, 0.01),  # and no tight loop either
        ],
    )
    def test_retry_after_headers(
        self, serve: Any, tmp_path: Path, headers: dict[str, str], delay: float
    ) -> None:
        _, model = serve([Fault.status(429, headers=headers), gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert [r["delay_s"] for r in retries(run)] == [delay]


class TestClientsAndLoops:
    def test_one_model_across_run_sync_calls_sends_each_request_once(
        self, serve: Any, tmp_path: Path
    ) -> None:
        server, model = serve([gr.text("one"), gr.text("two")])
        first = agent_at(tmp_path / "a", model).run_sync("job")  # each run_sync: a new loop
        second = agent_at(tmp_path / "b", model).run_sync("job")
        assert (first.status, second.status) == ("ended", "ended")
        assert not retries(first) and not retries(second)
        assert len(server.requests) == 2

    def test_a_client_passed_in_stays_in_its_event_loop(self, serve: Any, tmp_path: Path) -> None:
        import anthropic

        server, _ = serve([gr.text("one"), gr.text("two")])
        client = anthropic.AsyncAnthropic(api_key=SECRET, base_url=server.url, max_retries=0)
        model = AnthropicModel(MODEL, client=client)
        assert agent_at(tmp_path / "a", model).run_sync("job").status == "ended"
        second = agent_at(tmp_path / "b", model).run_sync("job")
        assert second.status == "failed"
        assert "used in another event loop" in second.reason
        assert len(server.requests) == 1

    def test_blank_text_from_the_model_is_not_sent_back(self, serve: Any, tmp_path: Path) -> None:
        blank_then_tool = ModelResponse(
            (TextBlock("\n\n"), ToolUseBlock("", "list_files", {})), "tool_use"
        )
        server, model = serve([blank_then_tool, gr.text("done")])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"  # the server refuses blank text blocks, as the API does
        body = server.requests[1].body
        assert body is not None
        assistant = body["messages"][1]
        assert [b["type"] for b in assistant["content"]] == ["tool_use"]

    def test_a_full_context_window_fails_clearly(self, serve: Any, tmp_path: Path) -> None:
        full = ModelResponse((TextBlock("..."),), "model_context_window_exceeded")  # type: ignore[arg-type]
        _, model = serve([full])
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "failed" and "no longer fits" in run.reason


class TestCancellation:
    async def test_cancel_cuts_the_http_request(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([Fault.hang(30)])
        run = agent_at(tmp_path, model).start("job")
        await _eventually(lambda: len(server.requests) == 1)
        started = time.perf_counter()
        run.cancel("stopped by the person")
        await run.wait()
        assert run.status == "cancelled"
        assert time.perf_counter() - started < 1.0
        await _eventually(lambda: server.disconnects == 1)

    async def test_cancel_during_a_backoff_does_not_wait_it_out(
        self, serve: Any, tmp_path: Path
    ) -> None:
        slow = RetryPolicy(max_retries=3, base_s=30.0)
        server, model = serve([Fault.status(503), gr.text("never")], retry=slow)
        run = agent_at(tmp_path, model).start("job")
        await _eventually(lambda: bool(run.events.of_kind("model_retry")))
        started = time.perf_counter()
        run.cancel()
        await run.wait()
        assert run.status == "cancelled" and time.perf_counter() - started < 1.0
        assert server.remaining == 1  # the retry was never sent


class TestCachingAndCost:
    def test_the_stable_prefix_is_written_once_then_read(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve(full_job_script(), min_cache=512)
        run = agent_at(tmp_path, model).run_sync("job")
        turns = run.turns_df()
        assert turns.cache_write_tokens.iloc[0] > 0 and turns.cache_read_tokens.iloc[0] == 0
        assert (turns.cache_read_tokens.iloc[1:] > 0).all()
        body = server.requests[0].body
        assert body is not None
        [layer1] = body["system"]  # layer 2 is at the tail of the last user turn
        assert layer1["cache_control"] == {"type": "ephemeral"}
        price = DEFAULT_PRICES[MODEL]
        first = turns.iloc[0]
        expected = (
            first.input_tokens * price.input
            + first.output_tokens * price.output
            + first.cache_write_tokens * price.cache_write
        ) / 1e6
        assert first.cost_usd == pytest.approx(expected)
        # Every prompt token counts toward the budget, cached or not.
        used = turns.input_tokens + turns.output_tokens
        used += turns.cache_read_tokens + turns.cache_write_tokens
        assert turns.tokens_used.iloc[-1] == used.sum()
        assert run.summary()["cost_usd"] == pytest.approx(turns.cost_usd.sum())
        [finished] = run.events.of_kind("run_finished")
        assert finished.data["tokens_used"] == used.sum()  # what Budget.suggest learns from

    def test_without_cache_nothing_is_cached(self, serve: Any, tmp_path: Path) -> None:
        _, model = serve([*bootstrap_script()[:3], gr.text("stop")], cache=False, min_cache=512)
        turns = agent_at(tmp_path, model).run_sync("job").turns_df()
        assert (turns.cache_read_tokens == 0).all() and (turns.cache_write_tokens == 0).all()

    def test_an_unpriced_model_has_nan_cost(self, serve: Any, tmp_path: Path) -> None:
        server, _ = serve([gr.text("done")])
        model = AnthropicModel("claude-unknown-9", api_key=SECRET, base_url=server.url)
        turns = agent_at(tmp_path, model).run_sync("job").turns_df()
        assert math.isnan(turns.cost_usd.iloc[0])

    def test_the_simulated_model_has_no_price_either(self, tmp_path: Path) -> None:
        turns = agent_at(tmp_path, gr.SimulatedModel(), max_iterations=3).run_sync("job").turns_df()
        assert turns.cost_usd.isna().all()


class TestCountTokens:
    def test_a_request_over_the_budget_is_never_sent(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([gr.text("done")], count_tokens=True)
        budget = gr.Budget(max_tokens=200, max_iterations=10)
        run = agent_at(tmp_path, model, budget=budget, max_iterations=None).run_sync("job")
        assert run.status == "budget_exhausted"
        assert "counted before sending" in run.reason and "it was not sent" in run.reason
        assert [r.path for r in server.requests] == ["/v1/messages/count_tokens"]
        [event] = run.events.of_kind("request_over_budget")
        assert event.data["needed"] > event.data["remaining"] == 200

    def test_within_the_budget_the_request_goes(self, serve: Any, tmp_path: Path) -> None:
        server, model = serve([gr.text("done")], count_tokens=True)
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        assert [r.path for r in server.requests] == [
            "/v1/messages/count_tokens",
            "/v1/messages",
        ]


def test_the_api_key_never_leaves_the_client(
    serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Events, the store, reprs, the dashboard, logs and magic output: none has the key."""
    from IPython.testing import globalipapp
    from IPython.utils.capture import capture_output

    from gr_notebook.jupyter.widgets import Dashboard

    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx's included
    server, model = serve([Fault.rate_limited(0.01), *full_job_script()])
    the_agent = agent_at(tmp_path, model)
    run = the_agent.run_sync("job")
    assert run.status == "completed"
    dashboard = Dashboard(run)
    shell = globalipapp.get_ipython()  # the magic tests' shell: one per process
    shell.run_line_magic("load_ext", "gr_notebook")
    shell.user_ns["leak_check_run"] = run
    try:
        with capture_output() as shown:
            shell.run_line_magic("agent", "status --run leak_check_run")
    finally:
        del shell.user_ns["leak_check_run"]
    assert run.run_id in shown.stdout
    assert f"${run.summary()['cost_usd']:.4f}" in shown.stdout  # priced: the status shows it
    places = {
        "events": json.dumps([dict(e.data) for e in run.events], default=str),
        "store": (tmp_path / "store.sqlite").read_bytes().decode("latin-1"),
        "reprs": " ".join(map(repr, (model, the_agent, run, run.summary()))),
        "dashboard": json.dumps(dashboard.state(), default=str)
        + " ".join(str(getattr(w, "value", "")) for w in dashboard.children),
        "logs": caplog.text,
        "magic output": shown.stdout + shown.stderr,
        "workspace": " ".join(
            p.read_text(errors="replace") for p in (tmp_path / "ws").rglob("*") if p.is_file()
        ),
    }
    assert server.requests[0].headers.get("authorization") == f"Bearer {SECRET}"  # it was sent
    for place, text in places.items():
        assert SECRET not in text, f"the API key leaked into the {place}"
        assert SECRET[-12:] not in text, f"part of the API key leaked into the {place}"


async def _eventually(condition: Callable[[], bool], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_the_agent_magic_runs_on_the_spec_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.testing import globalipapp
    from IPython.utils.capture import capture_output

    with MessagesServer(full_job_script()) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)  # the SDK reads it
        monkeypatch.chdir(tmp_path)
        shell = globalipapp.get_ipython()
        shell.run_line_magic("load_ext", "gr_notebook")
        try:
            with capture_output() as shown:
                shell.run_cell_magic(
                    "agent", f"--model anthropic:{MODEL} --out on_claude", "# A job\n- one\n"
                )
            run = shell.user_ns["on_claude"]
            assert run.status == "completed", shown.stderr
            assert run.turns_df().cost_usd.notna().all()
            assert SECRET not in shown.stdout + shown.stderr
        finally:
            shell.user_ns.pop("on_claude", None)


def test_a_redirect_to_a_refused_host_fails_like_any_refused_request(
    serve: Any, tmp_path: Path
) -> None:
    """A 307 from the allowed local server to a host off this machine is refused before it
    is sent: the guard sees every request the client makes, not only the base URL."""
    elsewhere = "http://10.9.9.9:8080/v1/messages"
    server, model = serve([Fault.status(307, headers={"location": elsewhere}), gr.text("done")])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "failed"
    assert isinstance(run.error, NetworkDisabled)
    assert "the request to 10.9.9.9 was not sent" in str(run.error)
    assert retries(run) == []  # refused at once, like any refused request: no retry
    assert len(server.requests) == 1


def test_a_redirect_is_guarded_on_a_client_passed_in(tmp_path: Path) -> None:
    import anthropic

    elsewhere = "http://10.9.9.9:8080/v1/messages"
    with MessagesServer([Fault.status(307, headers={"location": elsewhere})]) as server:
        client = anthropic.AsyncAnthropic(api_key=SECRET, base_url=server.url, max_retries=0)
        run = agent_at(tmp_path, AnthropicModel(MODEL, client=client)).run_sync("job")
    assert isinstance(run.error, NetworkDisabled), run.error


def _chain(error: BaseException | None) -> str:
    """Every exception in ``error``'s chain, with its traceback, as a person would see it."""
    import traceback

    return "".join(traceback.format_exception(error)) if error is not None else ""


def test_an_api_key_echoed_by_the_server_is_redacted(
    serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A proxy or server that echoes the key back: run.error, its chain, events and logs
    carry none of its forms."""
    caplog.set_level(logging.DEBUG)
    echo = f"invalid x-api-key {SECRET!r} ({json.dumps(SECRET)}) {SECRET}"
    _server, model = serve([Fault.status(400, message=echo)])
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "failed"
    places = {
        "run.error": _chain(run.error),
        "reason": run.reason or "",
        "events": json.dumps([dict(e.data) for e in run.events], default=str),
        "logs": caplog.text,
    }
    for place, text in places.items():
        assert SECRET[-12:] not in text, f"the API key leaked into {place}"
    assert "[redacted]" in str(run.error)
