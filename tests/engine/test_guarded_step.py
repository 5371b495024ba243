"""The guarded step on gr's loop, tried as a user would break it: a shadow that tidies the call
in place, an approver's edit another policy denies, Approve pressed after the schema refused
an edit. (The same scenarios on every host are the parity matrix, ``tests/parity``.)"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gr_notebook as gr
from gr_notebook.guardrails.approval import ApprovalAnswer, ApprovalRequest
from gr_notebook.guardrails.readonly import read_only

Factory = Callable[..., gr.Agent]

WRITE = [
    gr.tool_call("write_file", path="./notes.md", content="  hello  "),
    gr.text("Done."),
]


class Tidy:
    """A shadow policy that normalises the call it is shown, in place: the bug it would be
    live (strip the path and the text), and a copy it may keep (its own memory)."""

    name = "tidy"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        self.seen.append(dict(params))  # a copy of its own is the shadow's to change
        params["path"] = str(params.get("path", "")).removeprefix("./")
        params["content"] = str(params.get("content", "")).strip()
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        params["path"] = "elsewhere.md"


class DenySecret:
    name = "no_secret"

    def check(self, tool: Any, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if "secret" in str(params.get("path", "")):
            return gr.PolicyDecision.deny("secret.md is never written; keep to notes.md")
        return gr.PolicyDecision.allow()

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        pass


def _recorded_inputs(run: gr.Run) -> list[dict[str, Any]]:
    return [dict(e.data["input"]) for e in run.events.of_kind("tool_call")]


def test_a_shadow_that_tidies_the_call_in_place_changes_nothing(
    make_agent: Factory, tmp_path: Path
) -> None:
    plain_model = gr.ScriptedModel(list(WRITE))
    baseline = make_agent(plain_model, self_regulation=False, workspace=tmp_path / "a").run_sync(
        "job"
    )
    model = gr.ScriptedModel(list(WRITE))
    tidy = Tidy()
    run = make_agent(
        model, self_regulation=False, shadow=[tidy], workspace=tmp_path / "b"
    ).run_sync("job")
    ws = run.workspace.root
    assert (ws / "notes.md").read_text() == "  hello  "  # written as the model asked
    assert _recorded_inputs(run) == _recorded_inputs(baseline)
    assert _recorded_inputs(run) == [{"path": "./notes.md", "content": "  hello  "}]
    assert tidy.seen == [{"path": "./notes.md", "content": "  hello  "}]
    errors = [e.data for e in run.events.of_kind("error")]
    assert [(e["source"], e["error_type"]) for e in errors] == [
        ("shadow:policy", "TypeError"),  # its check tried to change the call
        ("shadow:policy", "TypeError"),  # its on_result tried to change the input that ran
    ]
    assert "read-only copy of the live call" in errors[0]["message"]
    assert [r.messages for r in model.requests] == [r.messages for r in plain_model.requests]
    assert (tmp_path / "a" / "notes.md").read_bytes() == (ws / "notes.md").read_bytes()
    assert run.status == baseline.status


def test_a_read_only_copy_reads_as_what_it_copies() -> None:
    params = {"path": "a.md", "lines": [1, 2], "meta": {"k": "v"}}
    shown = read_only(params)
    assert shown == params and isinstance(shown, dict) and isinstance(shown["lines"], list)
    import json

    assert json.loads(json.dumps(shown)) == params
    mine = dict(shown)
    mine["path"] = "b.md"  # a copy of its own is free to change
    for attempt in (
        lambda: shown.__setitem__("path", "b.md"),
        lambda: shown["lines"].append(3),
        lambda: shown["meta"].update(k="w"),
        lambda: shown.pop("path"),
    ):
        try:
            attempt()
        except TypeError:
            continue
        raise AssertionError("a read-only copy let a change through")
    assert params == {"path": "a.md", "lines": [1, 2], "meta": {"k": "v"}}


def test_an_approvers_edit_meets_every_live_policy(make_agent: Factory) -> None:
    """A person (here ``confirm=``) edits draft.md into secret.md; another live policy denies
    every write to secret.md, and its denial wins: nothing is written."""
    script = [
        gr.tool_call("write_file", path="draft.md", content="draft"),
        gr.text("Done."),
    ]

    def confirm(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer.edit({"path": "secret.md", "content": "draft"})

    agent = make_agent(
        gr.ScriptedModel(script),
        self_regulation=False,
        policies=[gr.ApprovalPolicy(tools=["write_file"]), DenySecret()],
        confirm=confirm,
    )
    run = agent.run_sync("job")
    ws = run.workspace.root
    assert not (ws / "secret.md").exists() and not (ws / "draft.md").exists()
    [call] = run.events.of_kind("tool_call")
    assert call.data["is_error"] and "Denied by policy 'no_secret'" in call.data["result"]
    decisions = run.policy_df()
    assert decisions["decision"].tolist() == ["ask", "deny"]  # the ask, then the edit's denial
    assert decisions["guardrail"].tolist() == ["approval", "no_secret"]


def test_an_edit_another_policy_asks_about_is_put_to_the_person_again(
    make_agent: Factory,
) -> None:
    """The edit names a file a second policy holds for a person: the person is asked again,
    shown the edit, and only their approval runs it."""
    script = [gr.tool_call("write_file", path="draft.md", content="x"), gr.text("Done.")]
    asked: list[dict[str, Any]] = []

    def confirm(request: ApprovalRequest) -> ApprovalAnswer | bool:
        asked.append(dict(request.input))
        if len(asked) == 1:
            return ApprovalAnswer.edit({"path": "release.md", "content": "x"})
        return True

    careful = gr.ApprovalPolicy(
        when=lambda name, params: params.get("path") == "release.md", name="release_owner"
    )
    agent = make_agent(
        gr.ScriptedModel(script),
        self_regulation=False,
        policies=[gr.ApprovalPolicy(tools=["write_file"]), careful],
        confirm=confirm,
    )
    run = agent.run_sync("job")
    assert asked == [
        {"path": "draft.md", "content": "x"},
        {"path": "release.md", "content": "x"},
    ]
    assert (run.workspace.root / "release.md").read_text() == "x"
    assert not (run.workspace.root / "draft.md").exists()


def test_approve_after_a_refused_edit_runs_only_what_the_request_showed(
    make_agent: Factory, tmp_path: Path
) -> None:
    """The schema refuses the person's edit; they are asked again, shown the edit and the
    problem, and press Approve: the model's original input (DROP TABLE) must not run."""
    ran: list[str] = []

    def run_sql(context: Any, params: Mapping[str, Any]) -> str:
        ran.append(params["query"])
        return "ok"

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    sql = gr.Tool("sql", "Run one SQL statement.", schema, run_sql)

    script = [gr.tool_call("sql", query="DROP TABLE users"), gr.text("Done.")]
    shown: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> ApprovalAnswer | bool:
        shown.append(request)
        if len(shown) == 1:
            return ApprovalAnswer.edit({"query": 42})  # not a string: the schema refuses it
        return True

    agent = make_agent(
        gr.ScriptedModel(script),
        self_regulation=False,
        tools=[sql],
        policies=[gr.ApprovalPolicy(tools=["sql"])],
        confirm=confirm,
    )
    run = agent.run_sync("job")
    assert ran == []  # neither the original nor the refused edit ran
    assert [dict(r.input) for r in shown] == [{"query": "DROP TABLE users"}, {"query": 42}]
    assert shown[1].problem is not None
    [call] = run.events.of_kind("tool_call")  # the model's call, which did not run
    assert call.data["is_error"] and call.data["input"] == {"query": "DROP TABLE users"}
    assert 'Not run: a person edited this call into {"query": 42}' in call.data["result"]
    assert "'query' must be a string" in call.data["result"]
