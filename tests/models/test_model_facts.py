"""Model facts: context windows, the 1M window, and an unknown model's NaN cost said once."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError
from gr_notebook.messages import Usage
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.base import DEFAULT_CONTEXT_WINDOW
from gr_notebook.models.catalog import CONTEXT_1M_BETA, MODELS, facts_of
from gr_notebook.models.pricing import DEFAULT_PRICES, Price, PriceTable, price_key
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import MessagesServer
from tests.conftest import agent_at

KEY = "sk-ant-api03-test-facts-0000"


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


def on(server: MessagesServer, model: str, **options: object) -> AnthropicModel:
    retry = RetryPolicy(max_retries=0)
    return AnthropicModel(model, api_key=KEY, base_url=server.url, retry=retry, **options)  # type: ignore[arg-type]


class TestCatalog:
    def test_every_priced_model_has_facts_and_every_model_a_price(self) -> None:
        assert set(MODELS) == set(DEFAULT_PRICES)

    def test_snapshots_share_their_model_s_facts(self) -> None:
        assert facts_of("claude-sonnet-4-5-20250929") == MODELS["claude-sonnet-4-5"]
        assert facts_of("claude-opus-4-7").context_window == 1_000_000

    def test_an_unknown_model_has_the_default_window(self) -> None:
        assert facts_of("my-local-model").context_window == DEFAULT_CONTEXT_WINDOW
        assert facts_of("my-local-model").long_context == "none"


class TestContextWindow:
    def test_the_window_is_the_model_s_own(self) -> None:
        assert AnthropicModel("claude-haiku-4-5", api_key=KEY).context_window == 200_000
        assert AnthropicModel("claude-opus-4-7", api_key=KEY).context_window == 1_000_000
        assert AnthropicModel("claude-sonnet-4-6", api_key=KEY).context_window == 200_000

    def test_an_explicit_window_wins(self) -> None:
        model = AnthropicModel("claude-opus-4-7", api_key=KEY, context_window=300_000)
        assert model.context_window == 300_000

    def test_context_1m_on_a_model_without_it_is_refused(self) -> None:
        with pytest.raises(ConfigError, match="no 1M-token context window"):
            AnthropicModel("claude-haiku-4-5", api_key=KEY, context_1m=True)

    def test_context_1m_sends_the_beta_header(self, server: MessagesServer, tmp_path: Path) -> None:
        server.add(gr.text("done"))
        model = on(server, "claude-sonnet-4-6", context_1m=True)
        assert model.context_window == 1_000_000
        run = agent_at(tmp_path, model).run_sync("job")
        assert run.status == "ended"
        [request] = server.requests
        assert request.headers["anthropic-beta"] == CONTEXT_1M_BETA

    def test_no_beta_header_without_it_or_where_1m_is_native(
        self, server: MessagesServer, tmp_path: Path
    ) -> None:
        server.add(gr.text("done"))
        server.add(gr.text("done"))
        agent_at(tmp_path / "a", on(server, "claude-sonnet-4-6")).run_sync("job")
        native = on(server, "claude-opus-4-7", context_1m=True)
        assert native.context_window == 1_000_000
        agent_at(tmp_path / "b", native).run_sync("job")
        assert all("anthropic-beta" not in r.headers for r in server.requests)


class TestPrices:
    def test_current_models_are_priced(self) -> None:
        for model in (
            "claude-fable-5-1",
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-opus-5",
            "claude-opus-4-7",
            "claude-sonnet-4-6",
            "claude-sonnet-5",
            "claude-haiku-4-5",
        ):
            assert PriceTable().price_of(model) is not None, model
            assert facts_of(model).context_window >= 200_000

    def test_the_current_lineup_has_a_1m_window(self) -> None:
        for model in (
            "claude-fable-5-1",
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
        ):
            facts = facts_of(model)
            assert (facts.context_window, facts.long_context) == (1_000_000, "native"), model
            assert facts.thinking == "adaptive", model

    def test_a_long_prompt_tier_bills_the_whole_call_at_its_price(self) -> None:
        haiku = PriceTable().price_of("claude-haiku-5-5")
        assert haiku is not None and haiku.long_prompt is not None
        short = Usage(input_tokens=60_000, output_tokens=1_000, cache_read_input_tokens=40_000)
        assert haiku.cost(short) == pytest.approx(
            (60_000 * 0.10 + 1_000 * 0.50 + 40_000 * 0.01) / 1e6
        )
        long = Usage(input_tokens=60_000, output_tokens=1_000, cache_read_input_tokens=40_001)
        assert haiku.cost(long) == pytest.approx(
            (60_000 * 0.50 + 1_000 * 2.50 + 40_001 * 0.05) / 1e6
        )
        assert "long_prompt=(100000" in repr(haiku)
        assert "long_prompt" not in repr(PriceTable().price_of("claude-sonnet-4-6"))

    def test_a_malformed_tier_is_one_line_that_shows_the_shape(self) -> None:
        with pytest.raises(ConfigError, match=r"\(prompt tokens, Price\)"):
            Price(1, 2, 3, 4, long_prompt=(100_000, 0.5))  # type: ignore[arg-type]

    def test_an_unknown_model_costs_nan(self) -> None:
        assert math.isnan(PriceTable().cost("claude-future-9", Usage(10, 10)))
        assert price_key("claude-future-9-latest") == "claude-future-9"

    def test_an_unknown_model_says_so_once(
        self, server: MessagesServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        for _ in range(3):
            server.add(gr.tool_call("list_files"))
        server.add(gr.text("done"))
        caplog.set_level(logging.WARNING, logger="gr_notebook")
        run = agent_at(tmp_path, on(server, "claude-future-9")).run_sync("job")
        assert run.status == "ended"
        calls = run.events.of_kind("model_call")
        assert len(calls) == 4
        assert all(e.data["cost_usd"] is None for e in calls)
        said = [r for r in caplog.records if "no price for model" in r.getMessage()]
        assert len(said) == 1
        assert "'claude-future-9'" in said[0].getMessage()
        assert "prices=" in said[0].getMessage()

    def test_a_priced_model_says_nothing(
        self, server: MessagesServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        server.add(gr.text("done"))
        caplog.set_level(logging.WARNING, logger="gr_notebook")
        run = agent_at(tmp_path, on(server, "claude-sonnet-4-6")).run_sync("job")
        assert run.status == "ended"
        assert run.events.of_kind("model_call")[0].data["cost_usd"] is not None
        assert not [r for r in caplog.records if "no price for model" in r.getMessage()]


def test_the_openai_adapter_says_so_once_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from gr_notebook.models.openai_model import OpenAIModel
    from gr_notebook.testing import ChatServer

    turns = [gr.tool_call("list_files"), gr.tool_call("list_files"), gr.text("done")]
    caplog.set_level(logging.WARNING, logger="gr_notebook")
    with ChatServer(turns) as server:
        model = OpenAIModel("qwen2.5:7b", base_url=f"{server.url}/v1", retry=RetryPolicy(0))
        run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "ended"
    said = [r for r in caplog.records if "no price for model" in r.getMessage()]
    assert len(said) == 1 and "'qwen2.5:7b'" in said[0].getMessage()
