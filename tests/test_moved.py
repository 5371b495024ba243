"""Module paths from before the packages' layout still import, and say where they went."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import gr_notebook as gr
from gr_notebook._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_moved_module_with_a_warning(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__name__ == MOVED[old]  # the real module's identity is untouched
    sys.modules.pop(old, None)


def test_a_name_from_an_old_path_is_the_same_object() -> None:
    sys.modules.pop("gr_notebook.plan", None)
    with pytest.warns(DeprecationWarning):
        from gr_notebook.plan import Plan  # type: ignore[import-not-found]
    assert Plan is gr.Plan
    sys.modules.pop("gr_notebook.plan", None)


def test_every_new_path_exists() -> None:
    for new in MOVED.values():
        importlib.import_module(new)


def test_submodules_reached_as_attributes_of_the_package_still_work() -> None:
    """In a fresh interpreter: ``gr.examples`` as before, and ``gr.plan``, ``gr.lint``, …
    (moved) with the warning that says where they went."""
    code = """
import warnings
import gr_notebook as gr
assert callable(gr.examples.audit_job)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert gr.lint.RULES and gr.plan.Plan is gr.Plan and gr.store.Store is gr.Store
assert [str(w.message).split(" moved")[0] for w in caught] == [
    "gr_notebook.lint", "gr_notebook.plan", "gr_notebook.store"
], [str(w.message) for w in caught]
assert all(w.category is DeprecationWarning for w in caught)
try:
    gr.no_such_thing
except AttributeError:
    pass
else:
    raise AssertionError("an unknown attribute must still raise")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
