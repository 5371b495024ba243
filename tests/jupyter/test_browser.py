"""Real-browser tests: every notebook in JupyterLab, driven by headless Chromium.

A private JupyterLab server (its config, data, runtime and IPython dirs all under a
temporary dir) serves copies of the notebooks with their outputs cleared. Playwright opens
each in Debian's Chromium and runs it as a reader does, from Run → Run All Cells: every cell
is queued at once, which is what nbval's one-cell-at-a-time run cannot see. A notebook
passes when every code cell ran and no output is an error or an asyncio complaint. A live
dashboard is then used by hand: Pause, Unpause, Rewind while paused, Fork (the fork's own
dashboard shows under it), Stop. The notebooks are also read as a reader opens them with no
live kernel: every committed notebook with no kernel at all, and the quickstart and the
backtest (its labeller used by hand) after Run All, a save and a reopen with their kernel
shut down. Every dashboard, progress table and labeller must be drawn as it ended (a widget
output would read "(a live widget)" or "Error displaying widget: model not found").

Screenshots go to ``build/screenshots/`` (GR_SCREENSHOTS overrides it), to be looked at.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.chromium import NEEDS_CHROMIUM, REPO_ROOT, SHOTS, launched

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))

SERVER_START_TIMEOUT = 60.0  # s, until /api/status answers
RUN_ALL_TIMEOUT_MS = 240_000  # until every code cell has run and the kernel is idle again
UI_TIMEOUT_MS = 60_000  # page load, kernel start, clicks
WIDGET_TIMEOUT_MS = 30_000  # the dashboard rendering once the cells have run

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
STDERR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
# What a cell re-entering the kernel's loop under Run All prints (ipykernel 7), besides errors.
ASYNCIO_COMPLAINTS = ("already entered", "Task was destroyed", "Traceback")
ERROR_OUTPUT = ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']"
IDLE = f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']"


with contextlib.suppress(ImportError):  # tests.chromium skips the module without it
    from playwright.sync_api import Browser, Locator, Page, expect

pytestmark = NEEDS_CHROMIUM

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
    const bad = {json.dumps(list(("already entered", "Task was destroyed", "Traceback")))};
    if (stderr.some((el) => bad.some((b) => el.textContent.includes(b)))) return true;
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


KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


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


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    base = tmp_path_factory.mktemp("lab")
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
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp opens files in one page
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


def _wait_for_kernel(page: Page, server: LabServer, name: str) -> None:
    """Wait until the page's kernel is up and idle.

    The execution indicator alone is not enough: it reads "idle" (with "No Kernel") for a
    moment before the page has even asked for a session. So first wait until the server
    has a session for the notebook whose kernel is idle with the page connected to it.
    """
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        sessions = server.api("GET", "/api/sessions")
        if any(
            s["path"] == name
            and s["kernel"]["execution_state"] == "idle"
            and s["kernel"]["connections"] >= 1
            for s in sessions
        ):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"no idle kernel for {name}: {sessions}\n{server.log_tail()}")
        time.sleep(0.2)
    page.wait_for_selector(IDLE)


def _assert_no_errors(page: Page) -> None:
    stderr = page.locator(f"{PANEL} {STDERR_OUTPUT}").all_inner_texts()
    complaints = [text for text in stderr if any(bad in text for bad in ASYNCIO_COMPLAINTS)]
    errors = page.locator(f"{PANEL} {ERROR_OUTPUT}").all_inner_texts()
    problems = [*complaints, *errors]
    assert not problems, "cell errors in the notebook:\n\n" + "\n\n".join(problems)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launched()


@pytest.fixture(scope="module")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


def test_current_stays_inside_the_todo_box_at_any_width(browser: Browser) -> None:
    """A task longer than the rules wraps inside the box they draw, "← CURRENT" with it."""
    from gr_notebook.display.render import render_todos
    from gr_notebook.workflow.todos import TodoList

    long = "Record the feeding habits of each species in the survey notes"
    html = render_todos(TodoList.of([long, "Describe each song"], phase_name="Survey"))
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    try:
        for width in (1100, 480, 260):
            page.set_content(f"<div style='width:{width}px'>{html}</div>")
            rule = page.locator(".gr-todos span").first.bounding_box()
            mark = page.locator(".gr-current span").first.bounding_box()
            assert rule is not None and mark is not None
            right = min(rule["x"] + rule["width"], width)  # a rule is cut at the panel's edge
            assert mark["x"] + mark["width"] <= right + 1, width
    finally:
        page.close()


def _end_sessions(server: LabServer) -> None:
    for session in server.api("GET", "/api/sessions"):
        server.api("DELETE", f"/api/sessions/{session['id']}")


@contextlib.contextmanager
def _opened(
    browser: Browser, server: LabServer, notebook: nbformat.NotebookNode, name: str
) -> Iterator[Page]:
    """``notebook`` served as ``name`` on a fresh kernel, open in a 1400 px page."""
    notebook.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(notebook, server.root / name)
    _end_sessions(server)  # every notebook gets a fresh kernel
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(f"{server.url}/lab/tree/{name}?reset&token={server.token}")
        _wait_for_kernel(page, server, name)
        yield page
    finally:
        page.close()
        _end_sessions(server)


def _run_all(page: Page, n_code_cells: int) -> None:
    """Run → Run All Cells, as a reader does; then no cell may have failed or be left."""
    cells = page.locator(f"{PANEL} .jp-Notebook .jp-CodeCell")
    assert cells.count() == n_code_cells, "not every code cell is in the DOM"
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu [data-command='runmenu:run-all']").click()
    page.wait_for_function(RUN_FINISHED_JS, arg=PANEL, timeout=RUN_ALL_TIMEOUT_MS)
    page.wait_for_selector(IDLE, timeout=RUN_ALL_TIMEOUT_MS)
    _assert_no_errors(page)
    not_run = page.evaluate(CELLS_NOT_RUN_JS, PANEL)
    assert not not_run, f"code cells (0-based) without an execution count: {not_run}"


def _cleared(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    return nb


def _meters_within_100(dashboard: Locator) -> None:
    """A healthy run's meters never read past 100%."""
    text = dashboard.locator(".gr-meters").first.inner_text()
    over = [int(p) for p in re.findall(r"(\d+)%", text) if int(p) > 100]
    assert not over, f"a meter reads past 100%: {text}"


DASHBOARD = f"{PANEL} .gr-dashboard"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NO_WIDGET = ("(a live widget)", "model not found", "Loading widget")


def _dashboards_drawn(page: Page, expected: int, shot: Path) -> None:
    """``expected`` dashboards, each drawn in full as its run ended (a screenshot of each,
    ``shot`` numbered), and no widget output that a page without the kernel's widgets
    cannot draw."""
    page.wait_for_selector(f"{PANEL} .jp-Notebook .jp-CodeCell")
    expect(page.locator(DASHBOARD)).to_have_count(expected, timeout=WIDGET_TIMEOUT_MS)
    for board in page.locator(DASHBOARD).all():
        expect(board.locator(".gr-todos").first).to_contain_text("ACTIVE TODO LIST")
        expect(board.locator(".gr-state").first).to_have_text("completed")
        expect(board.locator(".gr-timeline").first).to_contain_text("Run completed")
        _meters_within_100(board)
    text = page.locator(f"{PANEL} .jp-Notebook").inner_text()
    assert not [bad for bad in NO_WIDGET if bad in text], text[:2000]
    for number, board in enumerate(page.locator(DASHBOARD).all(), 1):
        board.scroll_into_view_if_needed()
        board.screenshot(path=str(shot.with_name(f"{shot.stem}-{number}.png")))


