"""Fused layer kernels (flashtick_kernels/fused.py): references against the model's own ops everywhere; Triton against
the references interpreted on CPU (one worker subprocess, as in test_kernels.py) and compiled on CUDA."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

import pytest
import torch

from flashtick_kernels.fused import add_rms_norm_ref, rope_write_kv_ref, silu_mul_ref
from interpreted import interpreted_tests, worker_main
from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.reference import write_kv_ref
from test_kernels import FP32_TOL, HAVE_TRITON, needs_cuda

BF16_TOL = {"atol": 2e-2, "rtol": 2e-2}


def rope_case(tokens: int, n_heads: int, n_kv: int, dim: int, dtype=torch.float32, device="cpu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    qkv = torch.randn(tokens, n_heads + 2 * n_kv, dim, generator=gen).to(device=device, dtype=dtype)
    angles = torch.rand(tokens, dim // 2, generator=gen) * 6.0
    cells = 4 * tokens + 8
    slots = [t * 3 + 1 if t % 3 else -1 for t in range(tokens)]  # some probes (-1), cells scattered
    meta = RaggedBatch([0, tokens], [0], [list(range(cells // 4 + 1))], slots, 4, device=torch.device(device))
    caches = torch.full((2, n_kv, cells, dim), float("nan")).to(device=device, dtype=dtype)
    return qkv, angles.cos().to(device), angles.sin().to(device), caches, meta


def model_rope_and_write(qkv, cos, sin, n_heads, n_kv, k_cache, v_cache, meta) -> torch.Tensor:
    """What engine/models/llama.py does today, op by op: the oracle for the fused reference."""
    from engine.models.llama import apply_rotary

    # The model's tables span the whole head dim, [cos, cos] and [-sin, sin]; the kernel's are the halves.
    cos_full, sin_full = torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)  # (T, D)
    qk = apply_rotary(qkv[:, : n_heads + n_kv], cos_full[:, None, :].to(qkv.dtype), sin_full[:, None, :].to(qkv.dtype))
    write_kv_ref(qk[:, n_heads:], qkv[:, n_heads + n_kv :], k_cache, v_cache, meta)
    return qk


def test_fused_references_equal_the_models_ops() -> None:
    qkv, cos, sin, caches, meta = rope_case(7, 4, 2, 16)
    expected_caches = caches.clone()
    expected = model_rope_and_write(qkv.clone(), cos, sin, 4, 2, expected_caches[0], expected_caches[1], meta)
    rope_write_kv_ref(qkv, cos, sin, 4, 2, caches[0], caches[1], meta)
    torch.testing.assert_close(qkv[:, :6], expected, **FP32_TOL)
    torch.testing.assert_close(caches, expected_caches, equal_nan=True, **FP32_TOL)
    x, res, w = torch.randn(5, 24), torch.randn(5, 24), torch.randn(24)
    out, r = add_rms_norm_ref(x, w, 1e-6, res)
    torch.testing.assert_close(r, x + res)
    torch.testing.assert_close(out, torch.nn.functional.rms_norm(x + res, (24,), w, 1e-6), **FP32_TOL)
    gu = torch.randn(3, 10)
    torch.testing.assert_close(silu_mul_ref(gu), torch.nn.functional.silu(gu[:, :5]) * gu[:, 5:])


def check_norm(with_residual: bool, hidden: int) -> None:
    from flashtick_kernels.fused import add_rms_norm_triton

    gen = torch.Generator().manual_seed(hidden)
    x, res, w = torch.randn(6, hidden, generator=gen), torch.randn(6, hidden, generator=gen), torch.randn(hidden)
    got = add_rms_norm_triton(x, w, 1e-5, res if with_residual else None)
    want = add_rms_norm_ref(x, w, 1e-5, res if with_residual else None)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, **FP32_TOL)


def check_silu_mul(inter: int) -> None:
    from flashtick_kernels.fused import silu_mul_triton

    gu = torch.randn(4, 2 * inter, generator=torch.Generator().manual_seed(inter))
    torch.testing.assert_close(silu_mul_triton(gu), silu_mul_ref(gu), **FP32_TOL)


def check_rope(n_heads: int, n_kv: int, dim: int) -> None:
    from flashtick_kernels.fused import rope_write_kv_triton

    qkv, cos, sin, caches, meta = rope_case(9, n_heads, n_kv, dim, seed=dim)
    want_qkv, want_caches = qkv.clone(), caches.clone()
    rope_write_kv_ref(want_qkv, cos, sin, n_heads, n_kv, want_caches[0], want_caches[1], meta)
    rope_write_kv_triton(qkv, cos, sin, n_heads, n_kv, caches[0], caches[1], meta)
    torch.testing.assert_close(qkv, want_qkv, **FP32_TOL)
    torch.testing.assert_close(caches, want_caches, equal_nan=True, **FP32_TOL)  # probe tokens wrote nothing


def check_rejects() -> None:
    from flashtick_kernels.fused import add_rms_norm_triton, rope_write_kv_triton, silu_mul_triton

    with pytest.raises(ValueError, match="weight must be"):
        add_rms_norm_triton(torch.randn(2, 8), torch.randn(7), 1e-5)
    with pytest.raises(ValueError, match="even width"):
        silu_mul_triton(torch.randn(2, 7))
    qkv, cos, sin, caches, meta = rope_case(3, 2, 1, 8)
    with pytest.raises(ValueError, match="cos/sin must be fp32"):
        rope_write_kv_triton(qkv, cos[:, :3], sin, 2, 1, caches[0], caches[1], meta)


def decoder_matches_transformers(family: str, device: str) -> None:
    """The whole decoder on the Triton backend (fused RoPE+K/V write, add+norm, SiLU*up, paged attention)
    gives transformers' logits: an advance in two chunks (the second over a prefix, across a block boundary), then a
    probe over the kept cache. (Few tokens: interpreted, each costs ~30 programs a layer.)"""
    from conftest import hf_logits, tiny_hf_model
    from engine.engine import Engine
    from engine.kv_cache import CacheSpec
    from engine.models import from_hf_model
    from engine.runner import ModelRunner
    from engine.session import Session

    hf = tiny_hf_model(family, seed=3, num_hidden_layers=2)
    tokens = [(7 * i + 3) % hf.config.vocab_size for i in range(21)]
    reference = hf_logits(hf, tokens)  # (21, vocab) on CPU
    engine = Engine(ModelRunner(from_hf_model(hf, device=device), CacheSpec(block_size=16, cells=1024)))
    session = Session("s")
    first = engine.advance(session, tokens[:12], logits="all")  # (12, vocab)
    second = engine.advance(session, tokens[12:18], logits="all")  # cells 12-17: across the block boundary at 16
    probed = engine.probe(session, tokens[18:])  # (3, vocab)
    torch.testing.assert_close(torch.cat([first, second, probed]).cpu(), reference, rtol=0, atol=1e-4)


def check_model_fused(family: str) -> None:
    os.environ["FLASHTICK_KERNELS"] = "triton"  # the interpreter runs the Triton backend on CPU tensors
    try:
        decoder_matches_transformers(family, "cpu")
    finally:
        del os.environ["FLASHTICK_KERNELS"]


INTERPRETED_CHECKS: dict[str, Callable[[], None]] = {
    "model-llama3": partial(check_model_fused, "llama3"),
    "model-qwen2-tied": partial(check_model_fused, "qwen2-tied"),  # q/k/v biases
    "norm-residual-24": partial(check_norm, True, 24),
    "norm-plain-100": partial(check_norm, False, 100),
    "silu_mul-5": partial(check_silu_mul, 5),
    "silu_mul-1500": partial(check_silu_mul, 1500),  # more than one program per row
    "rope-gqa2-d16": partial(check_rope, 4, 2, 16),
    "rope-mha-d40": partial(check_rope, 3, 3, 40),
    "rejects": check_rejects,
}


interpreted, test_fused_interpreted = interpreted_tests(__file__, INTERPRETED_CHECKS, HAVE_TRITON)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_cuda_fused_match_references(dtype: torch.dtype) -> None:
    from flashtick_kernels.fused import add_rms_norm_triton, rope_write_kv_triton, silu_mul_triton

    tol = FP32_TOL if dtype == torch.float32 else BF16_TOL
    x, res, w = (torch.randn(33, 2048, device="cuda", dtype=dtype) for _ in range(2)), None, None
    x, res = list(x)
    w = torch.randn(2048, device="cuda", dtype=dtype)
    for got, want in zip(add_rms_norm_triton(x, w, 1e-5, res), add_rms_norm_ref(x, w, 1e-5, res)):
        torch.testing.assert_close(got.float(), want.float(), **tol)
    gu = torch.randn(33, 2 * 8192, device="cuda", dtype=dtype)
    torch.testing.assert_close(silu_mul_triton(gu).float(), silu_mul_ref(gu).float(), **tol)
    qkv, cos, sin, caches, meta = rope_case(33, 32, 8, 128, dtype=dtype, device="cuda")
    want_qkv, want_caches = qkv.clone(), caches.clone()
    rope_write_kv_ref(want_qkv, cos, sin, 32, 8, want_caches[0], want_caches[1], meta)
    rope_write_kv_triton(qkv, cos, sin, 32, 8, caches[0], caches[1], meta)
    torch.testing.assert_close(qkv.float(), want_qkv.float(), **tol)
    torch.testing.assert_close(caches.float(), want_caches.float(), equal_nan=True, **tol)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("family", ["llama3", "qwen2-tied"])
def test_the_decoder_on_cuda_matches_transformers(family: str) -> None:
    decoder_matches_transformers(family, "cuda")  # fp32: TF32 is off for matmuls by default


if __name__ == "__main__":  # the interpreter worker started by the `interpreted` fixture
    worker_main(INTERPRETED_CHECKS)
