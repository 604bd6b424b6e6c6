# make run   : set up if needed, then the default run (real Fashion-MNIST, offline)
# make test  : set up if needed, then the test suite
# make setup : Debian data packages, a virtual environment, the pinned install
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := dataset-fashion-mnist python3-doc
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt-data run test test-all clean

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

clean:
	rm -rf $(VENV) runs multirun outputs
