"""One set of scenarios, three backends: a ScriptedModel, the AnthropicModel over the real
SDK against the local Messages API server, and the OpenAIModel over the real ``openai`` SDK
against the local chat-completions server. All must behave the same, turn for turn."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.models import ModelResponse
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.openai_model import OpenAIModel
from gr_notebook.models.retry import RetryPolicy
from gr_notebook.testing import ChatServer, MessagesServer
from tests.conftest import PHASE_1, PLAN_TWO_PHASES, agent_at, bootstrap_script, full_job_script

Script = list[ModelResponse]
Backend = Callable[[Script], gr.models.Model]
BACKENDS = ("scripted", "anthropic", "openai")


@pytest.fixture
def backends() -> Iterator[dict[str, Backend]]:
    """Model factories by backend; the servers they start are closed after the test."""
    servers: list[MessagesServer] = []  # a ChatServer is one too

    def anthropic_backend(script: Script) -> gr.models.Model:
        import anthropic

        server = MessagesServer(script).start()
        servers.append(server)
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=server.url, max_retries=0)
        return AnthropicModel("claude-sonnet-4-6", client=client, retry=RetryPolicy(base_s=0))

    def openai_backend(script: Script) -> gr.models.Model:
        server = ChatServer(script).start()
        servers.append(server)
        return OpenAIModel("qwen2.5:7b", base_url=f"{server.url}/v1", retry=RetryPolicy(base_s=0))

    yield {
        "scripted": lambda script: gr.ScriptedModel(script),
        "anthropic": anthropic_backend,
        "openai": openai_backend,
    }
    for server in servers:
        server.close()


_TOOL_IDS = re.compile(r"toolu_[A-Za-z0-9_]+")
_CLOCK = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}|\b\d{2}:\d{2}\b")
_MODEL_KINDS = {"model_call", "model_retry"}


def behaviour(run: gr.Run) -> dict[str, Any]:
    """What the run did, without what depends on the backend: tool-use ids, token counts,
    timings and the model's name."""
    calls = [
        (
            e.data["tool"],
            json.dumps(e.data.get("input"), sort_keys=True),
            e.data["is_error"],
            _CLOCK.sub("<time>", _TOOL_IDS.sub("toolu_*", str(e.data.get("result")))),
        )
        for e in run.events
        if e.kind == "tool_call"
    ]
    workspace = run.workspace.root
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    return {
        "status": run.status,
        "reason": run.reason,
        "turns": run.turns,
        "kinds": [e.kind for e in run.events if e.kind not in _MODEL_KINDS],
        "calls": calls,
        "todos": [(t.title, t.done) for t in run.todos.items],
        "files": [f for f in files if not f.startswith("tool_docs/")],
        "plan": run.workspace.read_text("main_plan.md") if "main_plan.md" in files else None,
    }


# -- the scenarios: a script, the agent's options, and what must hold on either backend ------


def full_cycle(tmp_path: Path, model: gr.models.Model) -> gr.Run:
    run = agent_at(tmp_path, model).run_sync("job")
    assert run.status == "completed" and run.job is not None
    phases = run.phases_df()
    assert list(phases["kind"]) == ["bootstrap", "phase", "phase", "job_completion"]
    assert list(phases["outcome"]) == ["complete", "complete", "complete", "complete"]
    return run


def policy_denial(tmp_path: Path, model: gr.models.Model) -> gr.Run:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "data.md").write_text("old\n")
    run = agent_at(tmp_path, model, policies=[gr.ReadBeforeWritePolicy()]).run_sync("job")
    denied, read, allowed = [e for e in run.events if e.kind == "tool_call"]
    assert denied.data["is_error"] and "read_file" in denied.data["result"]
    assert not read.data["is_error"] and not allowed.data["is_error"]
    assert run.workspace.read_text("data.md") == "new\n"
    return run


