# zg: two commands to start (`make lab`, `make test`); everything else is below.
# All pins live in requirements/reference.txt (reference env) and requirements/modern.txt.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
MODERN := .venv-modern
LIGHT  := .venv-light
PY     := $(VENV)/bin/python
MPY    := $(MODERN)/bin/python
LPY    := $(LIGHT)/bin/python
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
export DGLBACKEND := pytorch
export PYTHONHASHSEED := 0
# Idle OpenMP threads sleep instead of spinning: on shared or small machines spinning threads
# slow torch's CPU kernels down by an order of magnitude.
export OMP_WAIT_POLICY := PASSIVE

.PHONY: help env env-light light-check lint format lab lab-light lab-instructor labs labs-check labs-wrong labs-right labs-mutants labs-variants labs-sandbox labs-sandbox-check student-dist test-modern-all test test-fast test-modern report report-ci report-modern report-check lab-live-check docs docs-check bench clean

help:
	@echo "make lab          set up .venv (reference env) and start JupyterLab in notebooks/"
	@echo "make env          set up .venv alone: the pinned reference env (torch 2.2.1, DGL, dev tools; ~3 GB download)"
	@echo "make env-light    set up .venv-light: CPU torch, the kit, JupyterLab, ipywidgets, plotly; no DGL, no dev tools"
	@echo "make lab-light    set up .venv-light and start JupyterLab in notebooks/ from it"
	@echo "make light-check  build .venv-light in a clean copy, run the README's first example and notebook 02 there"
	@echo "make lint         ruff (lint + format check) and nbstripout --verify on the tree"
	@echo "make format       ruff format + ruff check --fix + nbstripout, in place"
	@echo "make test         set up .venv and run the whole suite (unit, property, distributed, notebooks)"
	@echo "make test-fast    the suite without the slow tests (processes, notebooks): about 8 minutes of CPU time"
	@echo "make test-modern  set up .venv-modern (torch 2.13 CPU, no DGL) and run the core tests"
	@echo "make report-modern run every notebook (CI size) and every lab solution in .venv-modern, no DGL"
	@echo "make report       execute the notebooks at full size into reports/*.html (ZG_SCALE=small: CI size)"
	@echo "make report-ci    the same at CI size"
	@echo "make report-check open every report in headless Chromium: figures drawn, no JS errors, nothing clipped or overprinted at JupyterLab's size and the report's"
	@echo "make lab-live-check run the notebooks with controls in a live JupyterLab (headless Chromium), move every control"
	@echo "make docs         build the static docs site into site/ (docs/, README, CLAIMS, the reports)"
	@echo "make docs-check   open every page of site/ in headless Chromium: links, JS errors, figures"
	@echo "make bench        run the benchmarks in bench/ (JSON lands in bench/results/)"
	@echo "make labs         build the student version of the graded labs into labs/release/ (nbgrader)"
	@echo "make labs-check   grade the labs as two students: solutions get every point, the untouched release ~none"
	@echo "make labs-wrong   grade the wrong solutions of labs/wrong/: each loses at least half the points of its part"
	@echo "make labs-right   grade the alternative correct solutions of labs/right/: each earns every point"
	@echo "make labs-mutants mutation-test the labs: every part kills >= 90% of its mutants (docs/course)"
	@echo "make labs-variants labs-wrong, labs-right and labs-mutants in one pass (what .ci/run runs)"
	@echo "make labs-sandbox-check  every lab's model solution earns full marks inside the grading sandbox"
	@echo "make student-dist build what students get: the wheel and the released labs (dist/student/)"
	@echo "make lab-instructor  JupyterLab in labs/ (nbgrader's formgrader manages the course there)"

# Progress bars on the long measurements (zg/experiments/_progress.py) are for a person: `make lab`
# shows them; every target that runs tests, notebooks or labs unattended turns them off, so
# executed notebooks, reports and logs hold none (ZG_PROGRESS=1 in the environment keeps them).
UNATTENDED = test test-fast test-modern test-modern-all report report-modern lab-live-check \
	labs labs-check labs-wrong labs-right labs-mutants labs-variants labs-sandbox \
	labs-sandbox-check student-dist light-check
$(UNATTENDED): export ZG_PROGRESS ?= 0

# The reference environment: created if missing, reinstalled when the pins or pyproject change.
$(VENV)/.zg-installed: requirements/reference.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade-strategy only-if-needed -r requirements/reference.txt
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

env: $(VENV)/.zg-installed

