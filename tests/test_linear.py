"""The CPU linear formats (engine/models/linear.py) against F.linear, and a bf16-weights engine
against the fp32 one on the same checkpoint."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import tiny_hf_model
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import from_hf_model
from engine.models.linear import (
    KERNEL_CACHE_VARIABLES, OneDNNLinear, TransposedLinear, bf16_linear_supported, fp32_gemm_library, padded_rows,
    prepare_linears, resolve_format,
)
from engine.runner import ModelRunner
from engine.service.config import ConfigError, ServiceConfig
from engine.service.config_model import KERNEL_CACHE
from engine.session import Session

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")
needs_bf16 = pytest.mark.skipif(not bf16_linear_supported(), reason="no oneDNN bf16 on this CPU")


@pytest.mark.parametrize("rows", [1, 3, 16, 100])
@pytest.mark.parametrize("bias", [False, True])
def test_transposed_linear_equals_f_linear(rows: int, bias: bool) -> None:
    torch.manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    x = torch.randn(rows, 96)
    torch.testing.assert_close(TransposedLinear(linear)(x), F.linear(x, linear.weight, linear.bias),
                               atol=1e-5, rtol=1e-5)


@needs_bf16
@needs_onednn
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 100, 513])
@pytest.mark.parametrize("bias", [False, True])
def test_onednn_fp32_linear_equals_f_linear(rows: int, bias: bool) -> None:
    """Exact fp32 (sums in oneDNN's order), also for row counts it pads up to a bucket (17, 100, 513)."""
    torch.manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    x = torch.randn(rows, 96)
    got = OneDNNLinear(linear, torch.float32)(x)
    assert got.shape == (rows, 200) and got.dtype == torch.float32
    torch.testing.assert_close(got, F.linear(x, linear.weight, linear.bias), atol=1e-5, rtol=1e-5)
    # a row's answer does not depend on the rows batched with it (nor on the padding)
    torch.testing.assert_close(OneDNNLinear(linear, torch.float32)(x[-1:]), got[-1:], atol=1e-5, rtol=1e-5)


@needs_onednn
def test_only_small_fp32_weights_keep_a_copy_for_few_rows() -> None:
    """The MKL copy for one- and two-row GEMMs costs memory: small fp32 weights only, never bf16 or big ones."""
    from engine.models.linear import FEW_ROWS_COPY_MAX_BYTES

    small = OneDNNLinear(nn.Linear(256, 688, bias=False), torch.float32)
    assert small.weight_t is not None and small.weight_t.shape == (256, 688)
    side = int((FEW_ROWS_COPY_MAX_BYTES / 4) ** 0.5) + 1
    assert OneDNNLinear(nn.Linear(side, side, bias=False), torch.float32).weight_t is None
    if bf16_linear_supported():
        assert OneDNNLinear(nn.Linear(256, 688, bias=False), torch.bfloat16).weight_t is None


def test_padded_rows_buckets_are_few_and_tight() -> None:
    buckets = {padded_rows(rows) for rows in range(1, 4097)}
    assert len(buckets) <= 130
    assert all(rows <= padded_rows(rows) <= max(rows * 1.25, rows + 3) for rows in range(1, 20_000))
    assert [padded_rows(r) for r in (1, 16, 17, 64, 65, 512, 513, 4097)] == [1, 16, 20, 64, 80, 512, 576, 4352]


def test_float32_resolves_to_one_gemm_library_per_cpu_family() -> None:
    """``float32`` is MKL on Intel (and off x86), oneDNN on other x86 vendors; the two pinned forms stay."""
    assert resolve_format("float32") == f"float32-{fp32_gemm_library()}"
    assert resolve_format("float32-mkl") == "float32-mkl" and resolve_format("bfloat16") == "bfloat16"
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    other_x86 = platform.machine().lower() in ("x86_64", "amd64") and "vendor_id" in cpuinfo \
        and "GenuineIntel" not in cpuinfo
    assert fp32_gemm_library() == ("onednn" if other_x86 and torch.backends.mkldnn.is_available() else "mkl")


@needs_bf16
@pytest.mark.parametrize("rows", [1, 3, 16, 100])
@pytest.mark.parametrize("bias", [False, True])
def test_bf16_linear_is_bf16_products_with_fp32_sums(rows: int, bias: bool) -> None:
    torch.manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    x = torch.randn(rows, 96)
    got = OneDNNLinear(linear, torch.bfloat16)(x)
    assert got.dtype == torch.float32 and got.shape == (rows, 200)
    b = None if linear.bias is None else linear.bias.bfloat16().float()
    expected = F.linear(x.bfloat16().float(), linear.weight.bfloat16().float(), b)  # exact products, fp32 sums
    torch.testing.assert_close(got, expected.bfloat16().float(), atol=1e-2, rtol=1e-2)  # result rounded to bf16


def test_prepare_linears_swaps_every_linear_and_rejects_unknown_formats() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 2)))
    prepare_linears(model, "float32-mkl")
    assert [type(m) for m in model.modules() if type(m) in (nn.Linear, TransposedLinear)] == [TransposedLinear] * 2
    with pytest.raises(ValueError, match="weights must be one of"):
        prepare_linears(model, "int8")


