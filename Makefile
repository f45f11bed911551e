# pytree-lab: two commands from a fresh clone.
#   make lab    open the course notebooks in JupyterLab (installs everything first)
#   make test   run every test, real-browser tests included (installs everything first)
# Also: make bench (benchmarks), make lite (build + serve the JupyterLite site),
#       make js-check (tsc over the widgets' ES modules),
#       make lint (ruff check, mypy and js-check; make test runs it first)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8888

# Python writes its bytecode caches in every recipe (into __pycache__/, ignored by git). Where the
# environment sets PYTHONDONTWRITEBYTECODE=1 (these machines do), nothing installed --no-compile
# is ever cached: every kernel, server and test process compiles what it imports from source
# again (jax, optax and the widgets: 9 s an import instead of 3.5 s), and pytest rewrites every
# test module's asserts again in each worker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: lab test test-fast test-floors test-pythons bench lite chromium bubblewrap hub-tools clean a11y-deps js-deps js-check lint docs

# The library with its dev extra, and beside it (editable) the Lite engine and the JupyterLite
# kernel's glue that this repository also builds (packages/pytree-lab-lite, lite_build/kernel):
# the tests compare the engine with JAX and run the glue; pytree-lab itself needs neither.
LITE_PACKAGES := packages/pytree-lab-lite lite_build/kernel
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(LITE_PACKAGES))
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e ".[dev]" $(addprefix -e ,$(LITE_PACKAGES))  # (modules compile as first imported)
	touch $(STAMP)

# Debian's bubblewrap: nbgrader's autograde runs student code in it (docs/grading.md,
# tests/test_nbgrader.py). It needs user namespaces (or root).
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "installing Debian's bubblewrap"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap >/dev/null; }
	@bwrap --unshare-all --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin \
	  true || { echo "error: bwrap cannot make a sandbox here (user namespaces?); see docs/grading.md" >&2; exit 1; }

# Debian's Chromium drives the browser tests (never `playwright install`).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }
	@test -x /usr/bin/chromium || { echo "error: /usr/bin/chromium is missing; browser tests cannot run" >&2; exit 1; }

# The course server: opens the first lesson (not an empty Launcher), shows only the notebooks
# (their text sources in content/src and the tools that build them stay out of the file
# browser), and never asks about Jupyter news. Its Lab settings live in the venv, not in ~.
LAB_SETTINGS := $(VENV)/lab-user-settings
NEWS_OFF     := $(LAB_SETTINGS)/@jupyterlab/apputils-extension/notification.jupyterlab-settings
$(NEWS_OFF):
	mkdir -p $(dir $@)
	printf '{"fetchNews": "false", "checkForUpdates": false}\n' > $@

# The dev extra's nbgrader is the grading side's: its instructor tools are hidden from the course
# server (binder/student-only, in a Jupyter config folder of its own, read before the venv's;
# tests/test_binder.py).
COURSE_CONFIG := $(VENV)/course-jupyter-config
lab: $(STAMP) $(NEWS_OFF)
	@$(PY) tools/build_notebooks.py --check || echo "note: content/*.ipynb differ from content/src (run $(PY) tools/build_notebooks.py to rebuild; it overwrites them)"
	PATH="$(abspath $(VENV))/bin:$$PATH" bash binder/student-only $(COURSE_CONFIG)
	JUPYTER_CONFIG_DIR=$(COURSE_CONFIG) JUPYTER_PREFER_ENV_PATH=0 $(VENV)/bin/jupyter lab --port=$(PORT) --ServerApp.root_dir=content \
	  --LabApp.default_url=/lab/tree/01_pytrees.ipynb \
	  --LabApp.user_settings_dir=$(LAB_SETTINGS) \
	  --ContentsManager.hide_globs='["__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~", "src"]' \
	  $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# configurable-http-proxy (npm) for the JupyterHub smoke test and the hub load benchmark,
# installed into this checkout (.hub-tools/), never globally.
HUB_TOOLS := .hub-tools
CHP       := $(HUB_TOOLS)/node_modules/.bin/configurable-http-proxy
$(CHP):
	npm install --prefix $(HUB_TOOLS) --no-save --no-audit --no-fund configurable-http-proxy@4.6.3
hub-tools: $(CHP)

# axe-core (npm) for the accessibility test (tests/browser/test_contrast.py), pinned by
# tests/browser/a11y/package-lock.json and installed there; the test injects it into Chromium.
AXE := tests/browser/a11y/node_modules/axe-core/axe.min.js
$(AXE): tests/browser/a11y/package-lock.json
	npm ci --prefix tests/browser/a11y --no-audit --no-fund
a11y-deps: $(AXE)

# TypeScript (npm) type-checks the widgets' ES modules as they ship (// @ts-check and JSDoc
# typedefs applied through @anywidget/types; no build step): pinned by
# tools/jscheck/package-lock.json and installed there, offline afterwards. tests/test_js_types.py
# runs the same tsc, so make test checks them too.
JSCHECK := tools/jscheck
JS_DEPS := $(JSCHECK)/node_modules/.installed
$(JS_DEPS): $(JSCHECK)/package-lock.json
	npm ci --prefix $(JSCHECK) --no-audit --no-fund
	touch $@
js-deps: $(JS_DEPS)

