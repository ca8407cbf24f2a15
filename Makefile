# zg: two commands to start (`make lab`, `make test`); everything else is below.
# All pins live in requirements/reference.txt (reference env) and requirements/modern.txt.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
MODERN := .venv-modern
PY     := $(VENV)/bin/python
MPY    := $(MODERN)/bin/python
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
export DGLBACKEND := pytorch
export PYTHONHASHSEED := 0

.PHONY: help env lab test test-core test-modern report bench clean

help:
	@echo "make lab          set up .venv (reference env) and start JupyterLab in notebooks/"
	@echo "make test         set up .venv and run the whole suite (unit, property, distributed, notebooks)"
	@echo "make test-modern  set up .venv-modern (torch 2.13 CPU, no DGL) and run the core tests"
	@echo "make report       execute the notebooks at full size into reports/*.html"
	@echo "make bench        run the benchmarks in bench/ (JSON lands in bench/results/)"

# The reference environment: created if missing, reinstalled when the pins or pyproject change.
$(VENV)/.zg-installed: requirements/reference.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade-strategy only-if-needed -r requirements/reference.txt
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

env: $(VENV)/.zg-installed

lab: env
	cd notebooks && ../$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# ZG_REFERENCE_ENV=1: in the reference environment a missing DGL (or other pinned extra) is a
# test error, never a skip.
test: env
	ZG_REFERENCE_ENV=1 $(PY) -m pytest -q tests $(if $(NOTEBOOKS),--nbval-lax $(NOTEBOOKS))

$(MODERN)/.zg-installed: requirements/modern.txt pyproject.toml
	test -x $(MPY) || $(PYTHON) -m venv $(MODERN)
	$(MPY) -m pip install -r requirements/modern.txt
	$(MPY) -m pip install --no-deps -e .
	touch $@

test-modern: $(MODERN)/.zg-installed
	$(MPY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('dgl') is not None)" \
	  || (echo "error: DGL is installed in $(MODERN); the modern env must not have it" && exit 1)
	$(MPY) -m pytest -q tests

report: env
	mkdir -p reports
	$(if $(NOTEBOOKS),ZG_SCALE=full $(VENV)/bin/jupyter nbconvert --to html --execute \
	  --ExecutePreprocessor.timeout=3600 --output-dir reports $(NOTEBOOKS),@echo "no notebooks yet")

bench: env
	@set -e; for f in bench/*.py; do echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf $(VENV) $(MODERN) reports .pytest_cache .hypothesis
