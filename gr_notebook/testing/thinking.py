"""Extended thinking on the local Messages API server: the rules a request must follow, and
the thinking blocks a response carries.

With ``thinking`` on, the server puts a thinking block at the head of each scripted response
that has none, signs every thinking block it sends, and refuses a request whose blocks come
back changed or unsigned, or whose tool loop has lost its opening thinking block, with the
API's own 400 messages: a fake that accepts any block would prove nothing. Blocks are plain
JSON dicts here, as on the wire.

The signature is an HMAC under a key the server draws when it starts, over a nonce and the
text the block shows; a redacted block's ``data`` is the same over a nonce alone. Nothing
outside the server can forge one, so a test that passes has sent back what it was given.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

from gr_notebook.testing.request_rules import require

__all__ = [
    "THINKING_DOCS",
    "ThinkingSigner",
    "check_thinking",
    "thinking_config",
    "thinking_content",
]

THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_THINKING_TYPES = ("thinking", "redacted_thinking")
_NONCE = 12


class ThinkingSigner:
    """Signs what the server sends and recognises it when it comes back."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def sign(self, thinking: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        return _b64(nonce + self._mac(b"thinking", nonce, thinking.encode()))

    def redacted_data(self) -> str:
        nonce = secrets.token_bytes(_NONCE)
        return _b64(nonce + self._mac(b"redacted", nonce, b""))

    def signed(self, thinking: str, signature: str) -> bool:
        return self._check(b"thinking", signature, thinking.encode())

    def issued(self, data: str) -> bool:
        return self._check(b"redacted", data, b"")

    def _check(self, kind: bytes, token: str, text: bytes) -> bool:
        try:
            raw = base64.b64decode(token.encode(), validate=True)
        except (ValueError, UnicodeEncodeError):
            return False
        nonce, mac = raw[:_NONCE], raw[_NONCE:]
        return len(nonce) == _NONCE and hmac.compare_digest(mac, self._mac(kind, nonce, text))

    def _mac(self, kind: bytes, nonce: bytes, text: bytes) -> bytes:
        return hmac.new(self._key, kind + b"\0" + nonce + text, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def thinking_config(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``thinking`` when it turns thinking on (``enabled`` or ``adaptive``)."""
    config = body.get("thinking")
    if isinstance(config, dict) and config.get("type") in ("enabled", "adaptive"):
        return config
    return None


def check_thinking(body: dict[str, Any], signer: ThinkingSigner, *, generation: bool) -> None:
    """Refuse, as the API does, a bad ``thinking`` setting, a thinking block that is not the
    one the server sent, and a tool loop whose opening assistant message lost its thinking."""
    _check_config(body, generation=generation)
    on = thinking_config(body) is not None
    messages = body.get("messages") or []
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") in _THINKING_TYPES:
                final = i == len(messages) - 1 and message.get("role") == "assistant"
                _check_block(block, f"messages.{i}.content.{j}", message, signer, on, final)
    if on:
        _check_tool_loop(messages)


def _check_config(body: dict[str, Any], *, generation: bool) -> None:
    config = body.get("thinking")
    if config is None:
        return
    require(isinstance(config, dict), "thinking: Input should be an object")
    kind = config.get("type")
    require(
        kind in ("enabled", "adaptive", "disabled"),
        f"thinking.type: Input tag {kind!r} found using 'type' does not match any of the "
        "expected tags: 'enabled', 'disabled', 'adaptive'",
    )
    if kind == "enabled":
        budget = config.get("budget_tokens")
        require("budget_tokens" in config, "thinking.enabled.budget_tokens: Field required")
        require(
            isinstance(budget, int) and not isinstance(budget, bool),
            "thinking.enabled.budget_tokens: Input should be a valid integer",
        )
        require(
            budget >= 1024,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        )
        require(
            not generation or budget < body["max_tokens"],
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {THINKING_DOCS}#max-tokens-and-context-window-size",
        )
    if kind == "disabled":
        return
    # "updates" (progress notes between tool calls, the 5.5 models' beta) is what the
    # Claude Code CLI sends; served here as "summarized" is.
    require(
        config.get("display") in (None, "summarized", "omitted", "updates"),
        f"thinking.{kind}.display: Input should be 'summarized', 'omitted' or 'updates'",
    )
    temperature = body.get("temperature")
    require(
        temperature is None or temperature == 1,
        "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
        f"documentation at {THINKING_DOCS}#important-considerations-when-using-extended-thinking",
    )
    choice = body.get("tool_choice")
    require(
        not (isinstance(choice, dict) and choice.get("type") in ("any", "tool")),
        "Thinking may not be enabled when tool_choice forces tool use.",
    )


def _check_block(
    block: dict[str, Any],
    path: str,
    message: dict[str, Any],
    signer: ThinkingSigner,
    on: bool,
    final: bool,
) -> None:
    kind = block["type"]
    require(
        message.get("role") == "assistant",
        f"{path}: {kind} blocks may only appear in assistant turns",
    )
    require(
        "cache_control" not in block, f"{path}.{kind}.cache_control: Extra inputs are not permitted"
    )
    require(
        on or not final,
        f"{path}: When thinking is disabled, an `assistant` message in the final position "
        "cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.",
    )
    if kind == "thinking":
        text, signature = block.get("thinking"), block.get("signature")
        require(isinstance(text, str), f"{path}.thinking.thinking: Field required")
        require(isinstance(signature, str), f"{path}.thinking.signature: Field required")
        valid = signer.signed(str(text), str(signature))
        require(valid, f"{path}: Invalid `signature` in `thinking` block")
    else:
        data = block.get("data")
        require(isinstance(data, str), f"{path}.redacted_thinking.data: Field required")
        require(signer.issued(str(data)), f"{path}: Invalid `data` in `redacted_thinking` block")


def _check_tool_loop(messages: list[Any]) -> None:
    """The assistant message that opened the running tool loop (the first after the last
    user turn that is not only answers to tools) must start with thinking, as the API says."""
    if not messages or not _answers_tools(messages[-1]):
        return
    opener = None
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "assistant":
            opener = i
        elif not _answers_tools(message):
            break
    if opener is None:
        return
    content = messages[opener].get("content")
    first = content[0] if isinstance(content, list) and content else {"type": "text"}
    found = first.get("type") if isinstance(first, dict) else "text"
    require(
        found in _THINKING_TYPES,
        f"messages.{opener}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
        f"found `{found}`. When `thinking` is enabled, a final `assistant` message must start "
        "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
        "blocks). We recommend you include thinking blocks from previous turns. To avoid this "
        f"requirement, disable `thinking`. Please consult our documentation at {THINKING_DOCS}",
    )


def _answers_tools(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def thinking_content(
    content: list[dict[str, Any]],
    body: dict[str, Any],
    signer: ThinkingSigner,
    turn: int,
    *,
    think: bool = True,
) -> list[dict[str, Any]]:
    """A scripted response's blocks as the API would send them: with thinking on, every
    thinking block signed (its text dropped when the display is ``omitted``) and one at the
    head when the script gave none, unless ``think`` is False (a model that chose not to
    think, as Claude 3.7 after a tool result); with thinking off, a thinking block is a
    script error."""
    config = thinking_config(body)
    scripted = [b for b in content if b.get("type") in _THINKING_TYPES]
    if config is None:
        if scripted:
            raise TypeError("a thinking block needs thinking enabled in the request")
        return content
    if not scripted and think:
        content = [{"type": "thinking", "thinking": f"Thinking through turn {turn}."}, *content]
    omitted = config.get("display") == "omitted"
    out = []
    for block in content:
        if block.get("type") == "thinking":
            text = "" if omitted else str(block.get("thinking", ""))
            block = {"type": "thinking", "thinking": text, "signature": signer.sign(text)}
        elif block.get("type") == "redacted_thinking":
            block = {"type": "redacted_thinking", "data": signer.redacted_data()}
        out.append(block)
    return out
