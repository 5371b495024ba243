"""A checkpoint's JSON reads back as the values it was written from, and a store whose
checkpoints are in the earlier format opens, but refuses to resume or fork them."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.history import checkpoint_store as rows

FIXTURES = Path(__file__).parent / "fixtures"


def same(a: Any, b: Any) -> bool:
    """Equal, a NaN equal to a NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(
    "value",
    [
        {"score": float("nan")},
        {"deep": [[1.0, {"x": float("inf")}]], "other": None},
        {"low": -float("inf")},
        {"big": 2**70, "small": -(2**70)},
        {"text": "a lone \udc80 surrogate"},
        {"plain": "é → • 好", "n": 1.5, "flag": True, "none": None},
    ],
)
def test_a_value_reads_back_as_it_was_written(value: dict[str, Any]) -> None:
    assert same(json.loads(rows.json_bytes(value)), value)


def test_a_read_only_mapping_is_written_as_an_object() -> None:
    view = MappingProxyType({"a": MappingProxyType({"b": 1})})
    assert json.loads(rows.json_bytes({"input": view})) == {"input": {"a": {"b": 1}}}
    with pytest.raises(TypeError, match="a set in the run state is not JSON"):
        rows.json_bytes({"input": {1, 2}})


def test_checkpoints_in_the_earlier_format_are_kept_and_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite"
    shutil.copy(FIXTURES / "store_checkpoints_v1.sqlite", path)
    with sqlite3.connect(path) as raw:
        (held,) = raw.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
    with gr.Store(path) as store:
        (run_id,) = store.run_ids()
        assert len(store.events(run_id)) == 27  # the events read as any run's
        assert rows.checkpoint_turns(store, run_id) == []
    with sqlite3.connect(path) as raw:  # nothing was lost: the old rows are set apart
        assert raw.execute("SELECT COUNT(*) FROM old_checkpoints").fetchone() == (held,)
    [row] = gr.runs_df(path).itertuples()
    assert (row.checkpoints, row.resumable) == (0, False)
    agent = gr.Agent(gr.ScriptedModel([]), policies=[gr.ReadBeforeWritePolicy()])
    refusal = r"recorded by an earlier gr_notebook.*cannot be resumed or forked"
    with pytest.raises(gr.RunError, match=refusal):
        gr.fork(run_id, 3, agent, store=path, workspace=tmp_path / "fork")
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET status = 'interrupted'")
    with pytest.raises(gr.RunError, match=refusal):
        gr.resume(run_id, agent, workspace=tmp_path / "copy", store=path)


def test_a_new_store_keeps_no_table_of_the_earlier_format(tmp_path: Path) -> None:
    gr.Store(tmp_path / "s.sqlite").close()
    with sqlite3.connect(tmp_path / "s.sqlite") as raw:
        tables = {name for (name,) in raw.execute("SELECT name FROM sqlite_master")}
    assert "checkpoints" in tables and "old_checkpoints" not in tables
