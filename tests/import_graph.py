"""The import graph of ``gr_notebook``, built from the source with ``ast``.

Shared by ``tests/test_import_graph.py`` and ``bench/import_graph.py`` (which loads this file
by path, so a report works on any checkout). It reads files and never imports the package.

How an import statement becomes an edge (decision 161):
- Every ``import`` statement counts: at module level, inside functions, and under
  ``if TYPE_CHECKING:``. A lazy import is still a dependency, only a later one.
- ``import a.b.c`` is an edge to ``a.b.c``, the module named; the parent packages that Python
  initialises on the way are not edges, or every module would depend on the facade.
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
  (a package ``__init__`` or a plain module): importing a name a package ``__init__``
  re-exports depends on everything that ``__init__`` imports.
- Only modules of the package are nodes; the standard library and third parties are not,
  but each module's third-party imports are kept (``externals``, top-level names).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ImportGraph",
    "build",
    "cycle_path",
    "longest_path",
    "strongly_connected",
]

Graph = Mapping[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class ImportGraph:
    """Modules by dotted name, with their files and the modules each one imports."""

    package: str
    files: Mapping[str, Path]
    edges: Graph
    externals: Graph
    """Top-level names of what each module imports from outside the package."""

    def lines(self, module: str) -> int:
        return len(self.files[module].read_text(encoding="utf-8").splitlines())


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement reads from."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()  # a module's relative imports start from its package
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _targets(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> Iterable[str]:
    """Every module an import statement names, dotted; the package's own resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, is_package, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield sub if sub in known else base


def build(source_root: Path, package: str = "gr_notebook") -> ImportGraph:
    """The graph of ``source_root/package``: one node per ``.py`` file."""
    paths = sorted((source_root / package).rglob("*.py"))
    files = {_module_name(p, source_root): p for p in paths}
    known = set(files)
    edges: dict[str, frozenset[str]] = {}
    externals: dict[str, frozenset[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set(_targets(name, path.name == "__init__.py", tree, known))
        edges[name] = frozenset(t for t in targets if t in known and t != name)
        externals[name] = frozenset(
            t.split(".")[0] for t in targets if t.split(".")[0] not in (package, "")
        )
    return ImportGraph(package, files, edges, externals)


def strongly_connected(edges: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted, in reverse topological order
    (a component comes before every component that imports it)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def cycle_path(edges: Graph, component: Iterable[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a path that ends where it
    starts: ``[a, b, c, a]`` reads "a imports b imports c imports a"."""
    members = set(component)
    start = min(members)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & members):
                if w == start:
                    chain = [v]
                    while chain[-1] != start:
                        chain.append(parent[chain[-1]])
                    return [*reversed(chain), start]
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    raise ValueError(f"{sorted(members)} is not a cycle")


def longest_path(edges: Graph) -> list[list[str]]:
    """A longest chain of imports, ``[importer, imported, ...]``, counted in modules.

    Each step is a strongly connected component (one module when the graph has no cycle),
    so the path is well defined on any graph: the condensation is acyclic.
    """
    components = strongly_connected(edges)
    owner = {m: i for i, c in enumerate(components) for m in c}
    best: list[int] = []  # best[i]: modules on the longest chain starting at component i
    after: list[int | None] = []
    for i, component in enumerate(components):  # every dependency is already scored
        below = {owner[w] for m in component for w in edges[m]} - {i}
        nxt = max(sorted(below), key=lambda j: best[j], default=None)
        best.append(len(component) + (best[nxt] if nxt is not None else 0))
        after.append(nxt)
    if not components:
        return []
    step: int | None = max(range(len(components)), key=lambda i: best[i])
    path = []
    while step is not None:
        path.append(components[step])
        step = after[step]
    return path