def early_stop_refused(tmp_path: Path, model: gr.models.Model) -> gr.Run:
    run = agent_at(tmp_path, model, task_completion_checker=gr.PlanBasedChecker()).run_sync("job")
    checks = run.completion_df()
    assert checks["complete"].tolist()[0] is False  # the early stop was refused
    assert run.status == "completed" and run.job is not None
    return run


def budget_runs_out(tmp_path: Path, model: gr.models.Model) -> gr.Run:
    run = agent_at(tmp_path, model, max_iterations=4).run_sync("job")
    assert run.status == "budget_exhausted"
    assert run.turns == 4
    assert sum(t.done for t in run.todos.items) == 2  # state kept as it was
    return run


def rewind(tmp_path: Path, model: gr.models.Model) -> gr.Run:
    run = agent_at(tmp_path, model).run_sync("job")
    [event] = run.events.of_kind("rewind")
    assert event.data["source"] == "model"
    assert "source is offline" in run.workspace.read_text("experiences.md")
    assert run.todos.items[0].title == "Gather b from the cache"
    return run


ISSUE = "Gather b is impossible: the source is offline. Could use the cached copy instead."
SCENARIOS: dict[str, tuple[Callable[[], Script], Callable[[Path, gr.models.Model], gr.Run]]] = {
    "full cycle": (full_job_script, full_cycle),
    "policy denial": (
        lambda: [
            gr.tool_call("write_file", path="data.md", content="new\n"),
            gr.tool_call("read_file", path="data.md"),
            gr.tool_call("write_file", path="data.md", content="new\n"),
            gr.text("Wrote data.md."),
        ],
        policy_denial,
    ),
    "early stop refused": (lambda: [gr.text("All done!"), *full_job_script()], early_stop_refused),
    "budget runs out": (bootstrap_script, budget_runs_out),
    "rewind": (
        lambda: [
            *bootstrap_script(),
            gr.tool_call("todo_write", todos=PHASE_1),
            gr.tool_call("todo_complete"),
            gr.tool_call("todo_rewind", issue=ISSUE),
            gr.tool_call("read_file", path="experiences.md"),
            gr.tool_call(
                "write_file",
                path="main_plan.md",
                content=PLAN_TWO_PHASES.replace("- [ ] Gather b", "- [ ] Gather b from the cache"),
            ),
            gr.tool_call("todo_write", todos=["Gather b from the cache", *PHASE_1[2:]]),
            gr.text("ok"),
        ],
        rewind,
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario(
    scenario: str, backend: str, backends: dict[str, Backend], tmp_path: Path
) -> None:
    script, check = SCENARIOS[scenario]
    run = check(tmp_path, backends[backend](script()))
    assert not run.events.of_kind("model_retry")  # a retry would hide a wire-format fault


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_backend_behaves_the_same(
    scenario: str, backends: dict[str, Backend], tmp_path: Path
) -> None:
    script, check = SCENARIOS[scenario]
    seen = {}
    for backend in BACKENDS:
        root = tmp_path / backend
        root.mkdir()
        seen[backend] = behaviour(check(root, backends[backend](script())))
    assert seen["anthropic"] == seen["scripted"]
    assert seen["openai"] == seen["scripted"]


def test_the_anthropic_backend_really_went_over_http(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    model = backends["anthropic"](full_job_script())
    run = full_cycle(tmp_path, model)
    assert isinstance(model, AnthropicModel)
    turns = run.turns_df()
    assert (turns.input_tokens > 0).all() and turns.cost_usd.notna().all()
    assert run.events.of_kind("run_started")[0].data["model"] == "anthropic:claude-sonnet-4-6"


def test_the_openai_backend_really_went_over_http(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    model = backends["openai"](full_job_script())
    run = full_cycle(tmp_path, model)
    assert isinstance(model, OpenAIModel)
    assert (run.turns_df().input_tokens > 0).all()
    assert run.events.of_kind("run_started")[0].data["model"] == "openai:qwen2.5:7b"
