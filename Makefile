# Every target does its own set-up: a fresh clone needs only `make test`, `make conformance`
# or `make conformance-all`.  Stamps (`<venv>/.installed`) make a second run skip the install.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
# uv (pip when uv is unavailable or fails), or pip only: the same packages either way (docs/setup.md)
INSTALLER ?= uv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Frameworks that cannot share the main environment get one each (docs/explanation/frameworks.md).
# The backends find them here; CONFORMANCE_PADDLE_PYTHON / CONFORMANCE_MINDSPORE_PYTHON override.
PADDLE_VENV ?= .venv-paddle
MINDSPORE_VENV ?= .venv-mindspore
PADDLE_SPEC ?= paddlepaddle==3.3.1
# mindspore 2.10 breaks under numpy 2.x although its metadata allows it.
MINDSPORE_SPEC ?= mindspore==2.10.0 numpy==1.26.*
# What `conformance worker` itself imports; the package goes in with --no-deps (no torch/TF there).
WORKER_DEPS ?= numpy "ml_dtypes<0.7" hypothesis rich
FRAMEWORK_STAMPS := $(PADDLE_VENV)/.installed $(MINDSPORE_VENV)/.installed
ALL_BACKENDS ?= golden,torch,tensorflow,cann,jax,onnxruntime,keras,paddle,mindspore
# conformance-all gates like conformance: a FAIL verdict (exit 1) fails the target.
# GATE_ALL=0 reports a FAIL without failing the target (set-up and usage errors, exit 2, still fail).
GATE_ALL ?= 1
ALL_VERDICT = rc=$$?; if [ $$rc -eq 1 ] && [ "$(GATE_ALL)" = 0 ]; then \
	echo "conformance-all: verdict FAIL reported in reports/conformance-all.json, not gated (GATE_ALL=0)"; \
	rc=0; fi; test $$rc -eq 0

export TF_CPP_MIN_LOG_LEVEL := 3

# $(call timed,what,command): run command, print how long it took, keep its exit status.
timed = s=$$(date +%s); $(2); rc=$$?; echo "conformance: $(1) took $$(( $$(date +%s) - s )) s"; exit $$rc

.PHONY: setup setup-frameworks test test-exhaustive lint conformance conformance-all selftest bench clean mutate

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile tools/install.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch pinned (a CPU wheel) in the same resolution as the rest: the torch extra pins the same
	# version, so neither it nor the light frameworks (jax, keras, onnx, onnxruntime) replace it.
	# uv under pip's own settings, byte-compiled on every core; pip when uv cannot (docs/setup.md).
	$(PY) tools/install.py --installer $(INSTALLER) -- $(TORCH_SPEC) -e ".[dev,all]"
	# the package's own modules too: every process a run or a test starts then loads them compiled
	$(PY) -m compileall -q -j 0 conformance examples >/dev/null
	# compile the numba loops once (cached next to the package), so no run or test compiles them
	$(PY) -m conformance.compile_cache
	touch $(STAMP)

setup-frameworks: $(FRAMEWORK_STAMPS)

# $(call framework_env,venv,specs): a venv holding the framework and the worker, not torch/TF.
define framework_env
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q --no-warn-conflicts $(2) $(WORKER_DEPS)
	$(1)/bin/python -m pip install -q --no-deps -e .
	touch $(1)/.installed
endef

$(PADDLE_VENV)/.installed: pyproject.toml Makefile
	$(call framework_env,$(PADDLE_VENV),$(PADDLE_SPEC))

$(MINDSPORE_VENV)/.installed: pyproject.toml Makefile
	$(call framework_env,$(MINDSPORE_VENV),$(MINDSPORE_SPEC))

# TEST_WORKERS: pytest-xdist processes (one per core by default; 0 runs in this process)
TEST_WORKERS ?= auto

# make test: the harness's own tests, as plain `pytest` runs them (the `exhaustive` proofs left out).
# make test-exhaustive: only the `exhaustive` proofs, the full-size runs whose samples `make test` has;
# it makes the Paddle and MindSpore environments first, so their full-size proofs run, not skip.
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS)

test-exhaustive: $(STAMP) $(FRAMEWORK_STAMPS)
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m exhaustive

lint: $(STAMP)
	$(PY) -m ruff check .

conformance:
	@$(call timed,set-up,$(MAKE) --no-print-directory setup)
	@$(call timed,run,$(VENV)/bin/conformance run --json reports/conformance.json --junit reports/junit.xml)

# Every framework: the main environment's and those in environments of their own.
conformance-all:
	@$(call timed,set-up (main),$(MAKE) --no-print-directory setup)
	@$(call timed,set-up (paddle),$(MAKE) --no-print-directory $(PADDLE_VENV)/.installed)
	@$(call timed,set-up (mindspore),$(MAKE) --no-print-directory $(MINDSPORE_VENV)/.installed)
	@$(call timed,run (all frameworks),$(VENV)/bin/conformance run --backend $(ALL_BACKENDS) \
		--json reports/conformance-all.json --junit reports/junit-all.xml; $(ALL_VERDICT))

selftest: $(STAMP)
	$(VENV)/bin/conformance selftest

bench: $(STAMP)
	$(PY) -m benchmarks

# make mutate: mutation testing of the modules that decide a verdict (docs/reference/mutation.md),
# not part of `make test` or CI.  mutmut goes into .venv here only; tools/mutate.py runs it group by
# group (MUTATE_GROUPS: some only) in mutants/, one worker, the numpy paths only; it writes
# reports/mutation.md and fails when fewer than MUTATE_MIN_SCORE percent of the mutants are killed.
MUTMUT_SPEC ?= mutmut==3.8.1
MUTATE_MIN_SCORE ?= 95
MUTATE_GROUPS ?=
mutate: $(STAMP)
	$(PY) tools/install.py --installer $(INSTALLER) -- $(MUTMUT_SPEC)
	@$(call timed,mutation testing,$(PY) tools/mutate.py --min-score $(MUTATE_MIN_SCORE) $(MUTATE_GROUPS))

clean:
	rm -rf $(VENV) $(PADDLE_VENV) $(MINDSPORE_VENV) reports results .pytest_cache .hypothesis .ruff_cache mutants
