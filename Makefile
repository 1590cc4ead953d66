# `make test` and `make demo` work from nothing: they create .venv and install into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench lint generate docs clean

RUNTIME_STAMP := $(VENV)/.installed-runtime
# pytest-xdist workers for `make test`: one per core (CI has 2). `make test WORKERS=0` runs serially.
WORKERS ?= auto

# The demo needs patchguard alone; tests, lint and docs need the whole toolchain.
$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The real sglang 0.5.10 wheel, for tests/test_real_sglang.py (and make bench): fetched once; where
# the package index cannot be reached, that test says it is skipped.
SGLANG_WHEEL := benchmarks/work/wheels/.fetched-sglang-0.5.10
$(SGLANG_WHEEL): | $(STAMP)
	-$(BIN)/python -m pip download --quiet --no-deps --dest benchmarks/work/wheels sglang==0.5.10 && touch $@

test: $(STAMP) $(SGLANG_WHEEL)
	$(BIN)/ruff check guard hooks patchguard_entry.py tests scripts benchmarks
	$(BIN)/ruff format --check guard hooks patchguard_entry.py tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(WORKERS) --durations=10

demo: $(RUNTIME_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" sh scripts/demo.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

generate: $(STAMP)
	$(BIN)/python scripts/generate.py

lint: $(STAMP)
	$(BIN)/ruff check guard hooks patchguard_entry.py tests scripts benchmarks
	$(BIN)/ruff format --check guard hooks patchguard_entry.py tests scripts benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist
