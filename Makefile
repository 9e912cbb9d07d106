# Two set-up commands: `make demo` and `make test`. Both work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test install install-test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e '.[all]'

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[all,dev]'

demo: install
	$(BIN)/hotshard demo

test: install-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

bench: install-test
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/bench_fit.py
	$(BIN)/python benchmarks/bench_profile.py

clean:
	rm -rf $(VENV) build src/*.egg-info
