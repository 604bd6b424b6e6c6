# make run   : set up if needed, then the default run (real Fashion-MNIST, offline)
# make test  : set up if needed, then the test suite
# make setup : Debian data packages, a virtual environment, the pinned install
# make study : the README's tuned study of the default workload and its report (results/)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := dataset-fashion-mnist python3-doc
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt-data run test test-all study clean

setup: apt-data $(STAMP)

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

test: setup
	$(PY) -m pytest -q $(ARGS)

# The slow end-to-end tests too.
test-all: setup
	$(PY) -m pytest -q -m '' $(ARGS)

# The README's tuned study (about 45 minutes on 2 cores): sweep, then the reporter into results/.
study: setup
	$(PY) -m echo_experiments -m experiment=echo_e2_study_cpu $(ARGS)
	$(PY) -m echo_experiments.report multirun/echo_e2_study_cpu/fashion_mnist --out results/fashion_mnist_study

clean:
	rm -rf $(VENV) runs multirun outputs
