"""The display layer works where IPython, ipywidgets and traitlets cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import importlib
import importlib.abc
import pkgutil
import sys

BLOCKED = ("IPython", "ipywidgets", "traitlets")


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the display layer must not need it")
        return None


sys.meta_path.insert(0, Blocker())

import gr_notebook as gr
import gr_notebook.display

prefix = "gr_notebook.display."
modules = [m.name for m in pkgutil.iter_modules(gr_notebook.display.__path__, prefix)]
for name in modules:
    importlib.import_module(name)

from gr_notebook.display.render import render_dashboard, render_plan, render_todos, text_dashboard
from gr_notebook.display.reprs import run_card
from gr_notebook.display.state import RunTracker

run = gr.Agent(model="simulated", workspace="ws", store=False, max_iterations=400).run_sync(
    "## One\n- a\n"
)
tracker = RunTracker()
for event in run.events:
    tracker.add(event)
state = tracker.snapshot(run)
html = {
    "card": run._repr_html_(),
    "plan": run.plan._repr_html_(),
    "todos": run.todos._repr_html_(),
    "dashboard": render_dashboard(state),
}
assert html["card"] == run_card(run) and ">completed</span>" in html["card"], html["card"]
assert html["plan"] == render_plan(run.plan) and "gr-phase-complete" in html["plan"]
assert html["todos"] == render_todos(run.todos) and "gr-todos" in html["todos"]
assert "gr-meter" in html["dashboard"] and "job complete" in text_dashboard(state).lower()
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
assert not loaded, loaded
print(" ".join(sorted(modules)))
"""


def test_display_imports_and_renders_with_the_notebook_packages_blocked(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.split())
    assert {"gr_notebook.display.render", "gr_notebook.display.state"} <= imported
    assert {"gr_notebook.display.timeline", "gr_notebook.display.throttle"} <= imported
