"""The optional extras each host needs, imported only when a bridge is built."""

from __future__ import annotations

import importlib
from types import ModuleType

from gr_notebook.errors import ConfigError

__all__ = ["load_extra"]


def load_extra(module: str, *, needs: tuple[str, ...] = (), what: str, extra: str) -> ModuleType:
    """``module`` (and the ``needs`` it must have), or a one-line error saying that
    ``what`` is an optional extra, and the install line ``extra``."""
    try:
        loaded = importlib.import_module(module)
        for name in needs:
            importlib.import_module(name)
    except ImportError:
        raise ConfigError(f"{what} is not installed; it is an optional extra: {extra}") from None
    return loaded