js-check: $(JS_DEPS)
	$(JSCHECK)/node_modules/.bin/tsc --noEmit -p $(JSCHECK)

# The checks (configured in pyproject.toml; docs/lint.md): ruff's lint rules and its layout
# (`ruff format --check`) over the whole tree, mypy over the library, vulture's dead-code check
# over it, tsc over its ES modules; then the shipped Python's lines and tokens per package (tools/sizes.py).
# Any finding fails the target, and so `make test` and CI. ruff and mypy come with the dev
# extra; LINT_PY runs them from another environment (mypy still reads the project venv's
# packages).
LINT_PY ?= $(PY)
lint: $(STAMP) js-check
	$(LINT_PY) -m ruff check .
	$(LINT_PY) -m ruff format --check .
	$(LINT_PY) -m mypy --python-executable $(PY)
	$(LINT_PY) -m vulture
	@$(PY) tools/sizes.py

# pytest-xdist workers on two cores: four for the whole suite (a third of its time waits on
# kernels, servers, pages and graders: 1,488 s against 1,700-1,770 s with three, same day),
# three for the kernel tier, which only computes (148 s against 167 s with four);
# tests/conftest.py says which tests share a worker.
XDIST := -n 4 --no-loadscope-reorder
XDIST_FAST := -n 3 --no-loadscope-reorder
test: $(STAMP) lint chromium bubblewrap hub-tools a11y-deps js-deps
	$(PY) -m pytest $(XDIST)
	$(MAKE) test-pythons

# The quick loop while editing: the kernel tier without its slow tests (tests/conftest.py says
# which test is in which tier). make test runs every tier.
test-fast: $(STAMP) js-deps
	$(PY) -m pytest $(XDIST_FAST) -m "kernel and not slow"

# The kernel tier where JAX sees an accelerator (a TPU, a GPU), in one process, JAX from the
# machine and the rest from a folder of wheels (docs/backends.md); not part of make test.
WHEELS ?= .whl-tpu
.PHONY: test-device
test-device:
	tools/device_tier.sh $(WHEELS)

# The floors job: a fresh .venv-floors on the oldest Python requires-python allows, with the
# oldest jax, optax, ipywidgets, anywidget, bqplot and numpy pyproject.toml allows; runs the
# kernel-side tests of the engine, trees, training and diagram, and the three course notebooks.
test-floors: $(STAMP)
	$(PY) tools/floors.py --venv .venv-floors

# The Pythons job, run by make test after the suite: the guard's and the exercises' tests (they
# lean on how each CPython runs signals, line tracers and its recursion limit) on each CPython in
# PYTHONS besides .venv's, from pyenv: .venv-3.12 and .venv-3.13 with the jax extra and the test
# tools, made once (again when pyproject.toml changes). The classifiers name only the Pythons
# this job and CI run.
PYTHONS      ?= 3.12 3.13
PYENV_ROOT   ?= $(HOME)/.pyenv
PYTHON_TESTS := tests/test_guard.py tests/test_guard_kernel.py tests/test_crash_trees.py \
                tests/test_wrong_answers.py tests/test_exercise_verdicts.py tests/test_exercises.py
PYTHON_DEPS  := pytest pytest-xdist hypothesis ipykernel jupyter_client nbclient nbformat equinox autograd treescope markdown-it-py
test-pythons:
	@set -e; for v in $(PYTHONS); do \
	  venv=.venv-$$v; \
	  if [ ! -f $$venv/.installed ] || [ pyproject.toml -nt $$venv/.installed ] || [ Makefile -nt $$venv/.installed ]; then \
	    py=$$(ls -d $(PYENV_ROOT)/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -1); \
	    [ -n "$$py" ] || { echo "error: no Python $$v in $(PYENV_ROOT)/versions (pyenv install $$v)" >&2; exit 1; }; \
	    $$py -m venv $$venv; \
	    $$venv/bin/python -m pip install --quiet -e ".[jax]" -e packages/pytree-lab-lite $(PYTHON_DEPS); \
	    touch $$venv/.installed; \
	  fi; \
	  echo "== Python $$v"; \
	  $$venv/bin/python -m pytest -p no:cacheprovider -q -n 2 $(PYTHON_TESTS); \
	done

bench: $(STAMP) chromium hub-tools
	$(PY) -m bench

# The JupyterLite site (lite_build/README.md): rebuilt from scratch into lite_build/_output,
# printing what it packed; `make lite` then serves it on 127.0.0.1 and prints the URL
# (LITE_PORT=0 picks a free port). Publish lite_build/_output on any static host.
LITE_PORT ?= 0
LITE_FLAGS ?=
.PHONY: lite-build
lite-build: $(STAMP)
	$(PY) lite_build/build.py $(LITE_FLAGS)

lite: lite-build
	$(PY) lite_build/serve.py lite_build/_output --port $(LITE_PORT)

clean:
	rm -rf $(VENV) .venv-lite .venv-floors .venv-3.12 .venv-3.13 .pytest_cache $(HUB_TOOLS) $(JSCHECK)/node_modules lite_build/_output lite_build/.jupyterlite.doit.db

# The documentation site (docs/: Sphinx + MyST, API reference from the docstrings), warnings
# are errors; tests/test_docs.py builds it the same way, so make test does too.
.PHONY: docs
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html