# The light environment (requirements/light.txt): what a student needs for the notebooks and the
# labs, without CUDA wheels, DGL or developer tools. torch from PyPI is the CUDA build on Linux;
# `make env-light TORCH_INDEX=https://download.pytorch.org/whl/cpu` takes the CPU build from
# PyTorch's index (docs/install.md). Left empty, pip's own configuration decides (CI: the
# modern environment's torch, the same pin).
TORCH_INDEX ?=
$(LIGHT)/.zg-installed: requirements/light.txt pyproject.toml
	test -x $(LPY) || $(PYTHON) -m venv $(LIGHT)
	$(if $(TORCH_INDEX),$(LPY) -m pip install --index-url $(TORCH_INDEX) "$$(grep -E '^torch==' requirements/light.txt)")
	$(LPY) -m pip install -r requirements/light.txt
	$(LPY) -m pip install -e ".[lab]"
	touch $@

env-light: $(LIGHT)/.zg-installed

# `make light-check`: the student route from nothing. A clean copy of the repository's files
# (tracked and new, not ignored: no .venv, reports or build outputs) in LIGHT_CHECK_DIR, its
# `make env-light` there, then in that environment the README's first example and notebook 02
# at CI size (tools/build_report.py --execute-only: a failing cell fails it), and the check that
# no DGL, CUDA wheel or developer tool came in. Prints the environment's size; the copy is
# removed when it passes.
LIGHT_CHECK_DIR ?= $(or $(TMPDIR),/tmp)/zg-light-check
LIGHT_CHECK_NOTEBOOK ?= notebooks/02_envelopes.ipynb
light-check:
	rm -rf $(LIGHT_CHECK_DIR) && mkdir -p $(LIGHT_CHECK_DIR)
	git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C $(LIGHT_CHECK_DIR)
	$(MAKE) -C $(LIGHT_CHECK_DIR) env-light PYTHON=$(PYTHON) TORCH_INDEX=$(TORCH_INDEX)
	cd $(LIGHT_CHECK_DIR) && $(LPY) -c "import importlib.util as u, sys; extra = [m for m in ('dgl', 'pytest', 'ruff', 'nbgrader', 'nvidia', 'hypothesis', 'mkdocs') if u.find_spec(m)]; sys.exit(f'light env holds {extra}' if extra else 0)"
	cd $(LIGHT_CHECK_DIR) && $(LPY) -c "import re, pathlib; open('.light_example.py', 'w').write(re.findall(r'\x60{3}python\n(.*?)\x60{3}', pathlib.Path('README.md').read_text(), re.S)[0])"
	cd $(LIGHT_CHECK_DIR) && $(LPY) .light_example.py
	cd $(LIGHT_CHECK_DIR) && $(LPY) tools/build_report.py --scale small --execute-only $(LIGHT_CHECK_NOTEBOOK)
	@echo "light-check: passed; $(LIGHT) is $$(du -sh $(LIGHT_CHECK_DIR)/$(LIGHT) | cut -f1), $$($(LIGHT_CHECK_DIR)/$(LPY) -m pip list 2>/dev/null | tail -n +3 | wc -l) packages"
	rm -rf $(LIGHT_CHECK_DIR)

# The student's JupyterLab: nbgrader's lab and server extensions are off here (no Validate,
# Create Assignment, formgrader, course or assignment list; tools/student_lab/ is the config
# folder that says so, read first through JUPYTER_CONFIG_PATH); `make lab-instructor` has them.
STUDENT_LAB_CONFIG = JUPYTER_CONFIG_PATH="$(CURDIR)/tools/student_lab$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"
lab: env
	cd notebooks && $(STUDENT_LAB_CONFIG) ../$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# `make lab-light`: the same student JupyterLab from the light environment (no DGL, no nbgrader).
lab-light: env-light
	cd notebooks && $(STUDENT_LAB_CONFIG) ../$(LIGHT)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The same JupyterLab rooted at the nbgrader course (labs/), with nbgrader's tools, so the
# formgrader and the create-assignment toolbar work on the labs (labs/README.md). nbgrader's
# exchange (release, fetch, submit, collect) is labs/exchange/ (gitignored), made here with the
# permissions nbgrader wants, unless ZG_EXCHANGE or /srv/nbgrader/exchange names a shared one
# (labs/nbgrader_config.py; docs/course/running_the_course.md, "nbgrader's exchange").
lab-instructor: env
	@if [ -z "$$ZG_EXCHANGE" ] && [ ! -d /srv/nbgrader/exchange ]; then \
	  mkdir -p labs/exchange && chmod 0777 labs/exchange && \
	  echo "nbgrader exchange: $(CURDIR)/labs/exchange (docs/course/running_the_course.md, \"nbgrader's exchange\")"; \
	else echo "nbgrader exchange: $${ZG_EXCHANGE:-/srv/nbgrader/exchange}"; fi
	cd labs && PATH="$(abspath $(VENV))/bin:$$PATH" ../$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The graded labs (labs/README.md). `make labs`: the student version in labs/release/.
