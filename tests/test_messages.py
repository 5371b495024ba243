"""Thinking blocks as core values: the wire shape, JSON both ways, and the token estimate."""

from __future__ import annotations

import pytest

from gr_notebook.messages import (
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    approx_tokens,
    block_tokens,
    message_tokens,
)

THOUGHT = ThinkingBlock("Check the plan first.", "EqQBCgIYAhIM1gbcDa9GJwZA")
REDACTED = RedactedThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4a")


def test_the_blocks_have_the_wire_shape_and_go_through_json_unchanged() -> None:
    message = Message(
        "assistant",
        (THOUGHT, REDACTED, TextBlock("Reading."), ToolUseBlock("t1", "read_file", {"path": "a"})),
    )
    data = message.to_json()
    assert data["content"][:2] == [
        {"type": "thinking", "thinking": THOUGHT.thinking, "signature": THOUGHT.signature},
        {"type": "redacted_thinking", "data": REDACTED.data},
    ]
    assert Message.from_json(data) == message
    assert (THOUGHT.type, REDACTED.type) == ("thinking", "redacted_thinking")
    assert ThinkingBlock is ThinkingBlock and RedactedThinkingBlock is RedactedThinkingBlock


def test_text_is_the_text_blocks_only_and_thinking_is_its_own() -> None:
    message = Message("assistant", (THOUGHT, TextBlock("Reading."), REDACTED))
    assert message.text == "Reading."
    assert message.thinking == (THOUGHT, REDACTED)
    assert message.opens_with_thinking
    assert not Message.assistant("Reading.", THOUGHT).opens_with_thinking
    assert not Message("assistant", ()).opens_with_thinking


def test_a_block_missing_its_signature_does_not_decode() -> None:
    with pytest.raises(KeyError):
        Message.from_json({"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]})


def test_the_estimate_counts_thinking_as_it_is_sent_back() -> None:
    assert block_tokens(THOUGHT) == approx_tokens(THOUGHT.thinking) + approx_tokens(
        THOUGHT.signature
    )
    assert block_tokens(REDACTED) == approx_tokens(REDACTED.data)
    plain = Message.assistant("Reading.")
    assert message_tokens(Message("assistant", (THOUGHT, *plain.content))) == message_tokens(
        plain
    ) + block_tokens(THOUGHT)
