"""API keys: checked when a model is built, and redacted from every text an adapter writes.

A key with whitespace inside (a line break pasted with it, two keys run together) cannot be
sent as a header, and the HTTP library's error then quotes the header, key and all, into the
exception chain and the DEBUG logs; so it is refused before it is used, without echoing it.
A server or proxy may still echo a key back, so an adapter redacts each form a key takes in
text (as it is, escaped as ``repr`` and JSON write it, URL-quoted, and its tail, which
vendors print to name a key) from what it reports. A tool may read the key too (a ``.env``):
an adapter is a :class:`KeyHolder`, so a run redacts it from a tool's result as well.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable
from urllib.parse import quote

from gr_notebook.errors import ConfigError

__all__ = [
    "REDACTED",
    "KeyHolder",
    "check_key",
    "key_forms",
    "key_redactor",
    "mentions",
    "redact",
]

REDACTED = "[redacted]"
TAIL = 12
"""How many trailing characters name a key: vendors show its tail, the tests check it."""


def check_key(key: str, source: str) -> str:
    """``key`` without surrounding whitespace; refuse a key with whitespace inside.

    ``source`` names where the key came from, for the message, which never quotes the key.
    """
    trimmed = key.strip()
    if any(c.isspace() for c in trimmed):
        raise ConfigError(
            f"the API key from {source} has whitespace inside it (a line break or a space): "
            "a key is one unbroken string; copy it again, e.g. "
            "os.environ['ANTHROPIC_API_KEY'] = '<key>'"
        )
    return trimmed


def key_forms(key: str) -> tuple[str, ...]:
    """The spellings of ``key`` that text may carry, longest first."""
    if not key:
        return ()
    forms = {key, repr(key)[1:-1], json.dumps(key)[1:-1], quote(key, safe="")}
    if len(key) >= 2 * TAIL:
        forms.add(key[-TAIL:])
    return tuple(sorted(forms, key=len, reverse=True))


def redact(text: str, key: str) -> str:
    """``text`` with every form of ``key`` replaced by ``[redacted]``."""
    for form in key_forms(key):
        text = text.replace(form, REDACTED)
    return text


def mentions(error: BaseException, key: str) -> bool:
    """Whether any exception in ``error``'s chain (cause or context) quotes a form of ``key``."""
    forms = key_forms(key)
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{current!s} {current!r} {getattr(current, 'body', '')}"
        if any(form in text for form in forms):
            return True
        current = current.__cause__ or current.__context__
    return False


@runtime_checkable
class KeyHolder(Protocol):
    """A model that sends an API key: it redacts the key from a text without handing it out."""

    def redact_key(self, text: str) -> str:
        """``text`` with every form of this model's key replaced by ``[redacted]``."""
        ...


def key_redactor(model: object) -> Callable[[str], str]:
    """What removes ``model``'s key from a text: its :meth:`KeyHolder.redact_key`, or
    nothing for a model that holds no key (the offline ones)."""
    return model.redact_key if isinstance(model, KeyHolder) else _as_is


def _as_is(text: str) -> str:
    return text
