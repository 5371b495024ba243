# gr-notebook — build / test entry points.
#
# On a fresh machine only `python3` and PyPI are assumed. uv is bootstrapped
# into a private tool venv (.uv/), then `uv sync --locked` builds .venv/ from
# uv.lock (runtime deps + the `dev` dependency group).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules

UV_VERSION := 0.13.8
UV         := .uv/bin/uv
PY         := .venv/bin/python
STAMP      := .venv/.synced

# Only lint/format the source dirs that actually exist (git does not keep
# empty directories, so e.g. bench/ may be absent in a fresh clone).
SRC_DIRS   := $(wildcard gr_notebook tests bench notebooks)
NOTEBOOKS  := $(wildcard notebooks/*.ipynb)
SANITIZE   := $(wildcard notebooks/sanitize.cfg)
BENCHES    := $(sort $(wildcard bench/bench_*.py))

export UV_PYTHON_DOWNLOADS := never
export UV_COMPILE_BYTECODE := 1
# Trust the OS certificate store (/etc/ssl/certs), not only uv's bundled roots:
# these machines reach PyPI through a TLS proxy whose CA is only in the OS store.
export UV_SYSTEM_CERTS := 1

DEMO_DIR   := build/demo
LAB_FLAGS  := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: env demo test lint format typecheck pytest nbval notebooks bench lab clean

# The quickstart's background run thinks for 1 s a turn for a person; tests and the demo
# run it fast. `make lab` leaves it at the reader's pace.
demo test pytest nbval notebooks: export GR_QUICKSTART_LATENCY = 0.05

# ── environment ─────────────────────────────────────────────────────────────
env: $(STAMP)

# Re-sync whenever the lock or the project metadata changes. The private,
# pinned uv is bootstrapped only when a sync is actually needed and it is missing.
$(STAMP): uv.lock pyproject.toml
	if [ ! -x $(UV) ]; then \
		python3 -m venv .uv && .uv/bin/pip install -q uv==$(UV_VERSION); \
	fi
	$(UV) sync --locked --python python3
	touch $@

# ── user-facing targets ─────────────────────────────────────────────────────
# Runs the quickstart headless, as a reader's kernel would, and keeps the result.
demo: $(STAMP)
	$(PY) notebooks/execute.py notebooks/01_quickstart.ipynb --out $(DEMO_DIR) --html
	@echo "Open the HTML copy in a browser, or run 'make lab' to try the notebook live."

test: lint typecheck pytest nbval

lint: $(STAMP)
	.venv/bin/ruff check $(SRC_DIRS)
	.venv/bin/ruff format --check $(SRC_DIRS)

format: $(STAMP)
	.venv/bin/ruff format $(SRC_DIRS)
	.venv/bin/ruff check --fix $(SRC_DIRS)

typecheck: $(STAMP)
	.venv/bin/mypy gr_notebook

pytest: $(STAMP)
	.venv/bin/pytest

nbval: $(STAMP)
ifneq ($(NOTEBOOKS),)
	.venv/bin/pytest --nbval --nbval-current-env \
		$(if $(SANITIZE),--nbval-sanitize-with $(SANITIZE)) notebooks/
else
	@echo "nbval: no notebooks/*.ipynb, skipping"
endif

# Re-executes the committed notebooks in place: their outputs are what nbval checks.
notebooks: $(STAMP)
	$(PY) notebooks/execute.py $(NOTEBOOKS)

bench: $(STAMP)
ifneq ($(BENCHES),)
	@set -e; for f in $(BENCHES); do \
		echo "== $$f"; \
		$(PY) "$$f"; \
	done
else
	@echo "bench: no bench/bench_*.py, skipping"
endif

lab: $(STAMP)
	.venv/bin/jupyter lab $(LAB_FLAGS) notebooks/

clean:
	rm -rf .venv .uv gr_runs build dist .mypy_cache .ruff_cache .pytest_cache
	find . -path ./.git -prune -o -type d \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
