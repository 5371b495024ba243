"""Tests for the small JSON Schema validator used to check tool arguments."""

from __future__ import annotations

from typing import Any

import pytest

from gr_notebook.tools.schema import validate

TODO_ITEM: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {"title": {"type": "string"}, "done": {"type": "boolean"}},
            "required": ["title"],
            "additionalProperties": False,
        },
    ]
}

TOOL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "minLength": 1},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "count": {"type": "integer"},
        "mode": {"enum": ["fast", "slow"]},
        "todos": {"type": "array", "minItems": 1, "items": TODO_ITEM},
    },
    "required": ["summary", "confidence"],
    "additionalProperties": False,
}


def ok(**extra: Any) -> dict[str, Any]:
    return {"summary": "done", "confidence": 0.5, **extra}


def test_valid_arguments_have_no_problems() -> None:
    params = ok(count=3, mode="fast", todos=["a", {"title": "b", "done": True}])
    assert validate(TOOL, params) == []


def test_empty_schema_accepts_anything() -> None:
    assert validate({}, object()) == []


# ── required and additionalProperties ────────────────────────────────────────


def test_missing_required_names_each_argument() -> None:
    assert validate(TOOL, {}) == [
        "missing required argument 'summary'",
        "missing required argument 'confidence'",
    ]


def test_additional_property_is_rejected_listing_allowed() -> None:
    (problem,) = validate(TOOL, ok(extra=1))
    assert problem.startswith("unexpected argument 'extra'; it takes: summary, confidence")


def test_additional_properties_allowed_by_default() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert validate(schema, {"a": "x", "b": 1}) == []


def test_no_properties_and_additional_false_says_no_arguments() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    (problem,) = validate(schema, {"x": 1})
    assert problem == "unexpected argument 'x'; it takes: no arguments"


# ── types ────────────────────────────────────────────────────────────────────


def test_top_level_non_object_is_reported_as_the_input() -> None:
    assert validate(TOOL, None) == ["the input must be an object, got null"]
    assert validate(TOOL, [1]) == ["the input must be an object, got array"]


def test_wrong_type_names_argument_and_value() -> None:
    assert validate(TOOL, ok(count="3")) == ["'count' must be an integer, got string"]


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_bool_is_not_a_number(kind: str) -> None:
    (problem,) = validate({"type": kind}, True)
    assert "got boolean True" in problem


def test_bool_confidence_is_rejected() -> None:
    (problem,) = validate(TOOL, ok(confidence=False))
    assert problem == "'confidence' must be a number, got boolean False"


def test_float_is_not_an_integer_unless_whole() -> None:
    assert validate({"type": "integer"}, 2.5) == ["the input must be an integer, got number 2.5"]
    assert validate({"type": "integer"}, 2.0) == []


def test_integer_is_a_number() -> None:
    assert validate({"type": "number"}, 3) == []


def test_type_list_accepts_any_listed() -> None:
    schema = {"type": ["string", "null"]}
    assert validate(schema, None) == []
    assert validate(schema, "x") == []
    assert validate(schema, 1) == ["the input must be a string or a null, got integer 1"]


@pytest.mark.parametrize(
    ("kind", "value"),
    [("string", 1), ("boolean", 1), ("array", "x"), ("object", []), ("null", 0)],
)
def test_each_type_rejects_other_values(kind: str, value: Any) -> None:
    assert len(validate({"type": kind}, value)) == 1


# ── enum, bounds and lengths ─────────────────────────────────────────────────


def test_enum_lists_choices() -> None:
    assert validate(TOOL, ok(mode="medium")) == [
        "'mode' must be one of 'fast', 'slow', got 'medium'"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, "'confidence' must be at most 1, got 1.5"),
        (-0.1, "'confidence' must be at least 0, got -0.1"),
    ],
)
def test_bounds(value: float, message: str) -> None:
    assert validate(TOOL, ok(confidence=value)) == [message]


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0])
def test_bounds_are_inclusive(value: float) -> None:
    assert validate(TOOL, ok(confidence=value)) == []


def test_min_length_one_says_not_empty() -> None:
    assert validate(TOOL, ok(summary="")) == ["'summary' must not be empty"]


def test_min_length_above_one_names_the_length() -> None:
    (problem,) = validate({"type": "string", "minLength": 3}, "ab")
    assert "3" in problem


def test_max_length_is_enforced() -> None:
    assert validate({"type": "string", "maxLength": 2}, "abc") != []
    assert validate({"type": "string", "maxLength": 2}, "ab") == []


def test_min_items() -> None:
    assert validate(TOOL, ok(todos=[])) == ["'todos' needs at least 1 item(s)"]


def test_max_items() -> None:
    schema = {"type": "array", "maxItems": 2}
    assert validate(schema, [1, 2, 3]) == ["the input takes at most 2 items"]
    assert validate(schema, [1, 2]) == []


# ── anyOf and nested paths ───────────────────────────────────────────────────


def test_any_of_reports_every_option() -> None:
    assert validate(TOOL, ok(todos=[1])) == [
        "'todos[0]' must be a string or an object with 'title', got integer 1"
    ]


def test_any_of_passes_when_one_option_matches() -> None:
    assert validate(TODO_ITEM, {"title": "t"}) == []
    assert validate(TODO_ITEM, "t") == []


def test_any_of_rejects_object_missing_required() -> None:
    (problem,) = validate(TOOL, ok(todos=["a", "b", {"done": True}]))
    assert problem.startswith("'todos[2]' must be a string or an object with 'title'")


def test_nested_object_paths_use_dots_and_indexes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}, "done": {"type": "boolean"}},
                    "required": ["title"],
                },
            }
        },
    }
    problems = validate(schema, {"todos": [{"title": "a"}, {"title": "b"}, {"done": "yes"}]})
    assert problems == [
        "missing required argument 'todos[2].title'",
        "'todos[2].done' must be a boolean, got string",
    ]


def test_every_problem_is_reported() -> None:
    problems = validate(TOOL, {"summary": "", "confidence": 2, "bogus": 1})
    assert len(problems) == 3
    assert any("'bogus'" in p for p in problems)
    assert "'summary' must not be empty" in problems
    assert "'confidence' must be at most 1, got 2" in problems


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_the_infinities_are_out_of_range(bad: float) -> None:
    [problem] = validate(TOOL, ok(confidence=bad))
    assert problem.startswith("'confidence' must be ")
    assert problem.endswith(f"got {bad}")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_an_unbounded_number_must_be_finite_too(bad: float) -> None:
    assert validate({"type": "number"}, bad) == [f"the input must be a finite number, got {bad}"]
