"""Extended thinking on the local Messages API server, driven by the real SDK: the blocks it
signs, the requests it refuses with the API's 400s, and its prompt cache."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from gr_notebook.messages import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.models.scripted import text
from gr_notebook.testing import MessagesServer
from gr_notebook.testing.prompt_cache import PromptCache
from gr_notebook.testing.thinking import ThinkingSigner

MODEL = "claude-local-test"
ON = {"type": "enabled", "budget_tokens": 1024}
USE = ToolUseBlock("toolu_1", "read_file", {})


@pytest.fixture
async def server() -> AsyncIterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


async def create(server: MessagesServer, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": "hello"}],
    } | kwargs
    async with anthropic.AsyncAnthropic(
        api_key="test-key", base_url=server.url, max_retries=0
    ) as sdk:
        return await sdk.messages.create(**params)


async def refused(server: MessagesServer, **kwargs: Any) -> str:
    before = server.remaining
    with pytest.raises(anthropic.BadRequestError) as raised:
        await create(server, **kwargs)
    assert server.remaining == before  # refused before a turn was spent
    body = raised.value.body
    assert isinstance(body, dict)
    return str(body["error"]["message"])


def loop(*assistant_turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A user turn, then each assistant turn answered by a tool result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, content in enumerate(assistant_turns):
        messages.append({"role": "assistant", "content": content})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}
        messages.append({"role": "user", "content": [result]})
    return messages


def use(i: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {}}


async def signed_block(server: MessagesServer) -> dict[str, Any]:
    server.add(text("thinking"))
    reply = await create(server, thinking=ON)
    return reply.content[0].model_dump(exclude_none=True)


async def test_a_reply_with_thinking_on_opens_with_a_signed_block(server: MessagesServer) -> None:
    server.add(text("plain"))
    server.add(ModelResponse((ThinkingBlock("Mine.", "forged"), TextBlock("hi"))))
    server.add(ModelResponse((RedactedThinkingBlock("forged"), TextBlock("hi"))))
    server.add(ModelResponse((TextBlock("quiet"),), extra={"thinking": False}))
    server.add(text("hidden"))
    made = await create(server, thinking=ON)
    assert [b.type for b in made.content] == ["thinking", "text"]
    assert made.content[0].thinking == "Thinking through turn 1." and made.content[0].signature
    scripted = await create(server, thinking=ON)
    assert scripted.content[0].thinking == "Mine."
    assert scripted.content[0].signature != "forged"  # the server signs, whatever the script
    redacted = await create(server, thinking=ON)
    assert redacted.content[0].type == "redacted_thinking" and redacted.content[0].data != "forged"
    quiet = await create(server, thinking={"type": "adaptive"})
    assert [b.type for b in quiet.content] == ["text"]
    omitted = await create(server, thinking={"type": "adaptive", "display": "omitted"})
    assert omitted.content[0].thinking == "" and omitted.content[0].signature


async def test_a_scripted_thought_without_thinking_on_is_a_script_error(
    server: MessagesServer,
) -> None:
    server.add(ModelResponse((ThinkingBlock("Mine.", ""), TextBlock("hi"))))
    with pytest.raises(anthropic.InternalServerError, match="needs thinking enabled"):
        await create(server)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size",
        ),
        (
            {"thinking": ON, "extra_body": {"temperature": 0.5}},
            "`temperature` may only be set to 1",
        ),
        (
            {"thinking": ON, "tool_choice": {"type": "any"}},
            "Thinking may not be enabled when tool_choice forces tool use.",
        ),
        ({"thinking": {"type": "sometimes"}}, "thinking.type: Input tag 'sometimes'"),
    ],
)
async def test_a_bad_thinking_setting_is_refused(
    server: MessagesServer, options: dict[str, Any], message: str
) -> None:
    server.add(text("never served"))
    assert (await refused(server, **options)).startswith(message)


async def test_the_loops_opening_thinking_is_required_and_only_it(server: MessagesServer) -> None:
    block = await signed_block(server)
    server.add(text("ok"))
    server.add(text("ok"))
    # a model that thinks only before its first call (Claude 3.7): the opener carries it
    assert (await create(server, thinking=ON, messages=loop([block, use(0)], [use(1)]))).content
    # the opener lost it, even though a later message has one
    message = await refused(server, thinking=ON, messages=loop([use(0)], [block, use(1)]))
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`."
    )
    # a user turn that answers no tool starts a new loop: its opener is the one that counts
    fresh = [*loop([use(0)]), {"role": "assistant", "content": "noted"}]
    fresh += [
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": [block, use(9)]},
    ]
    fresh.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]})
    assert (await create(server, thinking=ON, messages=fresh)).content
    # with thinking off there is nothing to keep
    server.add(text("ok"))
    assert (await create(server, messages=loop([use(0)]))).content


async def test_thinking_that_comes_back_changed_or_misplaced_is_refused(
    server: MessagesServer,
) -> None:
    block = await signed_block(server)
    server.add(text("never served"))
    altered = {**block, "thinking": block["thinking"] + " (edited)"}
    message = await refused(server, thinking=ON, messages=loop([altered, use(0)]))
    assert message == "messages.1.content.0: Invalid `signature` in `thinking` block"
    forged = {"type": "redacted_thinking", "data": ThinkingSigner().redacted_data()}
    message = await refused(server, thinking=ON, messages=loop([forged, use(0)]))
    assert message == "messages.1.content.0: Invalid `data` in `redacted_thinking` block"
    unsigned = {"type": "thinking", "thinking": "x"}
    message = await refused(server, thinking=ON, messages=loop([unsigned, use(0)]))
    assert message == "messages.1.content.0.thinking.signature: Field required"
    in_user = [{"role": "user", "content": [block]}]
    message = await refused(server, thinking=ON, messages=in_user)
    assert message == "messages.0.content.0: thinking blocks may only appear in assistant turns"
    cached = {**block, "cache_control": {"type": "ephemeral"}}
    message = await refused(server, thinking=ON, messages=loop([cached, use(0)]))
    assert message.startswith("messages.1.content.0.thinking.cache_control: Extra inputs")
    prefill = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [block]}]
    message = await refused(server, messages=prefill)
    assert message.startswith(
        "messages.1.content.0: When thinking is disabled, an `assistant` message in the final "
        "position cannot contain `thinking`."
    )


def test_changing_thinking_invalidates_the_cached_conversation_but_not_tools_or_system() -> None:
    cache = PromptCache(min_cacheable_tokens=10)
    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": "rules " * 40, "cache_control": mark}]
    turn = [{"type": "text", "text": "a long question " * 20, "cache_control": mark}]
    body: dict[str, Any] = {
        "model": MODEL,
        "system": system,
        "messages": [{"role": "user", "content": turn}],
        "thinking": ON,
    }
    first = cache.usage(body, 0)
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 0
    again = cache.usage(body, 0)
    assert again["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    changed = cache.usage({**body, "thinking": {"type": "enabled", "budget_tokens": 4096}}, 0)
    system_only = cache.usage({**body, "messages": [{"role": "user", "content": "hi"}]}, 0)
    assert 0 < changed["cache_read_input_tokens"] < again["cache_read_input_tokens"]
    assert changed["cache_read_input_tokens"] == system_only["cache_read_input_tokens"]
