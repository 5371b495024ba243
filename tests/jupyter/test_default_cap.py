"""Plain ``%%agent`` on the quickstart's own job finishes under the default cap (decision 295)."""

from __future__ import annotations

import re

from IPython.core.interactiveshell import InteractiveShell

from gr_notebook.examples import QUICKSTART
from gr_notebook.guardrails.budget import DEFAULT_MAX_ITERATIONS
from gr_notebook.jupyter.magics import status_line
from tests.jupyter.test_magics import run_cell


def test_plain_agent_cell_finishes_the_quickstart_job(ip: InteractiveShell) -> None:
    result, captured = run_cell(ip, f"%%agent\n{QUICKSTART}")
    assert result.success, captured.stderr
    run = ip.user_ns["run"]
    assert run.status == "completed" and run.job is not None, run.reason
    assert run.plan is not None and all(p.status == "complete" for p in run.plan.phases)
    line = status_line(run)
    assert f"/{DEFAULT_MAX_ITERATIONS};" in line
    for used, allotted in re.findall(r"\((\d+)/(\d+) assessed", line):
        assert int(used) <= int(allotted)


def test_the_help_names_the_default_cap(ip: InteractiveShell) -> None:
    doc = ip.find_cell_magic("agent").__doc__
    assert doc is not None and f"(default: {DEFAULT_MAX_ITERATIONS})" in doc
