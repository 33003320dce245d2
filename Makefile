# kubelite — every target creates .venv and installs what it needs on first use:
# `up` only what running a cluster needs, the test, lint and bench targets the test extras too.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
ARGS    ?=

.PHONY: help install up test test-fast lint format bench clean system-deps

help:            ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $(TEST_STAMP)

install: $(STAMP)  ## create .venv and install kubelite (what running a cluster needs, no test tools)

up: $(STAMP)     ## start a local cluster (apiserver, scheduler, controller-manager, 2 kubelets)
	$(BIN)/kubelite up $(ARGS)

test: $(TEST_STAMP) lint system-deps  ## lint, check layering, run every test (slow and e2e included)
	$(BIN)/python -m pytest -q $(ARGS)

system-deps:     ## Debian packages the tests need (docker-compose validates the compose file offline)
	@command -v docker-compose >/dev/null || { apt-get install -y -q docker-compose >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q docker-compose >/dev/null; }; }

test-fast: $(TEST_STAMP)  ## every test except the slow ones
	$(BIN)/python -m pytest -q -m 'not slow' $(ARGS)

lint: $(TEST_STAMP)   ## ruff + import-linter layering contracts + mypy on api/ store/ client/
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(TEST_STAMP) ## ruff format + autofix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(TEST_STAMP)  ## run the benchmarks and print ratio tables
	$(BIN)/python -m bench $(ARGS)

clean:           ## remove the venv, caches and local state
	rm -rf $(VENV) .kubelite .pytest_cache .ruff_cache .mypy_cache