@needs_bf16
def test_bf16_weights_engine_tracks_fp32() -> None:
    hf = tiny_hf_model("llama3")
    tokens = [t % 150 for t in range(3, 200)]
    logits = {}
    for weights in ("float32-mkl", "bfloat16"):
        runner = ModelRunner(from_hf_model(hf, weights=weights), CacheSpec(block_size=16, cells=1024))
        assert runner.kv.tensor.dtype == torch.float32  # activations and KV stay fp32
        engine, session = Engine(runner), Session(weights)
        engine.advance(session, tokens[:150])
        logits[weights] = engine.probe(session, tokens[150:])
    diff = (logits["bfloat16"] - logits["float32-mkl"]).abs().max().item()
    assert diff < 0.05, diff
    assert (logits["bfloat16"].argmax(-1) == logits["float32-mkl"].argmax(-1)).float().mean() > 0.9


@needs_onednn
def test_onednn_fp32_engine_equals_mkl_engine() -> None:
    """The two fp32 GEMM libraries give the same model: prefill, a ragged step and a probe within 1e-4."""
    hf = tiny_hf_model("llama3")
    tokens = [t % 150 for t in range(3, 300)]
    logits = {}
    for weights in ("float32-mkl", "float32-onednn"):
        engine = Engine(ModelRunner(from_hf_model(hf, weights=weights), CacheSpec(block_size=16, cells=1024)))
        session = Session(weights)
        engine.advance(session, tokens[:137])
        for start in range(137, 250, 19):  # odd chunk sizes: padded buckets on the oneDNN side
            engine.advance(session, tokens[start : start + 19])
        logits[weights] = engine.probe(session, tokens[250:])
    torch.testing.assert_close(logits["float32-onednn"], logits["float32-mkl"], atol=1e-4, rtol=1e-4)


# Loads the built-in model from a config as a service does, then runs every oneDNN layer at 3 row buckets twice
KERNEL_CACHE_SCRIPT = """
import json, sys, torch
from engine.models.linear import OneDNNLinear, kernel_cache_summary
from engine.service.config import ServiceConfig
from engine.service.model_and_codec import load_model_and_codec
config = ServiceConfig.from_dict(json.loads(sys.argv[1]))
model, _ = load_model_and_codec(config)
layers = [m for m in model.modules() if isinstance(m, OneDNNLinear)]
for rnd in range(2):
    print("round", rnd, len({(m.in_features, m.out_features) for m in layers}), flush=True)
    for rows in (8, 9, 10):
        for layer in layers:
            layer(torch.zeros(rows, layer.in_features))
    sys.stdout.flush()
print("summary", kernel_cache_summary(), flush=True)
"""


def _kernel_cache_run(model: dict[str, object]) -> tuple[int, int, str]:
    """oneDNN's own count of kernels compiled in the second round (its verbose log's cache misses), the weight
    shapes, and the mirror's summary, from a fresh process: the capacity is read once per process."""
    env = {**os.environ, "ONEDNN_VERBOSE": "profile_create", "PYTHONPATH": str(Path(__file__).parents[1])}
    for name in KERNEL_CACHE_VARIABLES:
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", KERNEL_CACHE_SCRIPT, json.dumps({"model": model})], env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    second = out.index(next(line for line in out if line.startswith("round 1")))
    shapes = int(out[second].split()[2])
    return sum("create:cache_miss" in line for line in out[second:]), shapes, out[-1]


@needs_onednn
def test_kernel_cache_caps_onednn_compiled_kernels() -> None:
    """model.kernel_cache reaches oneDNN before its first kernel: 3 row buckets of 5 weight shapes (15 kernels)
    stay compiled under the default cap and are compiled again, each, under a cap of 8; stats' mirror agrees."""
    misses, shapes, summary = _kernel_cache_run({"weights": "float32-onednn"})
    assert (misses, shapes) == (0, 5), summary
    assert f"'gemm_kernels': 15, 'gemm_kernels_compiled': 15, 'gemm_kernel_cache': {KERNEL_CACHE}" in summary
    misses, _, summary = _kernel_cache_run({"weights": "float32-onednn", "kernel_cache": 8})
    assert misses == 15, summary
    assert "'gemm_kernels': 8, 'gemm_kernels_compiled': 30, 'gemm_kernel_cache': 8" in summary


def test_kernel_cache_must_be_a_positive_count() -> None:
    with pytest.raises(ConfigError, match="model.kernel_cache must be an integer >= 1, got 0"):
        ServiceConfig.from_dict({"model": {"kernel_cache": 0}})
