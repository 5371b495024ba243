"""IPython's testing shell with the magics loaded, a real ipykernel for the tests that need
one, and the helpers that read a cell's replies."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

Message = dict[str, Any]


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The in-process shell with ``%load_ext gr_notebook``, working in ``tmp_path``; the
    names a test binds are removed after it."""
    monkeypatch.chdir(tmp_path)  # default workspaces and the store land in tmp_path/gr_runs
    shell = globalipapp.get_ipython()  # the module swaps in the real one on first call
    shell.run_line_magic("load_ext", "gr_notebook")
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]


@pytest.fixture
def real_kernel(tmp_path: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A python3 kernel started in ``tmp_path``, shut down after the test."""
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def replies(
    client: BlockingKernelClient,
    msg_id: str,
    timeout: float = 60,
    on_message: Callable[[Message], object] | None = None,
) -> Iterator[Message]:
    """The iopub messages of the cell ``msg_id`` up to its idle status; ``on_message`` sees
    every message first, the cell's or not. Fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"the cell was not idle after {timeout}s")
        if on_message is not None:
            on_message(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return
        yield msg


def collect(
    client: BlockingKernelClient,
    msg_id: str,
    timeout: float = 60,
    on_message: Callable[[Message], object] | None = None,
) -> str:
    """What the cell printed, tracebacks included."""
    out: list[str] = []
    for msg in replies(client, msg_id, timeout, on_message):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))
    return "".join(out)


def execute(client: BlockingKernelClient, code: str, timeout: float = 60) -> str:
    """Run ``code`` as a cell and return what it printed."""
    return collect(client, client.execute(code), timeout)
