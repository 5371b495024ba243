"""A small JSON Schema validator whose messages a model can act on.

It covers the subset tool schemas use (types, required, properties, additionalProperties,
items, enum, bounds, lengths, anyOf) and names the argument at fault, so a wrong call
comes back as "'confidence' must be at most 1, got 1.5" rather than a stack trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["validate"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (Mapping,),
    "null": (type(None),),
}
_ARTICLE = {"integer": "an integer", "array": "an array", "object": "an object"}


def validate(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Every problem with ``value`` under ``schema``; an empty list means it is valid."""
    if "anyOf" in schema:
        options = [validate(option, value, path) for option in schema["anyOf"]]
        if all(options):
            described = " or ".join(_describe(o) for o in schema["anyOf"])
            return [f"{_name(path)} must be {described}, got {_json_type(value)}"]
        return []
    expected = schema.get("type")
    if expected is not None:
        kinds = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, kind) for kind in kinds):
            wanted = " or ".join(_ARTICLE.get(k, f"a {k}") for k in kinds)
            return [f"{_name(path)} must be {wanted}, got {_json_type(value)}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        errors.append(f"{_name(path)} must be one of {choices}, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        errors += _validate_number(schema, value, path)
    if isinstance(value, str):
        shortest, longest = schema.get("minLength", 0), schema.get("maxLength")
        if len(value) < shortest:
            errors.append(
                f"{_name(path)} must not be empty"
                if shortest == 1
                else f"{_name(path)} must be at least {shortest} characters, got {len(value)}"
            )
        if longest is not None and len(value) > longest:
            errors.append(f"{_name(path)} must be at most {longest} characters, got {len(value)}")
    if isinstance(value, (list, tuple)):
        errors += _validate_array(schema, value, path)
    if isinstance(value, Mapping):
        errors += _validate_object(schema, value, path)
    return errors


def _validate_number(schema: Mapping[str, Any], value: float, path: str) -> list[str]:
    """Bounds; NaN and the infinities (which JSON cannot carry) fail as out of range."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if not math.isfinite(value):
        if low is not None and high is not None:
            return [f"{_name(path)} must be between {low} and {high}, got {value}"]
        if low is not None and not value > low:
            return [f"{_name(path)} must be at least {low}, got {value}"]
        if high is not None and not value < high:
            return [f"{_name(path)} must be at most {high}, got {value}"]
        return [f"{_name(path)} must be a finite number, got {value}"]
    errors = []
    if low is not None and value < low:
        errors.append(f"{_name(path)} must be at least {low}, got {value}")
    if high is not None and value > high:
        errors.append(f"{_name(path)} must be at most {high}, got {value}")
    return errors


def _validate_array(schema: Mapping[str, Any], value: Sequence[Any], path: str) -> list[str]:
    errors = []
    if len(value) < schema.get("minItems", 0):
        errors.append(f"{_name(path)} needs at least {schema['minItems']} item(s)")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{_name(path)} takes at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            errors += validate(items, item, f"{path}[{i}]")
    return errors


def _validate_object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str) -> list[str]:
    errors = []
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            errors.append(f"missing required argument {_name(_join(path, key))}")
    if schema.get("additionalProperties", True) is False:
        unknown = sorted(set(value) - set(properties))
        for key in unknown:
            allowed = ", ".join(properties) or "no arguments"
            errors.append(f"unexpected argument {_name(_join(path, key))}; it takes: {allowed}")
    for key, sub in properties.items():
        if key in value:
            errors += validate(sub, value[key], _join(path, key))
    return errors


def _is_type(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _json_type(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, kind):
            return f"{kind} {value!r}" if kind in ("integer", "number", "boolean") else kind
    return type(value).__name__


def _describe(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "a value")
    if kind == "object" and "required" in schema:
        return f"an object with {', '.join(repr(k) for k in schema['required'])}"
    return _ARTICLE.get(kind, f"a {kind}") if isinstance(kind, str) else "a value"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _name(path: str) -> str:
    return f"'{path}'" if path else "the input"
