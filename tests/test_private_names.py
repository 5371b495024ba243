"""No module reaches into another's private names: a name with a leading underscore is free
to change with its own module, so another module may neither import it nor call it on an
object other than ``self`` or ``cls``. Read from the source with ``ast``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gr_notebook"

#: Underscored names that are someone else's public protocol, not a module's private ones.
ALLOWED = frozenset({"_replace", "_asdict", "_fields", "_make"})  # namedtuple's


def private(name: str) -> bool:
    if not name.startswith("_") or name in ALLOWED:
        return False
    dunder = name.startswith("__") and name.endswith("__")
    ipython_repr = name.startswith("_repr_") and name.endswith("_")
    return not (dunder or ipython_repr)


def from_package(node: ast.ImportFrom) -> bool:
    return node.level > 0 or (node.module or "").split(".")[0] == "gr_notebook"


def own(target: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own (or inherited) members."""
    if isinstance(target, ast.Name):
        return target.id in ("self", "cls")
    return (
        isinstance(target, ast.Call)
        and isinstance(target.func, ast.Name)
        and target.func.id == "super"
    )


def reaches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each import of a private name from the package, and each call of a private method on
    an object that is not the caller's own."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and from_package(node):
            for alias in node.names:
                if private(alias.name):
                    yield node.lineno, f"imports {alias.name} from {node.module or '.'}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and private(node.func.attr)
            and not own(node.func.value)
        ):
            yield node.lineno, f"calls {ast.unparse(node.func)}(...)"


def test_no_module_uses_another_modules_private_names() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, what in reaches(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "give these a public name:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from gr_notebook.testing.messages_server import _json_reply",
        "from .messages_server import _json_reply",
        "def f(run):\n    return run._outside_loop('pause')",
        "class W:\n    def f(self):\n        return self.run._outside_loop('pause')",
    ],
)
def test_the_check_finds_a_reach_into_private_names(source: str) -> None:
    assert list(reaches(ast.parse(source)))


@pytest.mark.parametrize(
    "source",
    [
        "from gr_notebook.display import reprs as _display_reprs",
        "from json import _default_decoder",  # another package's business
        "class A:\n    def f(self):\n        return self._helper()",
        "class A:\n    @classmethod\n    def f(cls):\n        return cls._make_one()",
        "class B(A):\n    def f(self):\n        return super()._helper()",
        "def f(point):\n    return point._replace(x=1)._asdict()",
        "def f(thing):\n    return thing._repr_html_(), thing.__enter__()",
    ],
)
def test_the_check_allows_own_members_and_other_protocols(source: str) -> None:
    assert not list(reaches(ast.parse(source)))
