# The two set-up commands (see README):
#   make run    install into .venv and run the default local sweep
#   make test   install into .venv (with test extras) and run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test install install-test install-ml clean

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

test: install-test
	$(BIN)/python -m pytest $(ARGS)

clean:
	rm -rf $(VENV) sharebench-results .pytest_cache
