"""Real-browser test: the quickstart notebook in JupyterLab, driven by headless Chromium.

A private JupyterLab server (its config, data, runtime and IPython dirs all under the
test's tmp dir) serves a copy of ``notebooks/01_quickstart.ipynb`` with its outputs
cleared. Playwright opens it in Debian's Chromium, runs every cell from the Run menu and
checks that no cell failed and that the live dashboard widget is on the page.

Skipped only when Chromium or the ``playwright`` package is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The notebook under test. GR_BROWSER_NOTEBOOK may point at another notebook
# (e.g. a stand-in while developing); the copy served keeps the file's name.
NOTEBOOK = Path(
    os.environ.get("GR_BROWSER_NOTEBOOK", REPO_ROOT / "notebooks" / "01_quickstart.ipynb")
)

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SERVER_START_TIMEOUT = 60.0  # s, until /api/status answers
RUN_ALL_TIMEOUT_MS = 180_000  # until every code cell has run and the kernel is idle again
UI_TIMEOUT_MS = 60_000  # page load, kernel start, clicks
WIDGET_TIMEOUT_MS = 30_000  # the dashboard rendering once the cells have run

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
STDERR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
ERROR_OUTPUT = ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']"
IDLE = f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']"


def _find_chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium")


CHROMIUM = _find_chromium()

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError as exc:  # pragma: no cover - depends on the environment
    _PLAYWRIGHT_MISSING: str | None = f"playwright is not importable ({exc})"
else:
    _PLAYWRIGHT_MISSING = None

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium (/usr/bin/chromium or `chromium` on PATH); "
        "install it with `apt-get install -y chromium`",
    ),
    pytest.mark.skipif(_PLAYWRIGHT_MISSING is not None, reason=str(_PLAYWRIGHT_MISSING)),
]

# JupyterLab user settings written into the private config dir:
# - render every cell (no windowing), so all cells are in the DOM for the checks;
# - no news / update toasts over the page.
LAB_USER_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

# Code cells of the visible notebook that have not run yet: no execution count in their
# prompt ("[ ]:" or "[*]:"). Empty cells never get a count, so they are left out.
CELLS_NOT_RUN_JS = """
(panelSelector) => {
    const panel = document.querySelector(panelSelector);
    if (!panel) return [-1];
    const cells = [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell')];
    return cells.flatMap((cell, index) => {
        const source = cell.querySelector('.cm-content');
        if (source && source.textContent.trim() === '') return [];
        const prompt = cell.querySelector('.jp-InputArea-prompt');
        return prompt !== null && /\\[\\d+\\]/.test(prompt.textContent) ? [] : [index];
    });
}
"""
# Run All stops at a failing cell, so also stop waiting once an error is shown.
# (Plain stderr output, e.g. a warning, is not an error.)
RUN_FINISHED_JS = f"""
(panelSelector) => {{
    const panel = document.querySelector(panelSelector);
    if (!panel) return false;
    if (panel.querySelector({json.dumps(ERROR_OUTPUT)})) return true;
    const stderr = [...panel.querySelectorAll({json.dumps(STDERR_OUTPUT)})];
    if (stderr.some((el) => el.textContent.includes('Traceback'))) return true;
    const notRun = ({CELLS_NOT_RUN_JS})(panelSelector);
    return notRun.length === 0;
}}
"""


@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "<no server log>"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (Linux /proc; empty elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ..."; comm may contain spaces, so split after ')'.
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _copy_notebook(src: Path, dest_dir: Path) -> Path:
    """Copy ``src`` into ``dest_dir`` with outputs and counts cleared, on the python3 kernel."""
    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    dest = dest_dir / src.name
    nbformat.write(nb, dest)
    return dest


def _write_private_jupyter_dirs(base: Path) -> dict[str, str]:
    """Config/data/runtime/IPython dirs under ``base``; returns the environment for them."""
    dirs = {
        name: base / sub
        for name, sub in [
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_DATA_DIR", "data"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
        ]
    }
    for path in dirs.values():
        path.mkdir(parents=True)

    # Pin the python3 kernel to this interpreter. The user data dir is searched first,
    # so this spec shadows any other python3 kernelspec on the machine.
    spec_dir = dirs["JUPYTER_DATA_DIR"] / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "metadata": {"debugger": True},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))

    settings_dir = dirs["JUPYTER_CONFIG_DIR"] / "lab" / "user-settings"
    for rel, values in LAB_USER_SETTINGS.items():
        target = settings_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))

    return {name: str(path) for name, path in dirs.items()}


def _stop(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


@pytest.fixture
def lab_server(tmp_path: Path) -> Iterator[LabServer]:
    base = tmp_path / "lab"
    root = base / "root"
    root.mkdir(parents=True)
    env = {**os.environ, **_write_private_jupyter_dirs(base)}
    env.setdefault("GR_QUICKSTART_LATENCY", "0.05")  # the quickstart's background run, fast
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)

    port = _free_port()
    token = secrets.token_hex(24)
    log = base / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--allow-root",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    server = LabServer(f"http://127.0.0.1:{port}", token, root, proc, log)
    kernels: set[int] = set()
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                urllib.request.urlopen(f"{server.url}/api/status?token={token}", timeout=2)
                break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"jupyter lab not ready after {SERVER_START_TIMEOUT:.0f}s:\n{server.log_tail()}"
                )
            time.sleep(0.25)
        yield server
    finally:
        kernels.update(_children(proc.pid))
        if proc.poll() is None:
            try:  # shut the kernels down cleanly first
                for session in server.api("GET", "/api/sessions"):
                    server.api("DELETE", f"/api/sessions/{session['id']}")
            except (urllib.error.URLError, OSError, ValueError):
                pass
        _stop(proc)
        for pid in kernels:  # anything the server left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _wait_for_kernel(page: Page, server: LabServer) -> None:
    """Wait until the page's kernel is up and idle.

    The execution indicator alone is not enough: it reads "idle" (with "No Kernel") for a
    moment before the page has even asked for a session. So first wait until the server
    has a session for the notebook whose kernel is idle with the page connected to it.
    """
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        sessions = server.api("GET", "/api/sessions")
        if any(
            s["path"] == NOTEBOOK.name
            and s["kernel"]["execution_state"] == "idle"
            and s["kernel"]["connections"] >= 1
            for s in sessions
        ):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"no idle kernel for {NOTEBOOK.name}: {sessions}\n{server.log_tail()}")
        time.sleep(0.2)
    page.wait_for_selector(IDLE)


def _assert_no_errors(page: Page) -> None:
    tracebacks = page.locator(f"{PANEL} {STDERR_OUTPUT}", has_text="Traceback")
    errors = page.locator(f"{PANEL} {ERROR_OUTPUT}")
    problems = [*tracebacks.all_inner_texts(), *errors.all_inner_texts()]
    assert not problems, "cell errors in the notebook:\n\n" + "\n\n".join(problems)


def test_quickstart_dashboard_in_browser(lab_server: LabServer, tmp_path: Path) -> None:
    started = time.monotonic()
    server = lab_server
    assert CHROMIUM is not None
    assert NOTEBOOK.is_file(), f"notebook under test is missing: {NOTEBOOK}"
    _copy_notebook(NOTEBOOK, server.root)
    n_code_cells = sum(
        1 for cell in nbformat.read(NOTEBOOK, as_version=4).cells if cell.cell_type == "code"
    )

    # Every run gets a fresh kernel.
    for session in server.api("GET", "/api/sessions"):
        server.api("DELETE", f"/api/sessions/{session['id']}")

    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{server.url}/lab/tree/{NOTEBOOK.name}?reset&token={server.token}")
            _wait_for_kernel(page, server)

            if Path("/proc").is_dir():
                # The kernel behind the page runs on this interpreter (the venv's python).
                argvs = [_cmdline(pid) for pid in _children(server.proc.pid)]
                kernels = [argv for argv in argvs if "ipykernel_launcher" in argv]
                assert kernels, f"no kernel process under the server: {argvs}"
                for argv in kernels:
                    assert Path(argv[0]).resolve() == Path(sys.executable).resolve(), argv

            cells = page.locator(f"{PANEL} .jp-Notebook .jp-CodeCell")
            assert cells.count() == n_code_cells, "not every code cell is in the DOM"

            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu [data-command='runmenu:run-all']").click()
            page.wait_for_function(RUN_FINISHED_JS, arg=PANEL, timeout=RUN_ALL_TIMEOUT_MS)
            page.wait_for_selector(IDLE, timeout=RUN_ALL_TIMEOUT_MS)

            _assert_no_errors(page)
            not_run = page.evaluate(CELLS_NOT_RUN_JS, PANEL)
            assert not not_run, f"code cells (0-based) without an execution count: {not_run}"

            dashboard = page.locator(f"{PANEL} .gr-dashboard").first
            expect(dashboard).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
            todos = dashboard.locator(".gr-todos").first
            expect(todos).to_be_visible()
            expect(todos).to_contain_text("ACTIVE TODO LIST")
            meters = dashboard.locator(".gr-meters").first
            expect(meters).to_be_visible()
            expect(meters.locator(".gr-meter").nth(2)).to_be_visible()  # at least three
            for meter in meters.locator(".gr-meter").all():
                expect(meter).to_be_visible()
            expect(dashboard.locator(".gr-timeline").first).to_be_visible()

            _assert_no_errors(page)  # nothing failed while the widget rendered either

            dashboard.scroll_into_view_if_needed()
            full = shots / "quickstart-full.png"
            widget = shots / "quickstart-dashboard.png"
            page.screenshot(path=str(full), full_page=True)
            dashboard.screenshot(path=str(widget))
            print(f"\nscreenshots: {full}\n             {widget}")
        finally:
            browser.close()
    print(f"browser test took {time.monotonic() - started:.1f}s (after server start)")
