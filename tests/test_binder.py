"""binder/ stays in step with the package: mybinder must be able to run every notebook."""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
# Import names whose distribution is named differently.
DISTRIBUTIONS = {"IPython": "ipython"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower()


def binder_requirements() -> set[str]:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    return {_name(line) for line in lines if line.strip() and not line.startswith("#")}


def test_binder_installs_every_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {_name(d) for d in project["dependencies"]} <= binder_requirements()


def notebook_imports() -> set[str]:
    """The distributions (lower-case) of the third-party modules the notebooks import."""
    needed: set[str] = set()
    written: set[str] = set()  # a module a notebook writes itself (notebook 07's mailer.py)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or cell.source.startswith("%%"):
                continue
            written |= set(re.findall(r"Path\(\"(\w+)\.py\"\)\.write_text", cell.source))
            source = "\n".join(
                line for line in cell.source.splitlines() if not line.lstrip().startswith("%")
            )
            flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            for node in ast.walk(compile(source, str(path), "exec", flags=flags)):
                if isinstance(node, ast.Import):
                    needed |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    needed.add(node.module.split(".")[0])
    third_party = {
        DISTRIBUTIONS.get(name, name).lower()
        for name in needed
        if name not in sys.stdlib_module_names and name != "gr_notebook" and name not in written
    }
    assert third_party, "the notebooks import nothing? the scan is broken"
    return third_party


def test_binder_installs_what_the_notebooks_import() -> None:
    assert notebook_imports() <= binder_requirements() | {"ipython"}  # ipython: via ipykernel


def test_runtime_dependencies_cover_what_the_notebooks_import() -> None:
    """A plain ``pip install`` must be enough to run every notebook: what they import is a
    runtime dependency, not only a development one (issue 14)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(d) for d in project["dependencies"]} | {"ipython"}  # via ipykernel
    missing = notebook_imports() - declared
    assert not missing, f"the notebooks import {sorted(missing)}, which pip install leaves out"


def test_post_build_installs_the_package_itself() -> None:
    post_build = ROOT / "binder" / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "pip install --no-deps ." in post_build.read_text()


def test_readme_links_binder_to_the_quickstart() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "https://mybinder.org/badge_logo.svg" in readme
    assert "urlpath=lab/tree/notebooks/01_quickstart.ipynb" in readme
    assert (ROOT / "notebooks" / "01_quickstart.ipynb").is_file()
