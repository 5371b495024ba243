"""The public API: a complete, sorted ``__all__`` and a core free of heavy imports."""

from __future__ import annotations

import subprocess
import sys
import types

import gr_notebook as gr


def test_all_is_sorted_and_every_name_exists() -> None:
    assert list(gr.__all__) == sorted(gr.__all__)
    for name in gr.__all__:
        assert hasattr(gr, name), name


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(gr).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations", "load_ipython_extension", "unload_ipython_extension")
    }
    # Dashboard loads ipywidgets on use, AnthropicModel and OpenAIModel their SDKs
    assert public | {"Dashboard", "AnthropicModel", "OpenAIModel"} == set(gr.__all__)


def test_contract_names_from_the_issue_are_public() -> None:
    for name in (
        "Workspace",
        "WorkspaceError",
        "Agent",
        "Run",
        "Plan",
        "ScriptedModel",
        "ScriptExhausted",
        "SimulatedModel",
        "tool_call",
        "tool_calls",
        "text",
        "runs_df",
    ):
        assert name in gr.__all__


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = (
        "import sys, gr_notebook\n"
        "heavy = [m for m in ('IPython', 'ipywidgets', 'pandas', 'anthropic', 'openai',"
        # nor a patch of asyncio: a blocking wait runs on a loop of its own (decision 285)
        " 'nest_asyncio', 'nest_asyncio2')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_errors_share_one_base() -> None:
    for name in gr.__all__:
        value = getattr(gr, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, gr.GrNotebookError), name
