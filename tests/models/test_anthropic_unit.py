"""The Anthropic adapter's parts that need no server: mapping, prices, retries, the key, the
network guard."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

import gr_notebook as gr
import gr_notebook.models
from gr_notebook.errors import ConfigError, ModelSpecError, NetworkDisabled
from gr_notebook.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from gr_notebook.models import resolve_model
from gr_notebook.models.anthropic_model import MISSING_KEY, AnthropicModel
from gr_notebook.models.base import ModelRequest, SystemBlock, ToolSpec
from gr_notebook.models.network import check_network, is_loopback
from gr_notebook.models.pricing import DEFAULT_PRICES, Price, PriceTable, price_key
from gr_notebook.models.retry import RetryPolicy, parse_retry_after

KEY = "sk-ant-unit-0123456789"


def model(**options: object) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", api_key=KEY, **options)  # type: ignore[arg-type]


def request() -> ModelRequest:
    return ModelRequest(
        system=(SystemBlock(2, "## Todo list\n- [ ] a"), SystemBlock(1, "You are careful.")),
        messages=(
            Message.user("Start the job."),
            Message(
                "assistant", (TextBlock(""), ToolUseBlock("toolu_1", "read_file", {"path": "a"}))
            ),
            Message("user", (ToolResultBlock("toolu_1", "", is_error=True),)),
        ),
        tools=(
            ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),
            ToolSpec("write_file", "Write a file.", {"type": "object", "required": ("path",)}),
        ),
    )


class TestRequestMapping:
    def test_layers_map_to_system_blocks_tools_and_messages(self) -> None:
        params = model(layer2="system").request_params(request())
        assert params["model"] == "claude-sonnet-4-5"
        assert [b["text"] for b in params["system"]] == [
            "You are careful.",
            "## Todo list\n- [ ] a",
        ]
        assert [t["name"] for t in params["tools"]] == ["read_file", "write_file"]
        assert params["tools"][1]["input_schema"] == {"type": "object", "required": ["path"]}
        user, assistant, result = params["messages"]
        assert user == {"role": "user", "content": [{"type": "text", "text": "Start the job."}]}
        # an empty text block is dropped (the API refuses them); the tool_use stays as it is
        assert assistant["content"] == [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
        ]
        assert result["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "(no output)",
                "is_error": True,
            }
        ]

    def test_cache_breakpoint_ends_the_stable_prefix(self) -> None:
        params = model(layer2="system").request_params(request())
        layer1, layer2 = params["system"]
        assert layer1["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in layer2  # layer 2 changes every turn: after the breakpoint
        assert all("cache_control" not in t for t in params["tools"])  # tools precede layer 1

    def test_without_layer_1_the_last_tool_carries_the_breakpoint(self) -> None:
        bare = ModelRequest(system=(), messages=(Message.user("hi"),), tools=request().tools)
        params = model().request_params(bare)
        assert params["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "system" not in params

    def test_blank_text_is_never_sent(self) -> None:
        blank = ModelRequest(
            system=(SystemBlock(1, "Careful."), SystemBlock(2, "  \n")),
            messages=(Message.user("hi"), Message("assistant", (TextBlock("\n\n"),))),
            tools=(),
        )
        params = model().request_params(blank)
        assert [b["text"] for b in params["system"]] == ["Careful."]
        assert [m["role"] for m in params["messages"]] == ["user"]

    def test_cache_false_sends_no_breakpoint(self) -> None:
        params = model(cache=False).request_params(request())
        assert "cache_control" not in str(params)


class TestPrices:
    def test_snapshot_ids_price_as_their_family(self) -> None:
        assert price_key("claude-sonnet-4-5-20250929") == "claude-sonnet-4-5"
        assert price_key("claude-3-5-haiku-latest") == "claude-3-5-haiku"
        usage = Usage(1_000_000, 100_000, 200_000, 2_000_000)
        # 3.00 input + 1.50 output + 0.75 cache writes + 0.60 cache reads
        assert PriceTable().cost("claude-sonnet-4-5-20250929", usage) == pytest.approx(5.85)

    def test_an_unknown_model_costs_nan_never_a_guess(self) -> None:
        assert math.isnan(PriceTable().cost("claude-future-9", Usage(10, 10)))

    def test_the_table_can_be_extended_and_overridden(self) -> None:
        table = PriceTable({"claude-future-9": Price.standard(2.0, 10.0)})
        assert table.cost("claude-future-9", Usage(1_000_000)) == pytest.approx(2.0)
        assert table.price_of("claude-future-9") == Price(2.0, 10.0, 2.5, 0.2)
        assert table.price_of("claude-sonnet-4-5") == DEFAULT_PRICES["claude-sonnet-4-5"]
        with pytest.raises(ConfigError, match=r"must be a gr\.Price"):
            PriceTable({"x": 3.0})  # type: ignore[dict-item]
        with pytest.raises(ConfigError, match=">= 0"):
            Price(-1, 0, 0, 0)

    def test_input_cost_leaves_the_output_out(self) -> None:
        price = DEFAULT_PRICES["claude-haiku-4-5"]
        assert price.input_cost(Usage(1_000_000, 1_000_000)) == pytest.approx(1.0)


class TestRetries:
    def test_backoff_doubles_up_to_the_cap_and_retry_after_wins(self) -> None:
        policy = RetryPolicy(max_retries=6, base_s=0.5, max_s=3.0)
        assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
        assert policy.delay(1, retry_after=7.0) == 7.0

    def test_retry_after_in_seconds_or_as_a_date(self) -> None:
        assert parse_retry_after("2") == 2.0
        assert parse_retry_after("0.25") == 0.25
        now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
        later = format_datetime(now + timedelta(seconds=30), usegmt=True)
        assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
        assert parse_retry_after("soon") is None
        assert parse_retry_after(None) is None
        assert parse_retry_after("-5") == 0.0

    def test_bad_policies_are_refused(self) -> None:
        with pytest.raises(ConfigError, match="max_retries"):
            RetryPolicy(max_retries=-1)
        with pytest.raises(ConfigError, match="base_s"):
            RetryPolicy(base_s=-0.1)


class TestConstruction:
    def test_a_missing_key_says_how_to_set_it_and_how_to_go_offline(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        with pytest.raises(ConfigError) as caught:
            AnthropicModel("claude-sonnet-4-5")
        assert str(caught.value) == MISSING_KEY
        assert "ANTHROPIC_API_KEY" in MISSING_KEY and "model='simulated'" in MISSING_KEY

    def test_the_key_is_read_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        adapter = AnthropicModel("claude-haiku-4-5")
        assert adapter.name == "anthropic:claude-haiku-4-5"
        assert KEY not in repr(adapter)

    def test_the_sdks_own_retries_are_off_on_a_client_we_build(self) -> None:
        assert model()._client.max_retries == 0

    def test_a_client_passed_in_is_used_as_it_is(self) -> None:
        import anthropic

        client = anthropic.AsyncAnthropic(api_key=KEY, max_retries=3)
        adapter = AnthropicModel("claude-sonnet-4-5", client=client, max_retries=2)
        assert adapter._client is client and client.max_retries == 3
        assert adapter.retry.max_retries == 2

    def test_a_client_and_a_key_together_are_refused(self) -> None:
        import anthropic

        client = anthropic.AsyncAnthropic(api_key=KEY)
        with pytest.raises(ConfigError, match="either client= or api_key="):
            AnthropicModel("claude-sonnet-4-6", client=client, api_key=KEY)

    def test_the_timeout_is_the_clients_unless_set(self) -> None:
        default = model()._client.timeout  # the SDK's: 600 s, 5 s to connect
        assert (default.read, default.connect) == (600.0, 5.0)
        assert model(timeout=30)._client.timeout == 30.0
        assert model()._timeout() == {} and model(timeout=30)._timeout() == {"timeout": 30.0}

    def test_the_sync_client_is_refused(self) -> None:
        import anthropic

        with pytest.raises(ConfigError, match="AsyncAnthropic"):
            AnthropicModel("claude-sonnet-4-5", client=anthropic.Anthropic(api_key=KEY))  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"max_tokens": 0}, "max_tokens"),
            ({"timeout": -1}, "timeout"),
        ],
    )
    def test_bad_options_are_refused(self, options: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            model(**options)

    def test_the_spec_string(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        resolved = resolve_model("anthropic:claude-opus-4-5")
        assert isinstance(resolved, AnthropicModel) and resolved.model == "claude-opus-4-5"
        assert isinstance(gr.Agent(model="anthropic:claude-haiku-4-5").model, gr.AnthropicModel)
        with pytest.raises(ModelSpecError, match="needs a model id"):
            resolve_model("anthropic:")

    def test_the_spec_string_without_a_key_is_the_same_clear_error(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
            gr.Agent(model="anthropic:claude-haiku-4-5")


class TestNetworkGuard:
    def test_the_suite_runs_with_the_guard_on(self) -> None:
        assert gr_notebook.models.ALLOW_NETWORK is False

    def test_loopback_passes_everything_else_fails_fast(self) -> None:
        for url in ("http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:9"):
            assert is_loopback(url)
            check_network(url)
        with pytest.raises(NetworkDisabled, match=r"api\.anthropic\.com was not sent"):
            check_network("https://api.anthropic.com")

    async def test_a_request_to_the_real_api_never_leaves(self) -> None:
        with pytest.raises(NetworkDisabled):
            await model().complete(request())

    def test_a_proxy_off_this_machine_is_the_network_too(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
        with pytest.raises(NetworkDisabled, match=r"through the proxy 10\.9\.9\.9"):
            check_network("http://127.0.0.1:8080")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        check_network("http://127.0.0.1:8080")

    def test_allowing_the_network_lifts_the_guard(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(gr_notebook.models, "ALLOW_NETWORK", True)
        check_network("https://api.anthropic.com")

    def test_the_environment_variable_sets_the_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from gr_notebook.models.network import allow_network_default

        monkeypatch.setenv("GR_NOTEBOOK_ALLOW_NETWORK", "0")
        assert allow_network_default() is False
        monkeypatch.setenv("GR_NOTEBOOK_ALLOW_NETWORK", "1")
        assert allow_network_default() is True


class TestKeyHygiene:
    @pytest.mark.parametrize(
        "key", ["sk-ant-one\nsk-ant-two", "sk-ant-abc123 xyz789", "sk-ant-\tqqq", "sk-ant-\r\nzzz"]
    )
    def test_a_key_with_whitespace_inside_is_refused_without_echoing_it(self, key: str) -> None:
        with pytest.raises(ConfigError, match="whitespace") as caught:
            model_with_key(key)
        for part in key.split():
            assert part not in str(caught.value)
        assert caught.value.__cause__ is None and caught.value.__context__ is None

    def test_the_environment_key_is_checked_too(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env\nsecond")
        with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
            AnthropicModel("claude-sonnet-4-5")

    def test_a_client_passed_in_with_such_a_key_is_refused(self) -> None:
        import anthropic

        client = anthropic.AsyncAnthropic(api_key="sk-ant-one\nsk-ant-two")
        with pytest.raises(ConfigError, match="whitespace"):
            AnthropicModel("claude-sonnet-4-5", client=client)

    def test_surrounding_whitespace_is_trimmed_as_before(self) -> None:
        assert model_with_key(f"  {KEY}\n").base_url  # a key read from a file keeps working


def model_with_key(key: str) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", api_key=key)
