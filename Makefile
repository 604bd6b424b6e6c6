# make run     : set up if needed, then the default run (real Fashion-MNIST, offline)
# make test    : set up if needed, then the test suite
# make test-fast : the unit layer alone (tests/unit, two workers, about a minute; tests/NOTES.md)
# make lint   : ruff's checks of the code and its import order (pyproject.toml), as CI runs them
# make setup   : Debian data packages, a virtual environment, the pinned install
# make figures : every table, figure and report.md under results/ again, from the committed run directories, then
#                results/claims.csv, results/autopilot.csv and their README tables (the verdicts, by
#                docs/protocol.md's rules)
# make archive SWEEP=multirun/<preset>/<workload> : copy a sweep's complete runs into results/ (to commit)
# make restore SWEEP=multirun/<preset>/<workload> : the reverse, so the sweep's command resumes on a new machine
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := dataset-fashion-mnist python3-doc
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt-data data run test test-fast test-all lint figures archive restore clean

setup: apt-data $(STAMP) data

# The offline data sets as TFDS data sets in $$TFDS_DATA_DIR (default ~/tensorflow_datasets), once.
data: $(STAMP)
	@$(PY) -c "from echo_experiments.data import sources; sources.prepare_offline(sources.data_dir(None))"

apt-data:
	@dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { \
	  echo "Installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); }

# uv installs the pinned set in about a third of pip's time (on a fresh machine, most of make test's set-up),
# trusting the system's certificates as pip does; pip installs it where uv cannot. Like pip, it compiles the
# packages' bytecode once here: where PYTHONDONTWRITEBYTECODE is set, every process would otherwise compile
# TensorFlow's modules again as it imports them (10.7 s to import the trainer on 2 cores, 5.3 s compiled).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==0.13.9 && $(PY) -m uv pip install -q --system-certs --compile-bytecode --python $(PY) -e '.[dev]' || { \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[dev]'; }
	touch $@

run: setup
	$(PY) -m echo_experiments $(ARGS)

# Three workers on two cores (pytest-xdist): many tests wait on a subprocess starting, a timeout or a signal, and the
# third keeps both cores busy meanwhile. The slowest tests are listed at the end (tests/NOTES.md: its times).
test: setup
	$(PY) -m pytest -q -n 3 --dist worksteal --durations=15 $(ARGS)

# The unit layer alone: one module each, no training run. Two workers: most of its time is Python on one thread
# (collecting alone is 11 s of its CPU), which leaves the second core idle under one worker.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal tests/unit $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .

# The slow end-to-end tests too: what CI runs (.ci/run).
test-all: setup
	$(PY) -m pytest -q -n 3 --dist worksteal -m '' --durations=15 $(ARGS)

# Each results/<experiment>/<workload>/runs/ holds the run directories of one sweep; the reporter writes
# that folder's tables, figures and report.md beside them. The verdicts come last, from all of them.
figures: setup
	@all=$$(ls -d results/*/*/runs | wc -l); i=0; began=$$(date +%s); \
	for runs in results/*/*/runs; do \
	  i=$$((i + 1)); out=$${runs%/runs}; \
	  echo "[$$i/$$all, $$(( $$(date +%s) - began )) s] $$out"; \
	  (cd $$out && $(abspath $(PY)) -m echo_experiments.report runs --out .) || exit 1; \
	done; echo "[verdicts, $$(( $$(date +%s) - began )) s] the claims, the checks and copy worth over every folder"
	@$(PY) -m paper.verdicts results --readme README.md --details docs/reproducing.md

# archive and restore: a sweep folder multirun/<preset>/<workload> and its committed copy
# results/<preset>/<workload>/runs (python -m paper.archive says what each copies).
RESULTS ?= results
NEED_SWEEP = test -n "$(SWEEP)" || { echo "usage: make $@ SWEEP=multirun/<preset>/<workload>"; exit 2; }

archive: $(STAMP)
	@$(NEED_SWEEP)
	@$(PY) -m paper.archive archive $(SWEEP) --results $(RESULTS)

restore: $(STAMP)
	@$(NEED_SWEEP)
	@$(PY) -m paper.archive restore $(SWEEP) --results $(RESULTS)

clean:
	rm -rf $(VENV) runs multirun outputs
