"""Every notebook runs after a plain install of the wheel, without the dev group (issue 14).

The environment is built offline with the project's own uv and cache (``make env`` fills it):
the lock's runtime packages (``uv export --no-dev``) seed it, so nothing is downloaded, and the
wheel is then installed with its declared dependencies resolved against them. Each notebook runs
in a kernel of that environment, through ``notebooks/execute.py`` as ``make notebooks`` does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MARKER = "WHEEL-ENV "
PROBE = f"""\
import importlib.metadata as metadata
import json
import sys

import gr_notebook


def installed(name):
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


dev = {{dev!r}}
print({MARKER!r} + json.dumps({{{{
    "prefix": sys.prefix,
    "package": gr_notebook.__file__,
    "dev_installed": [name for name in dev if installed(name)],
}}}}))
"""


def _uv() -> str:
    uv = ROOT / ".uv" / "bin" / "uv"
    found = str(uv) if uv.is_file() else shutil.which("uv")
    if found is None:
        pytest.fail("no uv: run `make env`, which installs it into .uv/ and fills its cache")
    return found


def _run(*cmd: str | Path, cwd: Path = ROOT) -> str:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def _dev_group(runtime: set[str]) -> list[str]:
    """The dev group's distributions; ``gr-notebook[extra]`` stands for the extra's own. Those
    the runtime needs too (``anthropic`` needs ``opentelemetry-api``) are no leak."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project, extras = pyproject["project"]["name"], pyproject["project"]["optional-dependencies"]
    names = []
    for req in pyproject["dependency-groups"]["dev"]:
        name = re.split(r"[\s<>=!~;\[]", req.strip(), maxsplit=1)[0]
        if name != project:
            names.append(name)
            continue
        for extra in re.findall(r"\[([^\]]+)\]", req)[0].split(","):
            names += [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0] for r in extras[extra.strip()]]
    return [n for n in names if _normal(n) not in runtime]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _runtime(lock: Path) -> set[str]:
    """The distributions of the runtime's export (a ``pylock.toml``)."""
    return {_normal(p["name"]) for p in tomllib.loads(lock.read_text())["packages"]}


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding the built wheel and its runtime dependencies only."""
    uv, root = _uv(), tmp_path_factory.mktemp("wheel-env")
    _run(uv, "build", "--offline", "--wheel", "--out-dir", root / "dist", "--quiet")
    (wheel,) = (root / "dist").glob("gr_notebook-*.whl")
    lock = root / "pylock.toml"
    runtime = ("--locked", "--no-dev", "--no-emit-project", "--format", "pylock.toml")
    _run(uv, "export", "--offline", "--quiet", *runtime, "--output-file", lock)
    _run(uv, "venv", "--offline", "--quiet", "--python", sys.executable, root / "venv")
    python = root / "venv" / "bin" / "python"
    _run(uv, "pip", "sync", "--offline", "--quiet", "--python", python, lock)
    _run(uv, "pip", "install", "--offline", "--quiet", "--python", python, wheel, "nbclient")
    _run(uv, "pip", "check", "--python", python)
    return python


@pytest.mark.slow
def test_every_notebook_runs_from_the_wheel_without_the_dev_group(
    wheel_env: Path, tmp_path: Path
) -> None:
    probe = tmp_path / "probe.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            PROBE.format(dev=_dev_group(_runtime(wheel_env.parents[2] / "pylock.toml")))
        )
    )
    nbformat.write(nb, probe)
    out, venv_bin = tmp_path / "out", wheel_env.parent
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env.update(
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        JUPYTER_PREFER_ENV_PATH="1",  # the venv's python3 kernel, not a user-wide one
        IPYTHONDIR=str(tmp_path / "ipython"),
        GR_QUICKSTART_LATENCY="0.05",  # as in `make test`
        GR_NOTEBOOK_ALLOW_NETWORK="0",
        ANTHROPIC_API_KEY="",
    )
    # The notebooks run side by side, each in its own process and kernel: a minute in series.
    started = time.monotonic()
    procs = {
        path.name: subprocess.Popen(
            [wheel_env, ROOT / "notebooks" / "execute.py", path, "--out", out, "--timeout", "120"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in [probe, *NOTEBOOKS]
    }
    failures = []
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=max(1.0, 300 - (time.monotonic() - started)))
        if proc.returncode != 0:
            failures.append(f"{name}:\n{stderr[-2500:]}")
    assert not failures, "notebooks failed in the wheel's environment:\n" + "\n".join(failures)

    ran = nbformat.read(out / probe.name, as_version=4)
    text = "".join(o.get("text", "") for o in ran.cells[0].outputs)
    facts = json.loads(text.split(MARKER, 1)[1])
    venv = wheel_env.parent.parent
    assert Path(facts["prefix"]) == venv, "the kernel is not the wheel environment's python"
    assert Path(facts["package"]).is_relative_to(venv), "gr_notebook came from the source tree"
    assert facts["dev_installed"] == [], "the dev group leaked into the environment"
    assert {p.name for p in out.glob("*.ipynb")} == {probe.name, *(p.name for p in NOTEBOOKS)}