# `make labs-check`: grade a temp copy of the course as two students (zg_course/check.py).
labs: env
	$(PY) -m zg_course.release

labs-check: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.check

# `make labs-wrong`: grade every deliberately wrong solution of labs/wrong/ (zg_course/wrong.py;
# in this process, each in a fork: about 2 minutes; `--nbgrader` grades with nbgrader itself).
labs-wrong: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.wrong

# `make student-dist`: what students get, the wheel and the released labs, without solutions,
# hidden tests or model answers (tools/student_dist.py): dist/student/zg-course-<version>.zip.
student-dist: env
	PYTHONPATH=$(CURDIR) $(PY) tools/student_dist.py

# `make labs-right`: every alternative correct solution of labs/right/ earns every point.
labs-right: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.right

# `make labs-mutants`: mutants of every solution cell, graded by the lab's own tests; every part
# kills at least 90 % of its non-equivalent mutants (zg_course/mutants.py, about 3 minutes).
labs-mutants: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.mutants --write docs/course/mutation_scores.md

# `make labs-variants`: labs-wrong, labs-right and labs-mutants in one pass, each lab's notebook
# run once for all three (zg_course/variants.py; the same judging, reports and exit status).
labs-variants: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.variants --write docs/course/mutation_scores.md

# `make labs-sandbox LAB=02_fixed_shape_sampler`: grade every collected submission of a lab,
# each in its own sandbox (zg_course/sandbox.py: bubblewrap, Debian's `bubblewrap` package:
# namespaces, an allow-listed read-only file view, a user of its own, loopback only,
# memory/process/output limits, killed at TIMEOUT seconds and with the grader); the reports go
# to labs/sandbox-<lab>.json. A malformed submission is reported (0 points) and the batch goes
# on; the exit status is then 1.
TIMEOUT ?= 600
labs-sandbox: env
	@test -n "$(LAB)" || (echo "usage: make labs-sandbox LAB=<lab, e.g. 02_fixed_shape_sampler>" && exit 2)
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.sandbox --timeout $(TIMEOUT) --json labs/sandbox-$(LAB).json labs/submitted/*/$(LAB)/$(LAB).ipynb

# `make labs-sandbox-check`: every lab's model solution (labs/source/, as labs-check grades it)
# earns full marks inside the sandbox (about 1.5 minutes on 2 cores; what .ci/run runs), at the
# smallest --processes the grader accepts (zg_course.sandbox.PROCESSES_MIN, 32: the floor is
# measured on every run; at 12 a model solution waits for a thread forever, at 20 all pass).
labs-sandbox-check: env
	PYTHONPATH=$(CURDIR) $(PY) -m zg_course.sandbox --check --timeout $(TIMEOUT) --processes 32

# `make lint`: what the pre-commit hooks check (.pre-commit-config.yaml), on every tracked file.
STORED_NOTEBOOKS = $(NOTEBOOKS) $(wildcard labs/source/*/*.ipynb)
lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/nbstripout --verify --keep-id $(STORED_NOTEBOOKS)

format: env
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/nbstripout --keep-id $(STORED_NOTEBOOKS)

# ZG_REFERENCE_ENV=1: in the reference environment a missing DGL (or other pinned extra) is a
# test error, never a skip; in the notebooks too (zg.interop.dgl_or_skip raises instead of
# skipping the DGL rows).
# The notebooks run once, at CI size, into reports/ (tools/build_report.py: a failing cell fails
# the target), so .ci/run checks those same reports in a browser and builds the docs from them
# instead of executing every notebook a second time. One notebook under pytest while working:
# `.venv/bin/python -m pytest -q --nbval-lax notebooks/02_envelopes.ipynb` (CONTRIBUTING.md).
test: env
	ZG_REFERENCE_ENV=1 $(PY) -m pytest -q --durations=25 tests
	$(if $(NOTEBOOKS),mkdir -p reports && ZG_REFERENCE_ENV=1 $(PY) tools/build_report.py --scale small --out reports $(NOTEBOOKS))

# The fast lane (CONTRIBUTING.md): every test not marked slow, no notebook. Run it while working;
# run `make test` before a change lands. Measured: 458 s of CPU time (5453 tests; 19 minutes of
# wall time on a shared 2-core machine at load 6-8).
test-fast: env
	ZG_REFERENCE_ENV=1 $(PY) -m pytest -q -m "not slow" tests

$(MODERN)/.zg-installed: requirements/modern.txt pyproject.toml
	test -x $(MPY) || $(PYTHON) -m venv $(MODERN)
	$(MPY) -m pip install -r requirements/modern.txt
	$(MPY) -m pip install --no-deps -e .
	touch $@

