"""The shape of the package: module sizes, import cycles and the longest chain of imports.

    python bench/import_graph.py [CHECKOUT]    (default: this repository)

Reads the source of ``CHECKOUT/gr_notebook`` with ``ast`` and imports none of it, so it
reports on any commit (``git worktree add /tmp/old <commit>``). The graph is the one
``tests/test_import_graph.py`` checks, built by ``tests/import_graph.py``, loaded here by
path: every import counts, lazy and ``TYPE_CHECKING`` ones included. Not a ``bench_*``
script: ``make bench`` does not run it, and it has no goals.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
PACKAGE = "gr_notebook"


def _builder() -> ModuleType:
    path = HERE.parent / "tests" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def _short(module: str) -> str:
    return module.removeprefix(f"{PACKAGE}.")


def report(checkout: Path) -> None:
    ig = _builder()
    graph = ig.build(checkout, PACKAGE)
    sizes = sorted(((graph.lines(m), m) for m in graph.files), key=lambda s: (-s[0], s[1]))
    print(f"Import graph of {checkout / PACKAGE}")
    print(f"\nModule sizes (lines), largest first: {len(sizes)} modules")
    for lines, module in sizes:
        print(f"  {lines:>6,}  {module}")
    print(f"  {sum(n for n, _ in sizes):>6,}  total")

    root = sorted(p.stem for p in (checkout / PACKAGE).glob("*.py") if p.stem != "__init__")
    print(f"\nModules at the package root (besides __init__): {len(root)}")
    print("  " + ", ".join(root))

    edges = sum(len(t) for t in graph.edges.values())
    print(f"\nImports between modules (edges): {edges}")
    cycles = [c for c in ig.strongly_connected(graph.edges) if len(c) > 1]
    print(f"Strongly connected components with more than one module (cycles): {len(cycles)}")
    for component in sorted(cycles, key=len, reverse=True):
        print(f"  {len(component)} modules: {', '.join(map(_short, component))}")
        print(f"    e.g. {' -> '.join(map(_short, ig.cycle_path(graph.edges, component)))}")

    path = ig.longest_path(graph.edges)
    print(f"\nLongest import path: {sum(map(len, path))} modules in {len(path)} steps")
    print("(an importer before what it imports; a cycle counts as one step of all its modules)")
    for step in path:
        names = ", ".join(map(_short, step))
        print(f"  {names if len(step) == 1 else f'[cycle of {len(step)}: {names}]'}")


if __name__ == "__main__":
    report(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE.parent)
