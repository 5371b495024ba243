"""What the Messages API refuses, for the local server: a request it would answer with 400
``invalid_request_error``, and the message it would give (field path first). The server
checks every request with these rules before it consumes a turn, so an adapter bug shows
up as the API's own error, not as a script knocked out of step."""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_CACHE_BREAKPOINTS", "InvalidRequest", "require", "validate"]

#: The most blocks that may carry ``cache_control`` in one request, as the API enforces.
MAX_CACHE_BREAKPOINTS = 4


class InvalidRequest(Exception):
    """A request the API would refuse with 400 invalid_request_error."""


def require(condition: bool, message: str) -> None:
    """Refuse the request with ``message`` unless ``condition`` holds."""
    if not condition:
        raise InvalidRequest(message)


def validate(body: dict[str, Any], *, generation: bool) -> None:
    """Refuse what the API refuses, with messages in its style (field path first)."""
    model = body.get("model")
    require("model" in body, "model: Field required")
    require(isinstance(model, str) and model != "", "model: must be a non-empty string")
    if generation:
        max_tokens = body.get("max_tokens")
        require("max_tokens" in body, "max_tokens: Field required")
        require(
            isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0,
            "max_tokens: must be a positive integer",
        )
        require(
            isinstance(body.get("stream", False), bool), "stream: Input should be a valid boolean"
        )
    breakpoints: list[str] = []
    _check_tools(body.get("tools"), breakpoints)
    _check_system(body.get("system"), breakpoints)
    _check_messages(body.get("messages"), breakpoints)
    if body.get("cache_control") is not None:
        _check_cache_control(body, "cache_control", breakpoints)
    found = len(breakpoints)
    require(
        found <= MAX_CACHE_BREAKPOINTS,
        f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
        f"Found {found}.",
    )


def _check_cache_control(block: dict[str, Any], path: str, breakpoints: list[str]) -> None:
    marker = block.get("cache_control")
    if marker is None:
        return
    where = f"{path}.cache_control" if path != "cache_control" else path
    require(isinstance(marker, dict), f"{where}: must be an object")
    require(marker.get("type") == "ephemeral", f"{where}.type: Input should be 'ephemeral'")
    require(marker.get("ttl", "5m") in ("5m", "1h"), f"{where}.ttl: Input should be '5m' or '1h'")
    extra = sorted(set(marker) - {"type", "ttl"})
    require(not extra, f"{where}.{extra[0] if extra else ''}: Extra inputs are not permitted")
    breakpoints.append(path)


def _check_text(block: dict[str, Any], path: str) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f"{path}.text: Field required")
    require(text != "", f"{path}: text content blocks must be non-empty")
    require(text.strip() != "", f"{path}: text content blocks must contain non-whitespace text")


def _check_tools(tools: Any, breakpoints: list[str]) -> None:
    if tools is None:
        return
    require(isinstance(tools, list), "tools: Input should be a valid list")
    for i, tool in enumerate(tools):
        path = f"tools.{i}"
        require(isinstance(tool, dict), f"{path}: Input should be an object")
        name = tool.get("name")
        require(isinstance(name, str) and name != "", f"{path}.name: Field required")
        if tool.get("type") in (None, "custom"):  # server tools (typed) carry no schema
            require(
                isinstance(tool.get("input_schema"), dict), f"{path}.input_schema: Field required"
            )
        _check_cache_control(tool, path, breakpoints)


def _check_system(system: Any, breakpoints: list[str]) -> None:
    if system is None or isinstance(system, str):
        return
    require(isinstance(system, list), "system: Input should be a string or a list of text blocks")
    for i, block in enumerate(system):
        path = f"system.{i}"
        require(
            isinstance(block, dict) and block.get("type") == "text",
            f"{path}.type: Input should be 'text'",
        )
        _check_text(block, path)
        _check_cache_control(block, path, breakpoints)


def _check_messages(messages: Any, breakpoints: list[str]) -> None:
    require(messages is not None, "messages: Field required")
    require(isinstance(messages, list), "messages: Input should be a valid list")
    require(len(messages) > 0, "messages: at least one message is required")
    for i, message in enumerate(messages):
        path = f"messages.{i}"
        require(isinstance(message, dict), f"{path}: Input should be an object")
        role = message.get("role")
        require(
            role in ("user", "assistant"), f"{path}.role: Input should be 'user' or 'assistant'"
        )
        require(i > 0 or role == "user", 'messages: the first message must use the "user" role')
        content = message.get("content")
        final_assistant = i == len(messages) - 1 and role == "assistant"
        require(
            isinstance(content, str | list), f"{path}.content: Input should be a string or a list"
        )
        require(
            bool(content) or final_assistant,
            f"{path}: all messages must have non-empty content except for the optional final "
            "assistant message",
        )
        if isinstance(content, list):
            for j, block in enumerate(content):
                _check_block(block, role, f"{path}.content.{j}", breakpoints)
    _check_tool_pairing(messages)


def _check_block(block: Any, role: str, path: str, breakpoints: list[str]) -> None:
    require(isinstance(block, dict), f"{path}: Input should be an object")
    kind = block.get("type")
    require(isinstance(kind, str), f"{path}.type: Field required")
    if kind == "text":
        _check_text(block, path)
    elif kind == "tool_use":
        require(role == "assistant", f"{path}: tool_use blocks may only appear in assistant turns")
        tool_id = block.get("id")
        require(isinstance(tool_id, str) and tool_id != "", f"{path}.id: Field required")
        require(isinstance(block.get("name"), str), f"{path}.name: Field required")
        require(isinstance(block.get("input"), dict), f"{path}.input: Input should be an object")
    elif kind == "tool_result":
        require(role == "user", f"{path}: tool_result blocks may only appear in user turns")
        require(isinstance(block.get("tool_use_id"), str), f"{path}.tool_use_id: Field required")
        nested = block.get("content")
        if isinstance(nested, list):
            for k, inner in enumerate(nested):
                require(isinstance(inner, dict), f"{path}.content.{k}: Input should be an object")
                _check_cache_control(inner, f"{path}.content.{k}", breakpoints)
    _check_cache_control(block, path, breakpoints)


def _ids(message: dict[str, Any], kind: str, field: str) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block[field] for block in content if block.get("type") == kind]


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool_use answered in the next message, every tool_result answering the last one."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            uses = _ids(message, "tool_use", "id")
            if uses and i + 1 < len(messages):
                answered = set(_ids(messages[i + 1], "tool_result", "tool_use_id"))
                missing = [tool_id for tool_id in uses if tool_id not in answered]
                require(
                    not missing,
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message.",
                )
        else:
            previous = messages[i - 1] if i > 0 else {}
            asked = (
                set(_ids(previous, "tool_use", "id"))
                if previous.get("role") == "assistant"
                else set()
            )
            content = message.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                if block.get("type") != "tool_result":
                    continue
                require(
                    block["tool_use_id"] in asked,
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message.",
                )
