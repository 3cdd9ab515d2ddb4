# Every target does its own set-up: a fresh clone needs only `make test` or `make conformance`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export TF_CPP_MIN_LOG_LEVEL := 3

.PHONY: setup test lint conformance selftest bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and pinned (a CPU wheel); the looser range in pyproject is then already met.
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check .

conformance: $(STAMP)
	$(VENV)/bin/conformance run --json reports/conformance.json --junit reports/junit.xml

selftest: $(STAMP)
	$(VENV)/bin/conformance selftest

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) reports results .pytest_cache .hypothesis .ruff_cache
