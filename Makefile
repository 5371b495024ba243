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

.PHONY: env demo test lint format typecheck pytest nbval notebooks bench bench-env lab clean

# The quickstart's background run thinks for 1 s a turn for a person; tests and the demo
# run it fast. `make lab` leaves it at the reader's pace.
demo test pytest nbval notebooks: export GR_QUICKSTART_LATENCY = 0.05
# Tests are offline: any model request that would leave this machine fails at once, and the
# notebooks run on the simulated model even where an API key is set.
test pytest nbval bench: export GR_NOTEBOOK_ALLOW_NETWORK = 0
test pytest nbval notebooks: export ANTHROPIC_API_KEY =
test pytest nbval notebooks: export GR_OPENAI_BASE_URL =

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

bench: $(STAMP) bench-env
ifneq ($(BENCHES),)
	@failed=""; for f in $(BENCHES); do \
		echo "== $$f"; \
		$(PY) "$$f" || failed="$$failed $$f"; \
	done; \
	if [ -n "$$failed" ]; then echo "bench: goals missed in:$$failed"; exit 1; fi
else
	@echo "bench: no bench/bench_*.py, skipping"
endif

# bench/bench_guardrails.py compares the guardrails with WINK (weakincentives), which needs
# Python >= 3.12 and is never a dependency of the package: bench/wink_probe.py runs in its
# own venv, built here once (again only if it lacks weakincentives $(WINK_VERSION)) from the
# first Python >= 3.12 found on PATH or under pyenv. It never fails: without one, it writes
# the reason to $(WINK_UNAVAILABLE) and the bench reports the WINK goal as not measured.
WINK_VERSION     := 0.27.0
WINK_VENV        := .bench/wink-venv
WINK_UNAVAILABLE := .bench/wink-unavailable.txt
WINK_CHECK       := import importlib.metadata as m, sys; \
	sys.exit(m.version("weakincentives") != "$(WINK_VERSION)")

bench-env:
	@if $(WINK_VENV)/bin/python -c '$(WINK_CHECK)' 2>/dev/null; then exit 0; fi; \
	mkdir -p .bench; \
	root="$$(pyenv root 2>/dev/null || echo "$${PYENV_ROOT:-$$HOME/.pyenv}")"; \
	py=""; \
	for c in python3.12 python3.13 python3.14 "$$root"/versions/3.1[2-9]*/bin/python3 python3; do \
		if "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then \
			py="$$c"; break; \
		fi; \
	done; \
	if [ -z "$$py" ]; then \
		echo "no Python >= 3.12 found (python3.12/3.13/3.14 or python3 on PATH, or pyenv" \
			"versions under $$root)" > $(WINK_UNAVAILABLE); \
		echo "bench-env: $$(cat $(WINK_UNAVAILABLE)); the WINK comparison is skipped"; \
		exit 0; \
	fi; \
	echo "bench-env: building $(WINK_VENV) with $$("$$py" -c 'import sys; print(sys.executable)')"; \
	rm -rf $(WINK_VENV); \
	if "$$py" -m venv $(WINK_VENV) \
		&& $(WINK_VENV)/bin/python -m pip install -q --disable-pip-version-check \
			weakincentives==$(WINK_VERSION); then \
		rm -f $(WINK_UNAVAILABLE); \
	else \
		rm -rf $(WINK_VENV); \
		echo "installing weakincentives==$(WINK_VERSION) with $$py failed" > $(WINK_UNAVAILABLE); \
		echo "bench-env: $$(cat $(WINK_UNAVAILABLE)); the WINK comparison is skipped"; \
	fi

lab: $(STAMP)
	.venv/bin/jupyter lab $(LAB_FLAGS) notebooks/

clean:
	rm -rf .venv .uv gr_runs build dist .mypy_cache .ruff_cache .pytest_cache
	find . -path ./.git -prune -o -type d \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
