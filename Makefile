# make run     : set up if needed, then the default run (real Fashion-MNIST, offline)
# make test    : set up if needed, then the test suite
# make setup   : Debian data packages, a virtual environment, the pinned install
# make figures : every table, figure and report.md under results/ again, from the committed run directories
# make archive SWEEP=multirun/<preset>/<workload> : copy a sweep's complete runs into results/ (to commit)
# make restore SWEEP=multirun/<preset>/<workload> : the reverse, so the sweep's command resumes on a new machine
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := dataset-fashion-mnist python3-doc
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt-data data run test test-all figures archive restore clean

setup: apt-data $(STAMP) data

# The offline data sets as TFDS data sets in $$TFDS_DATA_DIR (default ~/tensorflow_datasets), once.
data: $(STAMP)
	@$(PY) -c "from echo_experiments.data import sources; sources.prepare_offline(sources.data_dir(None))"

apt-data:
	@dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { \
	  echo "Installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); }

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

run: setup
	$(PY) -m echo_experiments $(ARGS)

# Two workers (pytest-xdist): most tests wait on compilation or a subprocess, one core each.
test: setup
	$(PY) -m pytest -q -n 2 --dist worksteal $(ARGS)

# The slow end-to-end tests too.
test-all: setup
	$(PY) -m pytest -q -n 2 --dist worksteal -m '' $(ARGS)

# Each results/<experiment>/<workload>/runs/ holds the run directories of one sweep; the reporter writes
# that folder's tables, figures and report.md beside them.
figures: setup
	@for runs in results/*/*/runs; do \
	  out=$${runs%/runs}; echo "$$out"; \
	  (cd $$out && $(abspath $(PY)) -m echo_experiments.report runs --out .) || exit 1; \
	done

# archive and restore: a sweep folder multirun/<preset>/<workload> and its committed copy
# results/<preset>/<workload>/runs, which holds only the run files (the reporter reads nothing else): its jobs'
# and those of its timed/ folder (python -m echo_experiments.retime).
RESULTS ?= results
NEED_SWEEP = test -n "$(SWEEP)" || { echo "usage: make $@ SWEEP=multirun/<preset>/<workload>"; exit 2; }
SWEEP_RESULTS = $(RESULTS)/$(notdir $(patsubst %/,%,$(dir $(SWEEP))))/$(notdir $(SWEEP))/runs
RUN_FILES := {config.yaml,metrics.jsonl,summary.json}
JOBS = "$$from"/*/ "$$from"/timed/*/

# Only complete runs (with summary.json). A failed run is no outcome (its command resumes it from its checkpoint,
# which results/ does not keep), so it stays out.
archive:
	@$(NEED_SWEEP)
	@from=$(SWEEP); dest=$(SWEEP_RESULTS); n=0; failed=0; \
	for job in $(JOBS); do \
	  [ -f "$$job/summary.json" ] || continue; \
	  if grep -Eq '"status": *"failed"' "$$job/summary.json"; then failed=$$((failed+1)); continue; fi; \
	  run="$$dest/$${job#$$from/}"; mkdir -p "$$run"; \
	  cp "$$job"/$(RUN_FILES) "$$run"; n=$$((n+1)); \
	done; echo "$$n complete runs -> $$dest"; \
	[ $$failed -eq 0 ] || echo "$$failed failed runs left out: the sweep's command resumes them"

# A sweep's committed runs back into its sweep folder, on a machine that does not have it (a new one, or after
# make clean): run again, the sweep's command leaves them alone and prunes against their bests. A job folder
# already there is not touched (it may hold an interrupted run with its checkpoints).
restore:
	@$(NEED_SWEEP)
	@from=$(SWEEP_RESULTS); n=0; \
	test -d "$$from" || { echo "no committed runs in $$from"; exit 2; }; \
	for run in $(JOBS); do \
	  [ -f "$$run/summary.json" ] || continue; \
	  job="$(SWEEP)/$${run#$$from/}"; [ -e "$$job" ] && continue; \
	  mkdir -p "$$job" && cp "$$run"/$(RUN_FILES) "$$job"; n=$$((n+1)); \
	done; echo "$$n committed runs -> $(SWEEP)"

clean:
	rm -rf $(VENV) runs multirun outputs