# The modern env runs every fast test, and the slow ones that prove real torch.distributed
# training on a recent torch (MODERN_SLOW: the hook's combined gradient, parameter averaging,
# the overflow flag on the all-reduce, every trainer); `make test-modern-all` runs every slow
# test there too (about 14 more minutes: the launcher's error paths, the process-restart and
# fault tests, already run by `make test`).
# tests/docs/test_colab_cell.py: the labs' Colab install cell, on this recent torch.
MODERN_SLOW = tests/grappa/test_grappa_distributed.py tests/grappa/test_grappa_train.py \
	tests/docs/test_colab_cell.py
MODERN_SLOW_SKIP = silent_peer or never_hangs or reaches_the_caller or end_in_one_line or main_guard
MODERN_HAS_NO_DGL = $(MPY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('dgl') is not None)" \
	  || (echo "error: DGL is installed in $(MODERN); the modern env must not have it" && exit 1)
# The fast tests of the code that runs on torch (tests/docs and tests/viz check the docs' text
# and the figures' drawing, which no torch version changes: `make test` runs them).
MODERN_FAST = tests/bench tests/core tests/course tests/experiments tests/grappa
test-modern: $(MODERN)/.zg-installed
	$(MODERN_HAS_NO_DGL)
	$(MPY) -m pytest -q -m "not slow" $(MODERN_FAST)
	$(MPY) -m pytest -q -m slow $(MODERN_SLOW) -k "not ($(MODERN_SLOW_SKIP))"

# Where students are: every notebook at CI size and every lab's solution notebook, executed in
# .venv-modern (torch 2.13 CPU, no DGL; a failing cell fails it). The notebooks skip their DGL
# rows with a printed line. Nothing is written (no HTML: `make test` renders the reports).
LAB_SOURCES = $(wildcard labs/source/*/*.ipynb)
report-modern: $(MODERN)/.zg-installed
	$(MODERN_HAS_NO_DGL)
	$(MPY) tools/build_report.py --scale small --execute-only $(NOTEBOOKS) $(LAB_SOURCES)

test-modern-all: $(MODERN)/.zg-installed
	$(MPY) -m pytest -q tests

# make report: execute every notebook into reports/*.html (plotly.js embedded inline, no CDN;
# see tools/build_report.py). Full size by default; `make report ZG_SCALE=small` (or
# `make report-ci`) runs the notebooks at their small CI size.
report: ZG_SCALE ?= full
report: env
	mkdir -p reports
	$(if $(NOTEBOOKS),$(PY) tools/build_report.py --scale $(ZG_SCALE) --out reports $(NOTEBOOKS),@echo "no notebooks yet")

report-ci:
	$(MAKE) report ZG_SCALE=small

# Opens every reports/*.html in headless Chromium (Debian's `chromium` package) and checks that
# each figure rendered and no JS error occurred (tools/report_check.py), then what each figure
# draws, at JupyterLab's size and the report's: every category level drawn, no text past the
# edge or over other text, legends that fit, units that agree (tools/figure_check.py).
report-check: env
	$(PY) tools/report_check.py reports
	$(PY) tools/figure_check.py --size both reports

# `make lab-live-check`: JupyterLab started the `make lab` way (a free local port, a token, no
# browser, ZG_SCALE=small), driven in headless Chromium (Debian's, through playwright): every
# notebook of LIVE_NOTEBOOKS that has a control is run from the Run menu and each control is
# moved; then the first screens of `make lab` (no nbgrader tool) and `make lab-instructor` (the
# formgrader, no warning). JupyterLab and its kernels end with it (tools/lab_live_check.py).
LIVE_NOTEBOOKS ?= $(NOTEBOOKS)
lab-live-check: env
	mkdir -p reports
	$(PY) tools/lab_live_check.py --controls-only --first-screens --json reports/lab_live_check.json $(LIVE_NOTEBOOKS)

# make docs: the static site in site/ from README.md, CLAIMS.md, docs/ and the executed notebooks
# of reports/ (`make report ZG_SCALE=small` writes them; without them, as in a fresh clone, the
# site is built without notebook pages and says so); mkdocs-material in strict mode, offline
# (mkdocs.yml, tools/build_docs.py). Open site/index.html. .ci/run passes
# DOCS_ARGS=--require-reports: there a missing report is an error.
docs: env
	$(PY) tools/build_docs.py $(DOCS_ARGS)

# Every page of site/ in headless Chromium: internal links and anchors resolve, no JS error, no
# request to the network, every plotly figure drawn (tools/docs_check.py).
docs-check: env
	$(PY) tools/docs_check.py site

bench: env
	@set -e; for f in bench/*.py; do echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf $(VENV) $(MODERN) $(LIGHT) reports build/docs_src site .pytest_cache .hypothesis
