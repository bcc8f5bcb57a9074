# The README's two commands: `make demo` and `make test`. Both set up a local
# virtualenv on a fresh machine. torch is installed first and pinned, so pip
# never resolves it to a multi-GB CUDA build through a dependency.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.flashtick-installed
TORCH  ?= torch==2.13.0

.PHONY: setup test demo bench bench-peers gpu-check clean

setup: $(STAMP)

# pip compiles every module it installs (~12,000: transformers' 400 model families, ray, sympy; ~60 s of the setup's
# ~115 s of CPU); installed without that, the modules flashtick's commands import are compiled once by importing
# them (~14 s), the rest by Python when first imported
WARM_MODULES := engine.service.cli engine.service.cmd_serve engine.service.cmd_backtest engine.service.cmd_train \
	engine.service.server engine.service.backtest engine.service.evaluate transformers.models.llama.modeling_llama \
	matplotlib.backends.backend_agg

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile "$(TORCH)"
	$(PY) -m pip install -q --no-compile -e '.[test,bench,dbn,ray]'
	PYTHONDONTWRITEBYTECODE= $(PY) -c "import importlib; [importlib.import_module(m) for m in '$(WARM_MODULES)'.split()]"
	touch $(STAMP)

# Three test processes on CI's 2 cores (the tests use one torch thread each): a test waiting on a server, a child
# or a Ray shard leaves its core to another (2026-12-07, one quiet host, back to back: 664 s with 3, 875 and 893 s
# with 2, which kept the cores 71% busy)
TEST_WORKERS ?= 3

# Bytecode written while the tests run (PYTHONDONTWRITEBYTECODE=1, as this machine sets it, is set off): every fresh
# process the tests start (the fork server, Ray's shards, each `python -c`) otherwise compiled flashtick's ~67,000
# lines again (0.95 s of CPU a process, 0.41 s from bytecode), and pytest rewrote every test module again.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup tests

demo: $(STAMP)
	$(PY) -m engine.service.cli demo --seconds 20

bench: $(STAMP)
	$(PY) -m benchmarks.query_latency
	$(PY) -m benchmarks.flash

# The peer comparison (llama.cpp): builds llama-cpp-python from source (10-30 minutes on 2 cores).
bench-peers: $(STAMP)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install -q -e '.[peers]'
	$(PY) -m benchmarks.peers_latency
	$(PY) -m benchmarks.peers_streaming

# On a machine with CUDA: kernel tests on the GPU + workloads 1 and 2 on a ~1B Llama in bf16 (< 8 min).
# No venv and no network: the machine's own python3 with torch, Triton and transformers (see docs/benchmarks.md).
gpu-check:
	PYTHONPATH=. timeout 480 python3 -m benchmarks.gpu_check

clean:
	rm -rf $(VENV) build *.egg-info
