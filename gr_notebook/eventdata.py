"""What events keep of model text and tool inputs: shortened, so that an event stays small
whatever the model sends, and the store and the dashboard stay cheap."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_EVENT_TEXT", "clip", "clip_json"]

MAX_EVENT_TEXT = 400
MAX_EVENT_ITEMS = 50
MAX_EVENT_DEPTH = 4


def clip(text: str, limit: int = MAX_EVENT_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_json(value: Any, depth: int = 0) -> Any:
    """Tool inputs as stored in events: strings, lists and nesting shortened, so an event
    stays small whatever the model sends."""
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_EVENT_DEPTH:
        return clip(json.dumps(value, default=str))
    if isinstance(value, Mapping):
        return {str(k): clip_json(v, depth + 1) for k, v in list(value.items())[:MAX_EVENT_ITEMS]}
    if isinstance(value, (list, tuple)):
        items = [clip_json(v, depth + 1) for v in value[:MAX_EVENT_ITEMS]]
        if len(value) > MAX_EVENT_ITEMS:
            items.append(f"… {len(value) - MAX_EVENT_ITEMS} more")
        return items
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip(repr(value))
