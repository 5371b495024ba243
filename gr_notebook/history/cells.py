"""Reading one stored cell safely: a crafted row fails one way, as :class:`DamagedRow`.

SQLite keeps any value in any column, and a JSON cell may hold anything, so every reader of
the store decodes and checks its cells here; the reader names the row when it turns a
:class:`DamagedRow` into a :class:`~gr_notebook.errors.StoreError`.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["DamagedRow", "checked", "json_kind", "parse_json"]


class DamagedRow(ValueError):
    """A stored cell or row that cannot be read as what it should hold; its message says
    what is wrong, for the reader to name the row (:meth:`Store.damaged`)."""


def parse_json(
    data: object,
    shape: type[dict[str, Any]] | type[list[Any]] | None = None,
    *,
    subject: str = "it",
) -> Any:
    """A stored JSON cell decoded, and checked to be a ``shape`` (an object or an array).

    Every reader of the store decodes through here, so a crafted cell fails one way:
    :class:`DamagedRow` saying what is wrong (``subject`` names the cell), whether it is not
    JSON text, not UTF-8, nested past what Python can decode (stdlib ``json`` raises
    ``RecursionError`` there), or JSON of another shape."""
    try:
        value = json.loads(data)  # type: ignore[arg-type]
    except RecursionError:
        raise DamagedRow(f"{subject} is JSON nested too deep to read") from None
    except TypeError:
        raise DamagedRow(f"{subject} is {_sql_type(data)}, not JSON text") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DamagedRow(f"{subject} is not JSON ({type(exc).__name__}: {exc})") from None
    if shape is not None and not isinstance(value, shape):
        want = "an object" if shape is dict else "an array"
        raise DamagedRow(f"{subject} is {json_kind(value)}, not {want}")
    return value


def json_kind(value: object) -> str:
    """What JSON calls ``value``'s type, with its article: "a JSON array"."""
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    kinds = ((dict, "object"), (list, "array"), (str, "string"), ((int, float), "number"))
    for kind, name in kinds:
        if isinstance(value, kind):
            return f"a JSON {name}"
    return f"a {type(value).__name__}"


def _sql_type(value: object) -> str:
    """What SQLite calls ``value``'s type."""
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return "a number"
    return "text" if isinstance(value, str) else "a blob" if isinstance(value, bytes) else "?"


_WANTED: Final = {int: "a whole number", str: "text", float: "a number"}


def checked(value: object, kind: type, what: str, *, null: bool = False) -> Any:
    """``value`` when it is a ``kind`` (an int passes as a float, a bool as nothing; None
    when ``null``), else :class:`DamagedRow` saying what ``what`` holds instead: SQLite
    keeps any value in any column, so a crafted row can hold text where a turn belongs."""
    if value is None and null:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise DamagedRow(f"its {what} is {shown}, not {_WANTED.get(kind, kind.__name__)}")
    return value
