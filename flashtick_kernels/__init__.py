"""Compute kernels. Two backends behind one call each: Triton on CUDA, pure torch elsewhere.

``FLASHTICK_KERNELS=torch|triton`` forces a backend (tests use it; on CPU the
Triton backend needs ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import json
import os

import torch

from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.reference import paged_attention_ref, write_kv_ref

__all__ = ["RaggedBatch", "paged_attention", "write_kv", "backend_for", "paged_attention_ref", "write_kv_ref"]


def backend_for(device: torch.device) -> str:
    forced = os.environ.get("FLASHTICK_KERNELS")
    if forced in ("torch", "triton"):
        return forced
    if forced:
        raise ValueError(f'FLASHTICK_KERNELS must be "torch" or "triton", got {json.dumps(forced)}')
    return "triton" if device.type == "cuda" else "torch"


def paged_attention(q, k_new, v_new, k_cache, v_cache, meta: RaggedBatch, scale: float) -> torch.Tensor:
    """Ragged prefix+causal attention over a paged cache; see flashtick_kernels/metadata.py for the contract. On Triton,
    few new tokens over a long prefix (questions on long sessions) go to the split-KV kernel."""
    if backend_for(q.device) == "triton":
        from flashtick_kernels.paged_attention import paged_attention_triton
        from flashtick_kernels.split_kv import split_kv_attention_triton, use_split_kv

        if use_split_kv(meta):
            return split_kv_attention_triton(q, k_new, v_new, k_cache, v_cache, meta, scale)
        return paged_attention_triton(q, k_new, v_new, k_cache, v_cache, meta, scale)
    return paged_attention_ref(q, k_new, v_new, k_cache, v_cache, meta, scale)


def write_kv(k_new, v_new, k_cache, v_cache, meta: RaggedBatch) -> None:
    """Write the advance tokens' K/V into their cells (probe tokens are skipped)."""
    if backend_for(k_new.device) == "triton":
        from flashtick_kernels.kv_write import write_kv_triton

        return write_kv_triton(k_new, v_new, k_cache, v_cache, meta)
    return write_kv_ref(k_new, v_new, k_cache, v_cache, meta)
