# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# Phase 2 (torch, Stable-Baselines3) is an extra: the slow checks install it
PHASE2  = $(VENV)/.phase2-$(shell cksum pyproject.toml | cut -d' ' -f1)

# A short Montezuma exploration (about a minute on 2 cores) that ends with a report. It uses the
# montezuma-dk preset: by 400k agent steps our seed 0 and 1 runs had 15 and 10 rooms and
# 3,600 and 2,500 points, where the reference preset had 1 and 5 rooms, 100 and 500 points.
RUN_DIR ?= runs/quickstart
FRAMES  ?= 400000
WORKERS ?= 2
PRESET  ?= montezuma-dk

.PHONY: run lint test test-slow test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,ray]'
	rm -f $(VENV)/.installed-*
	touch $@

run: $(STAMP)
	$(BIN)/goexplore run --preset $(PRESET) --total-frames $(FRAMES) --n-workers $(WORKERS) \
		--run-dir $(RUN_DIR) --resume auto
	$(BIN)/goexplore report $(RUN_DIR) --out $(RUN_DIR)/report
	@echo "report: $(RUN_DIR)/report/index.html"

# ruff (lint + format check) and a type check of the public surface (see pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

$(PHASE2): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,ray,phase2]'
	rm -f $(VENV)/.phase2-*
	touch $@

# the long checks and Phase 2's (installs the [phase2] extra first)
test-slow: $(PHASE2)
	$(BIN)/python -m pytest -q -m "slow or phase2"

test-all: $(PHASE2)
	$(BIN)/python -m pytest -q -m "slow or phase2 or not slow"

bench: $(STAMP)
	$(BIN)/goexplore bench --env montezuma --n-workers 2 --frames 2000000 --json bench.json
	$(BIN)/python benchmarks/targets.py bench.json

clean:
	rm -rf $(VENV) runs .pytest_cache
