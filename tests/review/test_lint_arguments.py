"""``gr.lint_guidance`` takes a run as every function does (a Run, a run id with ``store=``,
or its events): anything else is a ConfigError saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr


@pytest.mark.parametrize("given", [None, 42, "", b"bytes", [1, 2], object()])
def test_lint_guidance_refuses_what_is_not_a_run_or_its_events(given: object) -> None:
    with pytest.raises(gr.ConfigError, match=r"lint_guidance takes a gr\.Run, a run id"):
        gr.lint_guidance(given)  # type: ignore[arg-type]


def test_lint_guidance_reads_a_run_id_from_its_store(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    run = gr.Agent("simulated:literal", workspace=tmp_path / "ws", store=store).run_sync(
        "# J\n- A\n"
    )
    assert gr.lint_guidance(run.run_id, store=store) == gr.lint_guidance(run)
    with pytest.raises(gr.ConfigError, match="no run 'nope' in"):
        gr.lint_guidance("nope", store=store)


def test_lint_guidance_takes_a_list_of_events_and_an_empty_one() -> None:
    assert gr.lint_guidance([]) == []
    assert gr.lint_guidance(iter([])) == []
