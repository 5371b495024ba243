"""Run a top-level ``%%agent`` cell as top-level ``await``.

A blocking cell magic holds the kernel's loop: the runs in the background wait until the
cell ends. Rewritten into
``await <magics>.run_async(line, body)``, the cell awaits the run and the kernel serves the
dashboard's controls meanwhile.

Only a top-level cell is rewritten. A ``%%agent`` nested in ``%%time``, ``%%capture`` or
``run_cell`` is transformed while another cell runs, where ``await`` is not allowed, so it
keeps the plain cell magic. The nesting depth comes from the shell's
``pre_execute``/``post_execute`` events, which fire after a top-level cell is transformed.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, ClassVar

__all__ = ["TopLevelAwait"]

_AGENT_CELL = re.compile(r"%%agent(?:[ \t]|\r?\n|$)")
_CALL = "get_ipython().find_cell_magic('agent').__self__.run_async"


class TopLevelAwait:
    """An input transformer, installed once per shell by ``%load_ext gr_notebook``."""

    _installed: ClassVar[weakref.WeakKeyDictionary[Any, TopLevelAwait]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.depth = 0

    @classmethod
    def install(cls, shell: Any) -> TopLevelAwait:
        cls.uninstall(shell)
        self = cls._installed[shell] = cls(shell)
        shell.input_transformers_cleanup.append(self)
        shell.events.register("pre_execute", self._enter)
        shell.events.register("post_execute", self._leave)
        return self

    @classmethod
    def uninstall(cls, shell: Any) -> None:
        self = cls._installed.pop(shell, None)
        if self is None:
            return
        if self in shell.input_transformers_cleanup:
            shell.input_transformers_cleanup.remove(self)
        shell.events.unregister("pre_execute", self._enter)
        shell.events.unregister("post_execute", self._leave)

    def _enter(self) -> None:
        self.depth += 1

    def _leave(self) -> None:
        self.depth = max(0, self.depth - 1)

    def __call__(self, lines: list[str]) -> list[str]:
        if not lines or not _AGENT_CELL.match(lines[0]):
            return lines
        if self.depth or not getattr(self.shell, "autoawait", False):
            return lines
        line = lines[0][len("%%agent") :].strip()
        cell = "".join(lines[1:])
        # var_expand: the line gets the $name / {expr} expansion any magic line gets.
        return [f"await {_CALL}(get_ipython().var_expand({line!r}), {cell!r})\n"]
