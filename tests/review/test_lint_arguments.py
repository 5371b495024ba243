"""``gr.lint_guidance`` takes a run or its events: anything else is a ConfigError saying so."""

from __future__ import annotations

import pytest

import gr_notebook as gr


@pytest.mark.parametrize("given", [None, 42, "run-id", b"bytes", [1, 2], object()])
def test_lint_guidance_refuses_what_is_not_a_run_or_its_events(given: object) -> None:
    with pytest.raises(gr.ConfigError, match=r"takes a Run or its events \(run\.events"):
        gr.lint_guidance(given)  # type: ignore[arg-type]


def test_lint_guidance_takes_a_list_of_events_and_an_empty_one() -> None:
    assert gr.lint_guidance([]) == []
    assert gr.lint_guidance(iter([])) == []
