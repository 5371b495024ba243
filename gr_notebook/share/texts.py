"""The texts of a shared page, each kept once: a todo layer that stays the same for ten
turns, a file a fork shares with its parent, a result two runs both read are one entry, and
the page names them by index. Long texts are cut here, saying so, which is what keeps an
export of a long run small."""

from __future__ import annotations

from typing import Final

__all__ = ["FILES_BYTES", "FILE_CHARS", "Texts", "cut", "decoded"]

FILE_CHARS: Final = 20_000
"""The most of one file version a page shows; the rest is cut, saying so."""
FILES_BYTES: Final = 400_000
"""The most file text one run's page holds, every version counted, in the bytes the page
writes it in (a ``<`` takes six, an emoji four): past it, later versions are named without
their text. A run rewriting a large file of markup every turn stays under 2 MB."""


class Texts:
    """An append-only table of texts, deduplicated: :meth:`add` returns the index a page
    uses to name one."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str, *, limit: int | None = None, what: str = "text") -> int:
        text = cut(text, limit, what)
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.items)
            self.items.append(text)
        return found

    def find(self, text: str) -> int | None:
        """The index of ``text`` when the table holds it already."""
        return self._index.get(text)

    def chars(self) -> int:
        return sum(map(len, self.items))


def cut(text: str, limit: int | None, what: str = "text") -> str:
    """``text`` cut past ``limit`` characters, saying so."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n… cut here: {len(text) - limit:,} more characters of this {what}"


def decoded(data: bytes) -> str | None:
    """A file's bytes as text; None for a binary file (a NUL byte, or not UTF-8)."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
