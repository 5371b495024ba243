"""Prompt caching as the Messages API bills it, for the local server: which prefix a request
may cache, and whether an earlier request already wrote it.

The token estimate is a token per four characters of compact JSON. It is not the API's
tokenizer; it only has to be deterministic and grow with the prompt.

As the API documents it: the cache key of a breakpoint is the whole prefix up to and
including its block (tools, then system, then messages; ``cache_control`` markers left out);
a request writes the prefix at each breakpoint, and reads the longest prefix already written
that ends at a breakpoint or at one of the ``LOOKBACK_BLOCKS`` block boundaries before it.
A change of the ``thinking`` setting changes the key of every prefix that reaches into the
messages, and of none before them: the API documents that it invalidates message breakpoints,
while cached tools and system prompts still read.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from typing import Any

__all__ = ["LOOKBACK_BLOCKS", "PromptCache", "estimate_tokens", "prompt_pieces", "prompt_tokens"]

LOOKBACK_BLOCKS = 20
"""How many block boundaries before a breakpoint the API checks for a cache hit."""


def _strip_cache_control(value: Any) -> Any:
    """The value without its cache markers: they change neither the prompt nor its size."""
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def estimate_tokens(value: Any) -> int:
    """The estimate: a token per four characters of compact JSON, cache markers left out.

    Characters, not ``\\uXXXX`` escapes: a tokenizer reads the decoded text, and escaping
    made each of the todo display's box-drawing characters cost more than a tokenizer
    counts."""
    text = json.dumps(_strip_cache_control(value), separators=(",", ":"), ensure_ascii=False)
    return math.ceil(len(text) / 4)


def _marked(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if value.get("cache_control") is not None:
        return True
    nested = value.get("content")
    return isinstance(nested, list) and any(_marked(block) for block in nested)


def prompt_pieces(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The prompt in cache order — tools, system, message blocks — each with whether it
    carries a cache breakpoint. Top-level ``cache_control`` marks the last piece."""
    pieces: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        pieces.append(system)
    elif isinstance(system, list):
        pieces.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        pieces.extend(content if isinstance(content, list) else [content])
    marked = [(piece, _marked(piece)) for piece in pieces]
    if body.get("cache_control") is not None and marked:
        marked[-1] = (marked[-1][0], True)
    return marked


def prompt_tokens(body: dict[str, Any]) -> int:
    """The whole prompt's estimate, as ``count_tokens`` answers it."""
    return sum(estimate_tokens(piece) for piece, _ in prompt_pieces(body))


class PromptCache:
    """The server-wide cache of prefixes written so far; safe across handler threads."""

    def __init__(self, min_cacheable_tokens: int = 1024) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, int]:
        """Usage with prompt caching emulated, and the cache updated.

        Each cache breakpoint whose prefix reaches ``min_cacheable_tokens`` is written to the
        cache; the longest prefix already there, at a breakpoint or up to
        ``LOOKBACK_BLOCKS`` boundaries before one, is read. So a request that extends a cached
        prefix reads the shared part and writes the rest up to its last breakpoint; what
        follows that breakpoint is plain input, as the API bills it.
        """
        pieces = prompt_pieces(body)
        tokens = [estimate_tokens(piece) for piece, _ in pieces]
        keys = _prefix_keys(
            body.get("model"),
            [piece for piece, _ in pieces],
            messages_from=len(pieces) - sum(_blocks(m) for m in body.get("messages") or []),
            thinking=body.get("thinking"),
        )
        ends = [sum(tokens[: i + 1]) for i in range(len(pieces))]
        marks = [
            i
            for i, (_, marked) in enumerate(pieces)
            if marked and ends[i] >= self.min_cacheable_tokens
        ]
        lookups = {j for i in marks for j in range(max(0, i - LOOKBACK_BLOCKS), i + 1)}
        cached = ends[marks[-1]] if marks else 0
        with self._lock:
            read = max((ends[j] for j in lookups if keys[j] in self._keys), default=0)
            self._keys.update(keys[i] for i in marks)
        return {
            "input_tokens": sum(tokens) - cached,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cached - read,
            "cache_read_input_tokens": read,
        }


def _blocks(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else None
    return len(content) if isinstance(content, list) else 1


def _prefix_keys(model: Any, pieces: list[Any], *, messages_from: int, thinking: Any) -> list[str]:
    """A running hash: the key of each prefix, from the model and the blocks up to it, and
    from the ``thinking`` setting once the prefix reaches the messages."""
    digest = hashlib.sha256(json.dumps(model).encode())
    keys = []
    for i, piece in enumerate(pieces):
        if i == messages_from:
            digest.update(json.dumps({"thinking": thinking}, sort_keys=True).encode())
        digest.update(json.dumps(_strip_cache_control(piece), sort_keys=True).encode())
        keys.append(digest.copy().hexdigest())
    return keys
