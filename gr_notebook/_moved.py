"""Module paths from before issue 15's layout, kept importable with a DeprecationWarning.

Only the names in ``gr.__all__`` are the public API, but notebooks written against the old
layout imported modules by path; a finder on ``sys.meta_path`` maps each old path to its
new module, so those imports keep working and say where the module went.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Final

__all__ = ["MOVED", "attribute", "install"]

MOVED: Final = {
    "gr_notebook.analysis": "gr_notebook.history.analysis",
    "gr_notebook.context": "gr_notebook.engine.context",
    "gr_notebook.guardrails.adaptive": "gr_notebook.history.adaptive",
    "gr_notebook.journal": "gr_notebook.workflow.journal",
    "gr_notebook.jupyter.render": "gr_notebook.display.render",
    "gr_notebook.jupyter.state": "gr_notebook.display.state",
    "gr_notebook.jupyter.throttle": "gr_notebook.display.throttle",
    "gr_notebook.jupyter.timeline": "gr_notebook.display.timeline",
    "gr_notebook.lint": "gr_notebook.history.lint",
    "gr_notebook.loop": "gr_notebook.engine.loop",
    "gr_notebook.models.auditing": "gr_notebook.models.simulated.auditing",
    "gr_notebook.models.habits": "gr_notebook.models.simulated.habits",
    "gr_notebook.models.literal": "gr_notebook.models.simulated.literal",
    "gr_notebook.models.planner": "gr_notebook.models.simulated.planner",
    "gr_notebook.models.profiles": "gr_notebook.models.simulated.profiles",
    "gr_notebook.models.situation": "gr_notebook.models.simulated.situation",
    "gr_notebook.models.struggles": "gr_notebook.models.simulated.struggles",
    "gr_notebook.phases": "gr_notebook.workflow.phases",
    "gr_notebook.plan": "gr_notebook.workflow.plan",
    "gr_notebook.prompts": "gr_notebook.workflow.prompts",
    "gr_notebook.replay": "gr_notebook.history.replay",
    "gr_notebook.store": "gr_notebook.history.store",
    "gr_notebook.stuck": "gr_notebook.workflow.stuck",
    "gr_notebook.summary": "gr_notebook.workflow.summary",
    "gr_notebook.todos": "gr_notebook.workflow.todos",
    "gr_notebook.workspace": "gr_notebook.workflow.workspace",
    "gr_notebook.workspace_lock": "gr_notebook.workflow.workspace_lock",
}
"""Old dotted path -> new dotted path."""


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        """The import system returns whatever ``sys.modules`` holds under the name once
        this returns: the moved module, with its own spec untouched."""
        sys.modules[module.__name__] = importlib.import_module(self.target)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


_FINDER: Final = _MovedFinder()


def install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def attribute(name: str, target: str) -> ModuleType:
    """``gr.<name>`` for a submodule that moved: the module, with the same warning."""
    warnings.warn(
        f"gr_notebook.{name} moved to {target}; import it from there",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(target)
