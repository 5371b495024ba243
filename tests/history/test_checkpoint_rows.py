"""A checkpoint row's JSON reads back as the values it was written from, and rows laid out
before decision 274 read back as they did."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.checkpoint import load_checkpoint
from gr_notebook.engine.state import RunState
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.workflow.workspace import Workspace

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


def test_what_json_writes_differently_from_python_reads_back_as_json_writes_it() -> None:
    value = {"pair": (1, 2), 3: "int key", "view": MappingProxyType({"a": 1})}
    want = json.loads(json.dumps(value, default=dict))
    assert (
        json.loads(rows.json_bytes(value, dict))
        == want
        == {
            "pair": [1, 2],
            "3": "int key",
            "view": {"a": 1},
        }
    )


def test_plain_values_are_written_by_orjson_as_utf_8() -> None:
    assert rows.json_bytes({"t": "→"}) == '{"t":"→"}'.encode()  # json would escape it


def test_a_value_json_cannot_hold_fails_as_json_fails() -> None:
    with pytest.raises(TypeError):
        rows.json_bytes({"s": {1, 2}})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -float("nan")])
def test_finite_finds_a_float_that_is_not(bad: float) -> None:
    assert not rows.finite({"a": [1, {"b": ("x", bad)}]})
    assert not rows.finite(bad)


def test_finite_passes_what_holds_only_finite_floats() -> None:
    value = {"t": 1795519944.9283562, "n": [0.0, -2.5, 1e308, 5e-324], "s": "\x7f\xff é"}
    assert rows.finite(value)
    assert rows.finite([{"path": "a.md"}, 3, None, True])


def test_finite_cannot_tell_for_a_type_marshal_does_not_know() -> None:
    assert not rows.finite({"view": MappingProxyType({"a": 1.0})})


def test_a_store_with_rows_laid_out_before_274_reads_back_as_it_did(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    shutil.copy(FIXTURES / "store_checkpoints_v1.sqlite", path)
    expected = json.loads((FIXTURES / "store_checkpoints_v1.json").read_text())
    run_id = expected["run_id"]
    agent = gr.Agent(gr.ScriptedModel([]), policies=[gr.ReadBeforeWritePolicy()])
    with gr.Store(path) as store:
        assert rows.checkpoint_turns(store, run_id) == [int(t) for t in expected["turns"]]
        for turn, want in expected["turns"].items():
            checkpoint = load_checkpoint(store, run_id, int(turn))
            assert json.loads(json.dumps(checkpoint.snapshot)) == want["snapshot"], turn
            assert checkpoint.files == want["files"], turn
            assert len(checkpoint.events) == want["events"], turn
            workspace = Workspace(tmp_path / "ws")
            fresh = RunState(agent.definition(), workspace=workspace, clock=agent.clock)
            fresh.restore(checkpoint.snapshot, events=checkpoint.events)
            assert fresh.turn == int(turn) - 1
