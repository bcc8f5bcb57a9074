"""Fused elementwise kernels for the decoder layer on CUDA: fewer launches per layer where it is cheap.

    add_rms_norm      r = x + residual; y = weight * rmsnorm(r)      (one read of x and residual)
    silu_mul          silu(gate) * up from the fused gate_up projection
    rope_write_kv     RoPE on q and k in place, and k, v written to their cache cells, in one launch

Each has a pure-torch reference beside it (``*_ref``) with the same contract. The decoder
(engine/models/llama.py) calls these kernels on the Triton backend (CUDA, ``flashtick_kernels.backend_for``) and its
own torch ops elsewhere; tests/test_fused.py runs the whole decoder on the interpreted kernels against
transformers' logits. Supported: fp32, fp16, bf16
(norm statistics and RoPE products in fp32, results in the input dtype, as transformers does); any
hidden size; contiguous last dimension. RoPE is the rotate-half form (Llama, Mistral, Qwen2); head_dim
must be even.

Tested with Triton 3.9.0 under TRITON_INTERPRET=1 (CPU, fp32) against the references
(tests/test_fused.py); the CUDA tests there (marked ``gpu``) have not been run on a GPU yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtick_kernels.launch import DTYPES, check_launchable
from flashtick_kernels.metadata import RaggedBatch


# -- references ---------------------------------------------------------------------------------


def add_rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:  # (T, H) each: normed, and the new residual
    r = x if residual is None else x + residual
    normed = r.float() * torch.rsqrt(r.float().pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(r.dtype), r


def silu_mul_ref(gate_up: torch.Tensor) -> torch.Tensor:  # (T, 2I) -> (T, I)
    gate, up = gate_up.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def rope_write_kv_ref(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_heads: int, n_kv: int,
                      k_cache: torch.Tensor, v_cache: torch.Tensor, meta: RaggedBatch) -> None:
    """``qkv`` (T, Hq + 2 Hkv, D): q and k heads rotated in place; k and v of tokens with a slot written to
    ``k_cache``/``v_cache`` (Hkv, cells, D). ``cos``/``sin`` (T, D/2) in fp32."""
    qk = qkv[:, : n_heads + n_kv]  # (T, Hq+Hkv, D) a view
    x1, x2 = qk.float().chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    qk.copy_(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(qkv.dtype))
    slots = torch.as_tensor(meta.slot_mapping, device=qkv.device)
    write = slots >= 0
    k_cache[:, slots[write]] = qkv[write, n_heads : n_heads + n_kv].transpose(0, 1)
    v_cache[:, slots[write]] = qkv[write, n_heads + n_kv :].transpose(0, 1)


# -- Triton -------------------------------------------------------------------------------------


@triton.jit
def _add_rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, hidden, eps, stride_x, stride_r, stride_o,
                         stride_ro, HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < hidden
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * stride_r + offs, mask=mask, other=0.0)  # the sum in the input dtype
        tl.store(res_out_ptr + row * stride_ro + offs, x, mask=mask)
    xf = x.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / hidden + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    y = w * (xf * rstd).to(x.dtype)
    tl.store(out_ptr + row * stride_o + offs, y, mask=mask)


@triton.jit
def _silu_mul_kernel(gu_ptr, out_ptr, inter, stride_g, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < inter
    gate = tl.load(gu_ptr + row * stride_g + offs, mask=mask, other=0.0)
    up = tl.load(gu_ptr + row * stride_g + inter + offs, mask=mask, other=0.0)
    gf = gate.to(tl.float32)
    silu = (gf / (1.0 + tl.exp(-gf))).to(gate.dtype)  # torch's silu rounds to the input dtype, then multiplies
    tl.store(out_ptr + row * stride_o + offs, silu * up, mask=mask)


@triton.jit
def _rope_write_kv_kernel(qkv_ptr, cos_ptr, sin_ptr, slot_ptr, kc_ptr, vc_ptr, n_heads, n_kv, half,
                          stride_t, stride_h, stride_ct, stride_kch, stride_kcc, stride_vch, stride_vcc,
                          BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)  # q heads, then k heads, then v heads
    offs = tl.arange(0, BLOCK)
    mask = offs < half
    base = qkv_ptr + t * stride_t + h * stride_h
    x1 = tl.load(base + offs, mask=mask, other=0.0)
    x2 = tl.load(base + half + offs, mask=mask, other=0.0)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    if h < n_heads + n_kv:  # q or k: rotate in place
        c = tl.load(cos_ptr + t * stride_ct + offs, mask=mask, other=0.0)
        s = tl.load(sin_ptr + t * stride_ct + offs, mask=mask, other=0.0)
        f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
        x1, x2 = (f1 * c - f2 * s).to(x1.dtype), (f2 * c + f1 * s).to(x1.dtype)
        tl.store(base + offs, x1, mask=mask)
        tl.store(base + half + offs, x2, mask=mask)
        if h >= n_heads and slot >= 0:  # a k head of an advance token: its cell
            cell = kc_ptr + (h - n_heads) * stride_kch + slot * stride_kcc
            tl.store(cell + offs, x1, mask=mask)
            tl.store(cell + half + offs, x2, mask=mask)
    elif slot >= 0:  # a v head: its cell
        cell = vc_ptr + (h - n_heads - n_kv) * stride_vch + slot * stride_vcc
        tl.store(cell + offs, x1, mask=mask)
        tl.store(cell + half + offs, x2, mask=mask)


def _check_2d(name: str, t: torch.Tensor) -> None:
    if t.dim() != 2 or t.dtype not in DTYPES or t.stride(-1) != 1:
        raise ValueError(f"{name} must be a 2-D fp32/fp16/bf16 tensor with a contiguous last dimension, got "
                         f"{tuple(t.shape)} {t.dtype} strides {t.stride()}")


def add_rms_norm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    _check_2d("x", x)
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError(f"residual must match x: {tuple(x.shape)} {x.dtype}, got {tuple(residual.shape)} "
                         f"{residual.dtype}")
    if weight.shape != (x.shape[1],):
        raise ValueError(f"weight must be ({x.shape[1]},), got {tuple(weight.shape)}")
    out = torch.empty_like(x)
    res_out = torch.empty_like(x) if residual is not None else x
    if x.shape[0]:
        _add_rms_norm_kernel[(x.shape[0],)](
            x, residual if residual is not None else x, weight, out, res_out, x.shape[1], float(eps),
            x.stride(0), (residual if residual is not None else x).stride(0), out.stride(0), res_out.stride(0),
            HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out, res_out


def silu_mul_triton(gate_up: torch.Tensor) -> torch.Tensor:
    _check_2d("gate_up", gate_up)
    if gate_up.shape[1] % 2:
        raise ValueError(f"gate_up must hold gate and up halves: an even width, got {gate_up.shape[1]}")
    inter = gate_up.shape[1] // 2
    out = torch.empty(gate_up.shape[0], inter, dtype=gate_up.dtype, device=gate_up.device)
    block = min(1024, triton.next_power_of_2(max(inter, 1)))
    if gate_up.shape[0] and inter:
        _silu_mul_kernel[(gate_up.shape[0], triton.cdiv(inter, block))](
            gate_up, out, inter, gate_up.stride(0), out.stride(0), BLOCK=block)
    return out


def rope_write_kv_triton(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_heads: int, n_kv: int,
                         k_cache: torch.Tensor, v_cache: torch.Tensor, meta: RaggedBatch) -> None:
    if qkv.dim() != 3 or qkv.shape[1] != n_heads + 2 * n_kv or qkv.shape[2] % 2 or qkv.stride(2) != 1:
        raise ValueError(f"qkv must be (T, Hq + 2 Hkv = {n_heads + 2 * n_kv}, even D) with a contiguous last "
                         f"dimension, got {tuple(qkv.shape)} strides {qkv.stride()}")
    if qkv.dtype not in DTYPES or k_cache.dtype != qkv.dtype or v_cache.dtype != qkv.dtype:
        raise ValueError(f"qkv and the caches must share one fp32/fp16/bf16 dtype, got {qkv.dtype}, "
                         f"{k_cache.dtype}, {v_cache.dtype}")
    half = qkv.shape[2] // 2
    if cos.shape != (qkv.shape[0], half) or sin.shape != cos.shape or cos.dtype != torch.float32:
        raise ValueError(f"cos/sin must be fp32 (T={qkv.shape[0]}, D/2={half}), got {tuple(cos.shape)} {cos.dtype}")
    if len(meta.slot_mapping) != qkv.shape[0]:
        raise ValueError(f"meta.slot_mapping has {len(meta.slot_mapping)} entries for {qkv.shape[0]} tokens")
    check_launchable(qkv, "qkv", meta)
    if qkv.shape[0] == 0:
        return
    slots = meta.tensors()["slot_mapping"]
    _rope_write_kv_kernel[(qkv.shape[0], n_heads + 2 * n_kv)](
        qkv, cos, sin, slots, k_cache, v_cache, n_heads, n_kv, half,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        v_cache.stride(0), v_cache.stride(1), BLOCK=triton.next_power_of_2(half))
