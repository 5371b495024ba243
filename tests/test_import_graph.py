"""The package's import graph, read from the source: no cycles, and the layers' few rules.

Every import counts, lazy ones and those under ``TYPE_CHECKING`` included; how a statement
becomes an edge is in :mod:`tests.import_graph` (decision 161).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests import import_graph
from tests.import_graph import ImportGraph

ROOT = Path(__file__).resolve().parent.parent
FACADE = "gr_notebook"
NOTEBOOK_ONLY = frozenset({"IPython", "ipywidgets", "traitlets"})


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return import_graph.build(ROOT)


def short(module: str) -> str:
    return module.removeprefix("gr_notebook.")


def test_the_package_has_no_import_cycle(graph: ImportGraph) -> None:
    cycles = [c for c in import_graph.strongly_connected(graph.edges) if len(c) > 1]
    report = [
        f"{', '.join(map(short, c))}\n  e.g. "
        + " -> ".join(map(short, import_graph.cycle_path(graph.edges, c)))
        for c in cycles
    ]
    assert not report, "import cycles:\n" + "\n".join(report)


def test_no_module_inside_the_package_imports_the_facade(graph: ImportGraph) -> None:
    """``gr_notebook/__init__.py`` imports every layer, so a module that imports it (rather
    than the module that defines the name) would close a cycle through all of them."""
    importers = sorted(m for m, targets in graph.edges.items() if FACADE in targets)
    assert importers == []


def test_only_the_jupyter_package_and_the_facade_import_the_jupyter_package(
    graph: ImportGraph,
) -> None:
    def is_jupyter(module: str) -> bool:
        return module == "gr_notebook.jupyter" or module.startswith("gr_notebook.jupyter.")

    outside = {
        short(m): sorted(map(short, filter(is_jupyter, targets)))
        for m, targets in graph.edges.items()
        if m != FACADE and not is_jupyter(m) and any(map(is_jupyter, targets))
    }
    assert outside == {}
    assert graph.edges[FACADE] & {"gr_notebook.jupyter.magics", "gr_notebook.jupyter.widgets"}


def test_nothing_the_display_layer_imports_needs_a_notebook(graph: ImportGraph) -> None:
    """Every module the display layer reaches, lazily or not, imports neither IPython,
    ipywidgets nor traitlets (``tests/display/test_pure.py`` checks the same at run time)."""
    display = {m for m in graph.edges if m.startswith("gr_notebook.display")}
    assert {"gr_notebook.display.render", "gr_notebook.display.state"} <= display
    reached, frontier = set(display), list(display)
    while frontier:
        for target in graph.edges[frontier.pop()] - reached:
            reached.add(target)
            frontier.append(target)
    assert not any(short(m).startswith("jupyter") for m in reached)
    offenders = {short(m): sorted(graph.externals[m] & NOTEBOOK_ONLY) for m in reached}
    assert {m: names for m, names in offenders.items() if names} == {}


# -- the graph builder itself ---------------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def toy(tmp_path: Path) -> ImportGraph:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.low import value\n",
            "pkg/low.py": """
                import os
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.sub.high import High
                value = 1
            """,
            "pkg/sub/__init__.py": "",
            "pkg/sub/high.py": """
                import IPython.display
                from pkg import low
                from pkg.sub import names
                def later():
                    from .. import other
                class High: ...
            """,
            "pkg/sub/names.py": "from . import high\nfrom pkg.sub import helper\n",
            "pkg/other.py": "import pkg.low as low\n",
        },
    )
    return import_graph.build(tmp_path, "pkg")


def test_every_import_is_an_edge_to_the_module_it_names(toy: ImportGraph) -> None:
    assert dict(toy.edges) == {
        "pkg": {"pkg.low"},
        "pkg.low": {"pkg.sub.high"},  # under TYPE_CHECKING
        "pkg.sub": set(),
        "pkg.sub.high": {"pkg.low", "pkg.sub.names", "pkg.other"},  # a lazy, relative one too
        "pkg.sub.names": {"pkg.sub.high", "pkg.sub"},  # no module pkg.sub.helper: the package
        "pkg.other": {"pkg.low"},
    }
    assert toy.externals["pkg.sub.high"] == {"IPython"}
    assert toy.externals["pkg.low"] == {"os", "typing"}


def test_cycles_are_found_and_read_as_a_path(toy: ImportGraph) -> None:
    cycles = [c for c in import_graph.strongly_connected(toy.edges) if len(c) > 1]
    assert cycles == [["pkg.low", "pkg.other", "pkg.sub.high", "pkg.sub.names"]]
    assert import_graph.cycle_path(toy.edges, cycles[0]) == ["pkg.low", "pkg.sub.high", "pkg.low"]


def test_the_longest_path_runs_through_the_condensed_cycles(toy: ImportGraph) -> None:
    path = import_graph.longest_path(toy.edges)
    assert path == [["pkg"], ["pkg.low", "pkg.other", "pkg.sub.high", "pkg.sub.names"], ["pkg.sub"]]
    acyclic = {"a": frozenset({"b", "c"}), "b": frozenset({"c"}), "c": frozenset()}
    assert import_graph.longest_path(acyclic) == [["a"], ["b"], ["c"]]


# The layers of docs/architecture.md, bottom first; a module belongs to the longest prefix
# that names it. Within a layer, imports may go either way (the cycle test keeps them sane).
LAYERS: tuple[tuple[str, ...], ...] = (
    # shared values, the events, and the store that keeps them (it knows only events)
    (
        "errors",
        "clock",
        "messages",
        "guidance",
        "harness",
        "limits",
        "validation",
        "wording",
        "blocking",
        "eventdata",
        "reprs",
        "events",
        "digests",
    ),
    ("workflow",),
    # the parts the engine drives, and history: the store and what reads it
    ("guardrails", "tools", "models", "testing", "history"),
    ("engine",),
    ("agent", "runner", "run", "examples", "demo"),
    # what takes whole runs: review/ resumes, forks, compares, replays and lints them, share/
    # exports them (and the command line, which runs the demo and exports)
    ("review", "display", "integrations", "experiments", "share", "__main__"),
    ("jupyter",),
)


def layer_of(module: str) -> int:
    if module == FACADE:
        return len(LAYERS)
    name = short(module)
    best = (-1, -1)  # (prefix length, layer)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), index)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS (and to the architecture)"
    return best[1]


def test_every_import_points_down_the_layers(graph: ImportGraph) -> None:
    upward = [
        f"{short(a)} -> {short(b)}"
        for a, targets in graph.edges.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    ]
    assert not upward, "imports against the layers (docs/architecture.md):\n" + "\n".join(
        sorted(upward)
    )


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("gr_notebook.workflow.plan") < layer_of("gr_notebook.engine.loop")
    assert layer_of("gr_notebook.history.store") < layer_of("gr_notebook.engine.loop")
    assert layer_of("gr_notebook.history.store") == layer_of("gr_notebook.history.analysis")
    assert layer_of("gr_notebook.review.lint") > layer_of("gr_notebook.run")
    assert layer_of("gr_notebook.history.analysis") < layer_of("gr_notebook.engine.loop")
    assert layer_of("gr_notebook") == len(LAYERS)
