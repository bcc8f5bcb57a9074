"""Triton KV write: scatter the advance tokens' K/V rows into their cache cells.

Contract (the same as ``flashtick_kernels.reference.write_kv_ref``): for every token t with
``slot_mapping[t] >= 0``, ``k_cache[h, slot_mapping[t]] = k_new[t, h]`` (and likewise V)
for every kv head h; tokens with ``slot_mapping[t] == -1`` (probe tokens) are skipped.

Supported: k_new/v_new in fp32, fp16 or bf16, caches in any of those (values are cast to
the cache dtype on store), any head_dim >= 1 (padded to a power of two and masked), any
strides. Not supported: fp8/quantized caches. Slots are trusted, not bounds-checked on the
device (the block manager owns them); if two tokens name one cell, which one wins is
unspecified, as in the reference.

Design: one program per (tile of BLOCK_T tokens, kv head) copies a (BLOCK_T, BLOCK_D)
tile of K and of V; masked-off rows (slot -1, or past T) neither load nor store.

Tested with Triton 3.9.0 under TRITON_INTERPRET=1 (CPU, fp32). The CUDA tests in
tests/test_kernels.py (marked ``gpu``, fp32 and bf16) have not been run on a GPU yet.
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl

from flashtick_kernels.launch import DTYPES as _DTYPES
from flashtick_kernels.launch import check_launchable
from flashtick_kernels.metadata import RaggedBatch

# jit() picks the interpreter at decoration time, so this module's kernels are interpreted
# exactly when this was set at import; CPU tensors are only valid then.


@triton.jit
def _write_kv_kernel(
    k_new_ptr, v_new_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    n_tokens, head_dim,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_kch, stride_kcc, stride_kcd,
    stride_vch, stride_vcc, stride_vcd,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    head = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    slot = tl.load(slot_mapping_ptr + offs_t, mask=offs_t < n_tokens, other=-1)  # (BLOCK_T,) int64
    mask = (slot >= 0)[:, None] & (offs_d < head_dim)[None, :]  # (BLOCK_T, BLOCK_D)
    rows = offs_t.to(tl.int64)[:, None]

    k = tl.load(k_new_ptr + rows * stride_kt + head * stride_kh + offs_d[None, :] * stride_kd, mask=mask)
    v = tl.load(v_new_ptr + rows * stride_vt + head * stride_vh + offs_d[None, :] * stride_vd, mask=mask)
    k_dst = k_cache_ptr + head * stride_kch + slot[:, None] * stride_kcc + offs_d[None, :] * stride_kcd
    v_dst = v_cache_ptr + head * stride_vch + slot[:, None] * stride_vcc + offs_d[None, :] * stride_vcd
    tl.store(k_dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def _check_inputs(
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: RaggedBatch,
) -> None:
    named = {"k_new": k_new, "v_new": v_new, "k_cache": k_cache, "v_cache": v_cache}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name} must be a 3-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name} must be fp32, fp16 or bf16, got {t.dtype}")
        if t.device != k_new.device:
            raise ValueError(f"{name} is on {t.device} but k_new is on {k_new.device}: move them to one device")
    check_launchable(k_new, "k_new", meta)
    if k_new.shape != v_new.shape:
        raise ValueError(f"k_new and v_new must have one shape, got {tuple(k_new.shape)} and {tuple(v_new.shape)}")
    n_tokens, n_kv_heads, head_dim = k_new.shape
    if k_cache.shape != v_cache.shape or k_cache.shape[0] != n_kv_heads or k_cache.shape[2] != head_dim:
        raise ValueError(f"k_cache/v_cache must be (Hkv={n_kv_heads}, num_cells, D={head_dim}), got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if n_tokens != meta.num_tokens:
        raise ValueError(f"k_new has {n_tokens} rows but meta.slot_mapping has {meta.num_tokens} entries")


def write_kv_triton(
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D), written in place
    v_cache: torch.Tensor,  # (Hkv, num_cells, D), written in place
    meta: RaggedBatch,
) -> None:
    """Write the advance tokens' K/V into their cells; raises ValueError on bad inputs."""
    _check_inputs(k_new, v_new, k_cache, v_cache, meta)
    n_tokens, n_kv_heads, head_dim = k_new.shape
    if n_tokens == 0 or n_kv_heads == 0 or head_dim == 0:
        return
    slots = meta.tensors()["slot_mapping"]  # (T,) int64
    block_t = 16
    block_d = triton.next_power_of_2(head_dim)
    grid = (triton.cdiv(n_tokens, block_t), n_kv_heads)
    _write_kv_kernel[grid](
        k_new, v_new, k_cache, v_cache, slots,
        n_tokens, head_dim,
        *k_new.stride(), *v_new.stride(), *k_cache.stride(), *v_cache.stride(),
        BLOCK_T=block_t, BLOCK_D=block_d,
    )  # fmt: skip
