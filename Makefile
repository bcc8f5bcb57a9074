# The README's two commands: `make demo` and `make test`. Both set up a local
# virtualenv on a fresh machine. torch is installed first and pinned, so pip
# never resolves it to a multi-GB CUDA build through a dependency.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.flashtick-installed
TORCH  ?= torch==2.13.0

.PHONY: setup test demo bench gpu-check clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

demo: $(STAMP)
	$(PY) -m engine.cli demo --seconds 20

bench: $(STAMP)
	$(PY) -m benchmarks.query_latency

clean:
	rm -rf $(VENV) build *.egg-info
