"""Read-only deep copies: what a shadow guardrail is shown of a call, so that nothing it does
can reach the live one.

A shadow that tidies ``params`` in place (strips a value, normalises a path) would otherwise
rewrite the call the live guardrails and the tool see. Its copy is made of ``dict`` and
``list`` subclasses that refuse every change with a TypeError, raised inside the shadow and
recorded as its error: still a ``dict`` and a ``list`` to every reader (``isinstance``,
``json.dumps``, ``dict(params)`` for a copy of its own), so a shadow that only reads works as
it does live. The standard library's ``MappingProxyType`` is not a ``dict`` (``json.dumps``
refuses it) and ``frozendict`` would be a dependency for thirty lines.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["ReadOnlyDict", "ReadOnlyList", "read_only"]


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        f"this {type(self).__name__} is a read-only copy of the live call: a shadow guardrail "
        "may read it, not change it (copy it first, e.g. dict(params))"
    )


class ReadOnlyDict(dict[Any, Any]):
    """A ``dict`` that refuses every change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class ReadOnlyList(list[Any]):
    """A ``list`` that refuses every change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> Any:
        return (list, (list(self),))


def read_only(value: Any) -> Any:
    """A deep copy of ``value`` that refuses changes: mappings and lists (at any depth) as
    :class:`ReadOnlyDict` and :class:`ReadOnlyList`, sets as frozensets, tuples of copies;
    other values (text, numbers, frozen dataclasses) are immutable or deep-copied."""
    if isinstance(value, str | bytes | int | float | bool | type(None)):
        return value
    if isinstance(value, Mapping):
        return ReadOnlyDict({k: read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return ReadOnlyList(read_only(v) for v in value)
    if isinstance(value, tuple):
        return tuple(read_only(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(read_only(v) for v in value)
    return copy.deepcopy(value)
