"""Shared fixtures: agents that keep everything (workspace, store) inside tmp_path."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
import gr_notebook.models
from gr_notebook.models import ModelResponse

PLAN_TWO_PHASES = """\
# Execution Plan

## Overview
Two phases of five steps.

## Phase 1: Gather ← CURRENT
- [ ] Gather a
- [ ] Gather b
- [ ] Gather c
- [ ] Gather d
- [ ] Gather e

## Phase 2: Write
- [ ] Write a
- [ ] Write b
- [ ] Write c
- [ ] Write d
- [ ] Write e
"""

PLAN_PHASE_1_DONE = PLAN_TWO_PHASES.replace("Gather ← CURRENT", "Gather ✓ COMPLETE").replace(
    "## Phase 2: Write", "## Phase 2: Write ← CURRENT"
)

PHASE_1 = ["Gather a", "Gather b", "Gather c", "Gather d", "Gather e"]
PHASE_2 = ["Write a", "Write b", "Write c", "Write d", "Write e"]


def bootstrap_script(plan: str = PLAN_TWO_PHASES) -> list[ModelResponse]:
    """The five bootstrap tasks, done the way the seed describes, ending in a transition."""
    return [
        gr.tool_call("generate_workspace_summary"),
        gr.tool_call("todo_complete"),
        gr.tool_call("read_file", path="workspace_summary.md"),
        gr.tool_call("todo_complete"),
        gr.tool_call("read_file", path="instructions.md"),
        gr.tool_call("todo_complete"),
        gr.tool_call("write_file", path="main_plan.md", content=plan),
        gr.tool_call("todo_complete"),
        gr.tool_call("todo_complete"),
    ]


def complete_all(n: int) -> list[ModelResponse]:
    return [gr.tool_call("todo_complete") for _ in range(n)]


def full_job_script() -> list[ModelResponse]:
    """A whole two-phase job done the seed's way, ending with job_complete."""
    return [
        *bootstrap_script(),
        gr.tool_call("todo_write", todos=PHASE_1),
        *complete_all(5),
        gr.tool_call("write_file", path="main_plan.md", content=PLAN_PHASE_1_DONE),
        gr.tool_call("todo_write", todos=PHASE_2),
        *complete_all(5),
        gr.tool_call("list_files"),
        gr.tool_call("todo_complete"),
        gr.tool_call("write_file", path="report.md", content="# Summary report\n"),
        gr.tool_call("todo_complete"),
        gr.tool_call("job_complete", summary="done", deliverables=["report.md"], confidence=1),
    ]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: runs by default (tens of seconds); deselect with -m 'not slow'"
    )


@pytest.fixture(autouse=True, scope="session")
def offline() -> Iterator[None]:
    """Tests never reach the internet: the package's network guard is on, a stray API key or
    base URL in the environment is hidden, loopback bypasses any proxy, and a socket to
    anywhere but this machine is refused."""
    gr_notebook.models.ALLOW_NETWORK = False
    hidden = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_LOG")
    saved = {name: os.environ.pop(name) for name in hidden if name in os.environ}
    no_proxy = os.environ.get("NO_PROXY")
    os.environ["NO_PROXY"] = ",".join(filter(None, [no_proxy, "127.0.0.1", "localhost"]))
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = host == "localhost"
            if not loopback:
                raise ConnectionRefusedError(f"tests are offline: no connection to {host}")
        real_connect(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        os.environ.update(saved)
        if no_proxy is None:
            del os.environ["NO_PROXY"]
        else:
            os.environ["NO_PROXY"] = no_proxy


def agent_at(root: Path, model: Any = None, **kwargs: Any) -> gr.Agent:
    """An agent whose workspace (``root/ws``) and store (``root/store.sqlite``) stay in root,
    made if need be (a store's folder must exist)."""
    root.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("workspace", root / "ws")
    kwargs.setdefault("store", root / "store.sqlite")
    kwargs.setdefault("max_iterations", 200)
    return gr.Agent(model=model, **kwargs)


@pytest.fixture
def make_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., gr.Agent]:
    monkeypatch.chdir(tmp_path)  # default workspaces and stores land in tmp_path/gr_runs

    def factory(model: Any = None, **kwargs: Any) -> gr.Agent:
        return agent_at(tmp_path, model, **kwargs)

    return factory


HEALTHY_PROFILES = frozenset({"simulated:diligent", "simulated:literal"})


@pytest.fixture(autouse=True)
def healthy_runs_give_coherent_orders(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every run in the suite of a healthy profile under the default guardrails (no custom
    policy, feedback or checker) that finishes its job must pass ``gr.lint_guidance``."""
    started: list[tuple[gr.Agent, gr.Run]] = []
    start = gr.Agent.start

    def recording(self: gr.Agent, *args: Any, **kwargs: Any) -> gr.Run:
        run = start(self, *args, **kwargs)
        started.append((self, run))
        return run

    monkeypatch.setattr(gr.Agent, "start", recording)
    yield
    for agent, run in started:
        spec = agent.guardrails
        default = not (spec.bindings or spec.feedback or spec.checker)
        if agent.model.name in HEALTHY_PROFILES and default and run.done and run.job:
            conflicts = gr.lint_guidance(run)
            assert conflicts == [], f"a healthy run gave conflicting orders: {conflicts}"


@pytest.fixture
def fails_if_it_hangs() -> Iterator[None]:
    """Turns a call that would block forever (a FIFO opened for reading, a runaway regex)
    into a failure after a few seconds, so a regression fails the test instead of hanging."""
    import signal

    def hung(signum: int, frame: Any) -> None:
        raise AssertionError("hung: the call blocked for over 5 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def special_files(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/ws`` holding a FIFO (``pipe``), a listening Unix socket (``sock``) and
    ``notes.txt``, as a person or a command might leave them."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    (root / "notes.txt").write_text("hello pipe\n", encoding="utf-8")
    os.mkfifo(root / "pipe")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(root / "sock"))
        server.listen()
        yield root
