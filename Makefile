# The two set-up commands (see README):
#   make run    install into .venv and run the default local sweep
#   make test   install into .venv (with test extras), type-check src/ and run the test suite but its long
#               tests (CI's first step; under 10 minutes on 2 idle cores, README)
#   make test-long  the long tests (over ~5 s each: real sweeps, kfp.local runs, containers): CI's second step
#   make check  the quick loop (under 2 minutes on 2 cores): the pre-commit hooks on every file (ruff check,
#               ruff format --check, lint-imports, mypy, the README / manifests / compiled-pipeline /
#               reference-page sync checks) and the tests not marked slow
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test test-long check slow-tests reports install install-test install-ml clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[pocl,kfp]'

install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

install-ml: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[ml]'

run: install
	$(BIN)/sharebench run $(ARGS)

# both cores (pytest-xdist): a module's tests stay on one worker, as its module-scoped fixtures want; the
# JUnit XML keeps each test's time for `make slow-tests`. The long tests (tests/long_tests.txt, or marked
# `long` in their files) are make test-long's: CI runs both (.ci/run)
test: install-test
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadscope -m "not long" --junitxml=.pytest-junit.xml $(ARGS)

test-long: install-test
	$(BIN)/python -m pytest -n 2 --dist loadscope -m long --junitxml=.pytest-junit-long.xml $(ARGS)

# tests/slow_tests.txt (what make check leaves out) and tests/long_tests.txt (what make test leaves out) from
# the last `make test` and `make test-long`
slow-tests:
	$(BIN)/python -m tools.slow_tests $(wildcard .pytest-junit.xml .pytest-junit-long.xml)

# every committed results folder's report rebuilt by the current code (tools/rebuild_reports.py; the test
# tests/tools/test_rebuild_reports.py fails on a stale one): review `git diff results/`, then commit
reports:
	$(BIN)/python -m tools.rebuild_reports --write

# no reinstall on each run: the test extra is installed once (or again when its tools are missing)
$(BIN)/pre-commit $(BIN)/mypy:
	$(MAKE) install-test

# every hook, the sync checks of the generated files included (README, manifests, pipeline YAML, reference)
check: $(BIN)/pre-commit $(BIN)/mypy
	$(BIN)/pre-commit run --all-files
	$(BIN)/python -m pytest -n 2 --dist loadscope -m "not slow" -q $(ARGS)

clean:
	rm -rf $(VENV) sharebench-results .pytest_cache .pytest-junit.xml .pytest-junit-long.xml