def _save(page: Page, server: LabServer, name: str) -> None:
    """Save as a reader does (Ctrl+S), and wait until the file on disk has the outputs."""
    before = (server.root / name).stat().st_mtime_ns
    page.locator(f"{PANEL} .jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while (server.root / name).stat().st_mtime_ns == before:
        assert time.monotonic() < deadline, "the notebook was not saved"
        time.sleep(0.2)


@contextlib.contextmanager
def _reopened(browser: Browser, server: LabServer, name: str) -> Iterator[Page]:
    """The notebook as it is on disk, in a new page (its kernel gone: a new one starts)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(f"{server.url}/lab/tree/{name}?reset&token={server.token}")
        yield page
    finally:
        page.close()
        _end_sessions(server)


def _quickstart(page: Page, shots: Path) -> None:
    dashboard = page.locator(f"{PANEL} .gr-dashboard").first
    expect(dashboard).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
    todos = dashboard.locator(".gr-todos").first
    expect(todos).to_be_visible()
    expect(todos).to_contain_text("ACTIVE TODO LIST")
    meters = dashboard.locator(".gr-meters").first
    expect(meters.locator(".gr-meter").nth(2)).to_be_visible()  # at least three
    for meter in meters.locator(".gr-meter").all():
        expect(meter).to_be_visible()
    expect(dashboard.locator(".gr-timeline").first).to_be_visible()
    expect(dashboard.locator(".gr-state").first).to_have_text("completed")
    for board in page.locator(f"{PANEL} .gr-dashboard").all():
        _meters_within_100(board)
    dashboard.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "quickstart-full.png"), full_page=True)
    dashboard.screenshot(path=str(shots / "quickstart-dashboard.png"))


def _plot_output(page: Page, source: str) -> Locator:
    """The image a cell whose source holds ``source`` displayed."""
    cell = page.locator(f"{PANEL} .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea", has_text=source)
    )
    image = cell.locator(".jp-OutputArea-output img").first
    expect(image).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
    return image


def _time_travel(page: Page, shots: Path) -> None:
    image = _plot_output(page, "comparison.plot()")
    image.scroll_into_view_if_needed()
    image.screenshot(path=str(shots / "time-travel-plot.png"))
    # gr.share.view: the shared page of the run and its fork, drawn in the cell's frame
    frame = page.locator(f"{PANEL} iframe[title='gr_notebook run viewer']")
    expect(frame).to_have_count(1)
    shared = frame.content_frame
    expect(shared.locator("body[data-ready='1'] #index tbody tr")).to_have_count(2)
    shared.get_by_role("button", name="Compare").click()
    expect(shared.locator("#compare tr.diverge")).to_have_count(1)
    frame.scroll_into_view_if_needed()
    frame.screenshot(path=str(shots / "time-travel-shared.png"))


def _experiments(page: Page, shots: Path) -> None:
    """The progress table, live while the experiment ran, is the table as it ended: no
    widget is left in its cell (what a save keeps)."""
    cell = page.locator(f"{PANEL} .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea", has_text="results = await experiment.arun()")
    )
    table = cell.locator(".gr-experiment")
    expect(table).to_contain_text(re.compile(r"(\d+) of \1 runs finished"))
    expect(cell.locator(".jupyter-widgets")).to_have_count(0)
    table.screenshot(path=str(shots / "experiments-progress.png"))
    image = _plot_output(page, "results.plot(")
    image.scroll_into_view_if_needed()
    image.screenshot(path=str(shots / "experiments-plot.png"))


def _agent_sdk(page: Page, shots: Path) -> None:
    dashboard = page.locator(f"{PANEL} .gr-dashboard").first
    expect(dashboard).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
    dashboard.scroll_into_view_if_needed()
    dashboard.screenshot(path=str(shots / "agent-sdk-dashboard.png"))


def _try_before_trust(page: Page, shots: Path) -> None:
    """The shadow run's dashboard, with its grey panel, and the approval run's, which was
    waiting for a person until a cell answered: both as their runs ended."""
    boards = page.locator(DASHBOARD)
    expect(boards).to_have_count(2, timeout=WIDGET_TIMEOUT_MS)
    for board in boards.all():
        expect(board.locator(".gr-state").first).to_have_text("completed")
    shadow = boards.nth(0).locator(".gr-shadow")
    expect(shadow).to_contain_text("read_before_write")
    expect(boards.nth(1).locator(".gr-timeline")).to_contain_text("approved in code")
    shadow.scroll_into_view_if_needed()
    boards.nth(0).screenshot(path=str(shots / "shadow-dashboard.png"))


def _code_cell(page: Page, source: str) -> Locator:
    return page.locator(f"{PANEL} .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea", has_text=source)
    )


def _backtest(page: Page, shots: Path) -> None:
    """Run All finished the labeller at once (the cell after it); run its cell again and
    label by hand: a click, a key in its keys box, each listed under it as it is kept; then
    Finish leaves the labeller as it stopped."""
    cell = _code_cell(page, "labeller = Labeller(")
    expect(cell.locator(".gr-labeller")).to_contain_text("Labelling finished: 0 of")
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")  # run the cell again, staying on it
    act = cell.get_by_role("button", name="Should act (y)")
    expect(act).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
    listed = cell.locator(".gr-labels")
    expect(listed).to_contain_text("none yet")
    act.click()
    expect(listed).to_contain_text("by you: 1 (1 should act, 0 should not)")
    cell.locator("input[placeholder^='keys here']").press_sequentially("n")
    expect(listed).to_contain_text("by you: 2 (1 should act, 1 should not)")
    cell.locator(".jp-OutputArea").screenshot(path=str(shots / "labeller-live.png"))
    cell.get_by_role("button", name="Finish").click()
    expect(cell.locator(".gr-labeller")).to_contain_text("Labelling finished: 2 of")
    expect(act).to_have_count(0)
    cell.locator(".jp-OutputArea").screenshot(path=str(shots / "labeller-finished.png"))


CHECKS: dict[str, Callable[[Page, Path], None]] = {
    "01_quickstart": _quickstart,
    "07_time_travel": _time_travel,
    "08_experiments": _experiments,
    "09_claude_agent_sdk": _agent_sdk,
    "10_try_before_trust": _try_before_trust,
    "11_backtest": _backtest,
}
# Saved after Run All (and the checks above), closed, and reopened with the kernel gone.
REOPENED = ("01_quickstart", "11_backtest")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_run_all_in_jupyterlab(
    path: Path, lab_server: LabServer, browser: Browser, shots: Path
) -> None:
    """Run All queues every cell at once: a cell that waits for a run must not step the
    cells queued behind it (ipykernel 7 runs each as a task on the kernel's loop). The
    quickstart and the backtest are then saved and reopened with their kernel shut down: the
    dashboards (the background run's too) and the labeller, used by hand, were replaced by
    how they ended, and read so."""
    notebook = _cleared(path)
    for data in path.parent.glob(f"{path.stem}_*.csv"):  # its data, named after it
        shutil.copy(data, lab_server.root / data.name)
    started = time.monotonic()
    with _opened(browser, lab_server, notebook, path.name) as page:
        _run_all(page, sum(cell.cell_type == "code" for cell in notebook.cells))
        CHECKS.get(path.stem, lambda page, shots: None)(page, shots)
        _assert_no_errors(page)  # nothing failed while the widgets rendered either
        if path.stem in REOPENED:
            _save(page, lab_server, path.name)
    print(f"{path.name}: Run All in {time.monotonic() - started:.1f} s")
    if path.stem not in REOPENED:
        return
    saved = nbformat.read(lab_server.root / path.name, as_version=4)
    views = [
        o for c in saved.cells for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})
    ]
    assert not views, [o["data"].get("text/plain") for o in views]
    with _reopened(browser, lab_server, path.name) as page:
        if path.stem == "01_quickstart":
            _dashboards_drawn(page, 2, shots / "quickstart-reopened.png")
        _everything_drawn(page, saved, shots / f"{path.stem}-reopened.png")
        if path.stem == "11_backtest":  # the labels given by hand, still listed
            expect(page.locator(f"{PANEL} .gr-labels")).to_contain_text("should act")


ENDED = ("completed", "ended", "budget_exhausted", "cancelled", "failed", "stuck", "incomplete")
# What a committed notebook's outputs hold, by class: each must be drawn on the page.
VIEWS = ("gr-dashboard", "gr-experiment", "gr-labeller", "gr-labels")
ERROR_DISPLAYING = ("Error displaying widget", *NO_WIDGET)


def _views_in(notebook: nbformat.NotebookNode) -> dict[str, int]:
    """How many outputs of each kind of view the saved ``notebook`` holds."""
    found = dict.fromkeys(VIEWS, 0)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            for view in VIEWS:
                found[view] += html.count(f"class='{view}'")
    return found


def _everything_drawn(page: Page, notebook: nbformat.NotebookNode, shot: Path) -> None:
    """Every view ``notebook`` holds is on the page, as its run, experiment or labelling
    ended, and nothing reads as a widget the page cannot draw; a screenshot of each."""
    expected = _views_in(notebook)
    for view, count in expected.items():
        expect(page.locator(f"{PANEL} .{view}")).to_have_count(count, timeout=WIDGET_TIMEOUT_MS)
    for board in page.locator(DASHBOARD).all():
        expect(board.locator(".gr-state").first).to_have_text(re.compile("|".join(ENDED)))
        expect(board.locator(".gr-timeline").first).to_be_visible()
        _meters_within_100(board)
    for table in page.locator(f"{PANEL} .gr-experiment").all():
        expect(table).to_contain_text(re.compile(r"(\d+) of \1 runs finished"))
    for labeller in page.locator(f"{PANEL} .gr-labeller").all():
        expect(labeller).to_contain_text("Labelling finished")
    text = "\n".join(page.locator(f"{PANEL} .jp-OutputArea").all_inner_texts())
    assert not [bad for bad in ERROR_DISPLAYING if bad in text], text[:2000]
    views = page.locator(", ".join(f"{PANEL} .{view}" for view in VIEWS if view != "gr-labels"))
    for number, view in enumerate(views.all(), 1):
        view.scroll_into_view_if_needed()
        view.screenshot(path=str(shot.with_name(f"{shot.stem}-{number}.png")))


# Close every tab without saving (choosing no kernel writes it in a notebook's metadata).
CLOSE_UNSAVED_JS = """
() => {
    for (const widget of [...window.jupyterapp.shell.widgets('main')]) {
        if (widget.context) widget.context.model.dirty = false;
        widget.close();
    }
}
"""


def test_every_committed_notebook_reads_with_no_kernel(
    lab_server: LabServer, browser: Browser, shots: Path
) -> None:
    """A reader who opens a notebook as committed, choosing no kernel, sees every dashboard,
    the experiment's progress table and the finished labeller as they ended. The notebooks
    open one after another in one JupyterLab page (loading the page is most of the time)."""
    _end_sessions(lab_server)
    started = time.monotonic()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page.goto(f"{lab_server.url}/lab?reset&token={lab_server.token}")
        page.wait_for_function("() => window.jupyterapp !== undefined")
        page.evaluate("async () => { await window.jupyterapp.restored; }")
        for path in NOTEBOOKS:
            notebook = nbformat.read(path, as_version=4)
            # No kernel named, so JupyterLab asks which to start: the reader picks none.
            notebook.metadata.pop("kernelspec", None)
            notebook.metadata.pop("language_info", None)
            name = f"committed-{path.name}"
            nbformat.write(notebook, lab_server.root / name)
            page.evaluate(
                "name => { window.jupyterapp.commands.execute('docmanager:open', {path: name}); }",
                name,
            )
            dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
            dialog.locator("button", has_text="No Kernel").click()
            expect(dialog).to_have_count(0)
            expect(page.locator(f"{PANEL} .jp-Notebook .jp-Cell").first).to_be_visible()
            _everything_drawn(page, notebook, shots / f"committed-{path.stem}.png")
            assert lab_server.api("GET", "/api/sessions") == [], "a kernel was started"
            page.evaluate(CLOSE_UNSAVED_JS)
            expect(page.locator(PANEL)).to_have_count(0)
    finally:
        page.close()
    print(f"{len(NOTEBOOKS)} committed notebooks read in {time.monotonic() - started:.1f} s")


def _job(parts: int) -> str:
    return "# Job\n\n" + "".join(
        f"## Part {p}\n" + "".join(f"- Write {p}.{s}\n" for s in range(1, 6)) + "\n"
        for p in range(1, parts + 1)
    )


RESUME_JOB, LONG_JOB = _job(8), _job(30)


def _turns(dashboard: Locator) -> int:
    text = dashboard.locator(".gr-meters").first.inner_text()
    found = re.search(r"Iterations[^:\n]*:\s*([\d,]+)", text)
    assert found, f"no iterations meter: {text}"
    return int(found.group(1).replace(",", ""))


def _advances(dashboard: Locator, since: int, *, by: int = 3, within_s: float = 20) -> int:
    """Wait, touching no cell, until the run is ``by`` turns past ``since``. The meter
    counts a phase's turns when the phase has an assessed budget, so it starts again at
    each phase: then the run is ``by`` turns past the lowest count read."""
    deadline = time.monotonic() + within_s
    low = since
    while (turns := _turns(dashboard)) < low + by:
        low = min(low, turns)
        assert time.monotonic() < deadline, f"the run stayed at turn {turns} (from {since})"
        time.sleep(0.2)
    return turns


def test_dashboard_pause_resume_and_rewind_while_paused(
    lab_server: LabServer, browser: Browser, shots: Path
) -> None:
    """The dashboard's buttons act at once, with no cell executed to wake the kernel."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext gr_notebook\nimport gr_notebook as gr\n"  # a store: a fork needs one
            "slow = gr.Agent(gr.SimulatedModel(latency=0.1), max_iterations=1000)"
        ),
        # long enough not to end before Stop: an ended run's dashboard has no controls
        nbformat.v4.new_code_cell(f"%%agent --background --agent slow --out bg\n{LONG_JOB}"),
    ]
    with _opened(browser, lab_server, notebook, "resume.ipynb") as page:
        _run_all(page, 2)
        dashboard = page.locator(f"{PANEL} .gr-dashboard").first
        expect(dashboard).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
        state = dashboard.locator(".gr-state").first
        pause = dashboard.locator(".gr-controls button", has_text="Pause")
        unpause = dashboard.locator(".gr-controls button", has_text="Unpause")
        _advances(dashboard, 0)

        pause.click()
        expect(state).to_have_text("paused")
        held = _turns(dashboard)
        time.sleep(1.0)
        assert _turns(dashboard) == held, "a paused run went on"
        unpause.click()
        expect(state).to_have_text("running")
        _advances(dashboard, held)

        pause.click()
        expect(state).to_have_text("paused")
        dashboard.locator(".gr-controls input").fill("The parts are out of order")
        dashboard.locator(".gr-controls button", has_text="Rewind").click()
        unpause.click()
        expect(dashboard.locator(".gr-timeline").first).to_contain_text(
            "The parts are out of order", timeout=WIDGET_TIMEOUT_MS
        )
        _advances(dashboard, _turns(dashboard))  # the meter may now count the new phase's turns
        dashboard.screenshot(path=str(shots / "resume-dashboard.png"))

        # Fork… then Fork (the newest turn, the same agent): the fork's own dashboard shows
        # under this one, live; stopped, it is the run as it ended, with no controls.
        dashboard.locator(".gr-controls button", has_text="Fork…").click()
        fork = re.compile(r"^\s*Fork\s*$")  # not Fork…, which the row took the place of
        dashboard.locator(".gr-controls button", has_text=fork).click()
        boards = page.locator(DASHBOARD)
        expect(boards).to_have_count(2, timeout=WIDGET_TIMEOUT_MS)
        forked = boards.nth(1)
        expect(forked.locator(".gr-state").first).to_have_text("running")
        expect(dashboard.locator(".gr-log")).to_contain_text("Forked at turn")
        forked.screenshot(path=str(shots / "fork-dashboard.png"))
        forked.locator(".gr-controls button", has_text="Stop").click()
        expect(forked.locator(".gr-state").first).to_have_text(
            "cancelled", timeout=WIDGET_TIMEOUT_MS
        )
        expect(forked.locator(".gr-controls")).to_have_count(0)

        dashboard.locator(".gr-controls button", has_text="Stop").click()
        expect(state).to_have_text("cancelled", timeout=WIDGET_TIMEOUT_MS)


APPROVAL_SETUP = """%load_ext gr_notebook
import gr_notebook as gr
asked = []

def first_three(tool, params):
    if tool != "write_file":
        return False
    asked.append(params.get("path"))
    return len(asked) <= 3

careful = gr.Agent(
    gr.SimulatedModel(latency=0.05),
    store=False,
    max_iterations=400,
    policies=[gr.ApprovalPolicy(tools=[], when=first_three)],
)"""


def _waiting_prompt(dashboard: Locator, index: int) -> Locator:
    prompt = dashboard.locator(".gr-approval").nth(index)
    expect(prompt).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
    expect(prompt.locator("button", has_text="Approve")).to_be_enabled()
    return prompt


def test_dashboard_approve_deny_and_edit_a_tool_call(
    lab_server: LabServer, browser: Browser, shots: Path
) -> None:
    """A background run waits on each call the policy asks about; the dashboard's Approve,
    Deny (with its reason) and Edit answer it, and a refused edit is asked again."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(APPROVAL_SETUP),
        nbformat.v4.new_code_cell(f"%%agent --background --agent careful --out bg\n{RESUME_JOB}"),
    ]
    with _opened(browser, lab_server, notebook, "approval.ipynb") as page:
        _run_all(page, 2)
        dashboard = page.locator(f"{PANEL} .gr-dashboard").first
        expect(dashboard).to_be_visible(timeout=WIDGET_TIMEOUT_MS)
        state = dashboard.locator(".gr-state").first

        first = _waiting_prompt(dashboard, 0)
        expect(first).to_contain_text("Approve write_file?")
        first.scroll_into_view_if_needed()
        dashboard.screenshot(path=str(shots / "approval-dashboard.png"))
        first.locator("button", has_text="Approve").click()
        expect(first).to_contain_text("Approved")

        second = _waiting_prompt(dashboard, 1)
        second.locator("input").fill("Write the plan again, shorter")
        second.locator("button", has_text="Deny").click()
        expect(second).to_contain_text("Denied: Write the plan again, shorter")

        third = _waiting_prompt(dashboard, 2)
        third.locator("button", has_text="Edit…").click()
        third.locator("textarea").fill('{"path": 1}')
        third.locator("button", has_text="Run edited").click()
        again = _waiting_prompt(dashboard, 3)
        expect(again).to_contain_text("Your edit was refused")
        again.locator("button", has_text="Approve").click()

        expect(again).to_contain_text("Approved")
        deadline = time.monotonic() + RUN_ALL_TIMEOUT_MS / 1000
        while state.inner_text() != "completed":  # nothing else is asked, to the end
            assert dashboard.locator(".gr-approval").count() <= 4
            assert time.monotonic() < deadline, "the run did not complete"
            time.sleep(0.2)
        # The run has ended: its dashboard is the run as it ended, with no controls left.
        expect(dashboard.locator(".gr-approval, .gr-controls")).to_have_count(0)
        expect(dashboard.locator(".gr-timeline").first).to_contain_text("Run completed")
        _assert_no_errors(page)
