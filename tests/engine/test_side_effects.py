"""What each tool does to the world, and the records around every call: the intent before
the handler, the key it is given, the whole result of a ``once`` call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.engine.side_effects import canonical_input, idempotency_key
from gr_notebook.events import ToolCallEvent, ToolIntentEvent
from gr_notebook.history.checkpoint_store import blob
from gr_notebook.history.store import Store
from gr_notebook.tools import CORE_TOOLS
from gr_notebook.tools.base import Tool, ToolContext, object_schema
from tests.conftest import agent_at


def test_built_in_tools_declare_their_effect_and_a_custom_tool_is_once() -> None:
    agent = gr.Agent(gr.SimulatedModel(), store=False, self_regulation=True)
    effects = {t.name: t.effect for t in agent.registry}
    assert {effects[n] for n in ("read_file", "list_files", "search")} == {"read"}
    assert effects["write_file"] == effects["edit_file"] == "idempotent"
    assert "once" not in {t.effect for t in CORE_TOOLS}  # they touch the workspace only
    assert "once" not in set(effects.values())
    assert Tool("mine", "Mine.", object_schema(), lambda c, p: "ok").effect == "once"
    with pytest.raises(gr.ConfigError, match="effect takes 'read', 'idempotent' or 'once'"):
        Tool("mine", "Mine.", object_schema(), lambda c, p: "ok", effect="twice")  # type: ignore[arg-type]


def test_the_key_names_the_call_and_nothing_else() -> None:
    digest = canonical_input({"a": 1, "b": [1, 2]})
    assert digest == canonical_input({"b": [1, 2], "a": 1})  # key order does not matter
    key = idempotency_key("root", 3, 0, "send", "h")
    assert key == idempotency_key("root", 3, 0, "send", "h")
    others = [
        idempotency_key("other", 3, 0, "send", "h"),
        idempotency_key("root", 4, 0, "send", "h"),
        idempotency_key("root", 3, 1, "send", "h"),
        idempotency_key("root", 3, 0, "mail", "h"),
        idempotency_key("root", 3, 0, "send", "i"),
    ]
    assert key.startswith("gr-") and key not in others and len(set(others)) == 5


def test_the_handler_gets_the_key_its_intent_records(tmp_path: Path) -> None:
    keys: list[str] = []

    def send(ctx: ToolContext, params: Mapping[str, Any]) -> str:
        keys.append(ctx.key)
        return "sent"

    tool = Tool("send", "Send.", object_schema(["to"], to={"type": "string"}), send)
    script = [
        gr.tool_calls([("send", {"to": "a"}), ("send", {"to": "b"})]),
        gr.tool_call("send", to="a"),
        gr.text("done"),
    ]
    run = agent_at(tmp_path, gr.ScriptedModel(script), tools=[tool]).run_sync("send")
    intents = [e for e in run.events if isinstance(e, ToolIntentEvent)]
    assert [i.key for i in intents] == keys and len(set(keys)) == 3  # place and turn count
    assert [(i.turn, i.index, i.effect) for i in intents] == [
        (1, 0, "once"),
        (1, 1, "once"),
        (2, 0, "once"),
    ]
    assert all(i.reply for i in intents) and intents[0].reply == intents[1].reply
    seqs = [e.seq for e in run.events if e.kind in ("tool_intent", "tool_call")]
    kinds = [run.events[s].kind for s in seqs]
    assert kinds == ["tool_intent", "tool_call"] * 3  # each intent before its call's end


def test_a_refused_call_has_no_intent(tmp_path: Path) -> None:
    policy = gr.SequentialDependencyPolicy({"write_file": ["read_file"]})
    script = [gr.tool_call("write_file", path="a.md", content="x"), gr.text("done")]
    run = agent_at(tmp_path, gr.ScriptedModel(script), policies=[policy]).run_sync("go")
    assert not [e for e in run.events if isinstance(e, ToolIntentEvent)]
    assert run.tool_calls_df()["key"].tolist() == [None]


def test_a_long_result_of_a_once_call_is_kept_whole(tmp_path: Path) -> None:
    long = "receipt " * 200
    tool = Tool("pay", "Pay.", object_schema(), lambda c, p: long)
    script = [gr.tool_call("pay"), gr.text("done")]
    run = agent_at(tmp_path, gr.ScriptedModel(script), tools=[tool]).run_sync("pay")
    (done,) = [e for e in run.events if isinstance(e, ToolCallEvent)]
    assert len(done.result) < len(long) and done.result_digest is not None
    with Store(tmp_path / "store.sqlite") as store:
        assert blob(store, done.result_digest).decode() == long
