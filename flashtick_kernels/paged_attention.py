"""Triton paged attention: ragged new tokens over a paged prefix plus themselves, causally.

Contract (the same as ``flashtick_kernels.reference.paged_attention_ref``; see flashtick_kernels/metadata.py):
sequence i's new tokens, rows ``cu_seqlens[i]:cu_seqlens[i+1]`` of q, attend to the first
``prefix_lens[i]`` cells of its paged prefix (through its block table) and causally to the
new K/V rows of the same sequence, which are read from ``k_new``/``v_new``, not from the cache.

Supported:
- q/k_new/v_new and both caches in one dtype: fp32, fp16 or bf16; scores, softmax and the
  output accumulator are fp32, the output is in q's dtype. fp32 dots use
  ``input_precision="ieee"`` (no TF32) so fp32 matches the reference to ~1e-6.
- any head_dim >= 1 (padded to the next power of two >= 16 and masked), any GQA ratio
  Hq/Hkv >= 1, any block_size >= 1, any strides (nothing has to be contiguous).
- prefix_len 0, 0 new tokens, 1-token appends (decode), long appends, any mix in a batch.
- probes at cuts: sequences of one session whose ``prefix_lens`` stop short of the cells its
  table holds, some of them written by an advance earlier in the same batch (chunked
  evaluation: a question asked after tick i of a chunk reads the prefix up to tick i only).

Not supported: a cache dtype different from q's (fp8 KV), sliding windows, ALiBi, softcap.
Block ids and prefix lengths are trusted, not bounds-checked on the device: the block
manager owns them and checking would cost a host sync.

Design: one program per (sequence, tile of BLOCK_M new tokens, kv head). The program packs
the tile's tokens x the kv head's whole query-head group into the rows of one tile, so each
K/V tile is loaded once for all heads sharing it (GQA). It runs a flash-attention online
softmax over the prefix in BLOCK_N-cell tiles (each cell's physical slot found through the
block table), then over the new tokens up to the tile's last row with the causal mask.

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
_LOG2E = 1.4426950408889634


@triton.jit
def online_softmax_step(q, k, v, valid, m_i, l_i, acc, qk_scale):
    """One key tile folded into the running softmax: scores of q (R, BLOCK_D) against k (BLOCK_N, BLOCK_D), keys
    where ``valid`` (R, BLOCK_N) is false masked out, in base 2; returns the new (max, sum, accumulator)."""
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale  # (R, BLOCK_N)
    s = tl.where(valid, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])  # (R, BLOCK_N)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
    return m_new, l_i, acc


@triton.jit
def _paged_attention_kernel(
    q_ptr, k_new_ptr, v_new_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    cu_seqlens_ptr, prefix_lens_ptr, block_tables_ptr,
    qk_scale,  # softmax scale * log2(e): exp2 is the native instruction
    head_dim, group, block_size,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_kch, stride_kcc, stride_kcd,
    stride_vch, stride_vcc, stride_vcd,
    stride_ot, stride_oh, stride_od,
    stride_bt,
    BLOCK_M: tl.constexpr,  # new tokens per program
    BLOCK_G: tl.constexpr,  # query heads per kv head, padded to a power of two
    BLOCK_N: tl.constexpr,  # keys per inner step
    BLOCK_D: tl.constexpr,  # head_dim padded to a power of two
):  # fmt: skip
    seq = tl.program_id(0)
    m0 = tl.program_id(1) * BLOCK_M
    kv_head = tl.program_id(2)
    start = tl.load(cu_seqlens_ptr + seq)
    n_new = tl.load(cu_seqlens_ptr + seq + 1) - start
    if m0 >= n_new:  # grid is sized for the longest sequence
        return
    prefix_len = tl.load(prefix_lens_ptr + seq)

    # row r of the tile is new token m0 + r // BLOCK_G, query head kv_head * group + r % BLOCK_G
    offs_r = tl.arange(0, BLOCK_M * BLOCK_G)
    tok = m0 + offs_r // BLOCK_G  # (R,) token index within the sequence
    head = kv_head * group + offs_r % BLOCK_G  # (R,)
    row_mask = (tok < n_new) & (offs_r % BLOCK_G < group)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    row_t = (start + tok).to(tl.int64)

    q_offs = row_t[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qd
    q = tl.load(q_ptr + q_offs, mask=row_mask[:, None] & d_mask[None, :], other=0.0)  # (R, BLOCK_D)

    # finite start so a fully masked key tile gives alpha = exp2(0), never exp2(-inf + inf) = nan
    m_i = tl.full([BLOCK_M * BLOCK_G], -1.0e30, dtype=tl.float32)  # running row max, log2 units
    l_i = tl.zeros([BLOCK_M * BLOCK_G], dtype=tl.float32)  # running row sum of exp2
    acc = tl.zeros([BLOCK_M * BLOCK_G, BLOCK_D], dtype=tl.float32)  # (R, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)

    # 1) the paged prefix: every new token sees all of it
    kc_base = k_cache_ptr + kv_head.to(tl.int64) * stride_kch
    vc_base = v_cache_ptr + kv_head.to(tl.int64) * stride_vch
    for c0 in range(0, prefix_len, BLOCK_N):
        cell = c0 + offs_n  # (BLOCK_N,) logical cell in the sequence
        n_mask = cell < prefix_len
        block = tl.load(block_tables_ptr + seq * stride_bt + cell // block_size, mask=n_mask, other=0)
        slot = block.to(tl.int64) * block_size + cell % block_size  # (BLOCK_N,) physical cell
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(kc_base + slot[:, None] * stride_kcc + offs_d[None, :] * stride_kcd,
                    mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        v = tl.load(vc_base + slot[:, None] * stride_vcc + offs_d[None, :] * stride_vcd,
                    mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        m_i, l_i, acc = online_softmax_step(q, k, v, n_mask[None, :], m_i, l_i, acc, qk_scale)

    # 2) the new tokens, causally: keys past the tile's last token are never needed
    k_base = k_new_ptr + kv_head.to(tl.int64) * stride_kh
    v_base = v_new_ptr + kv_head.to(tl.int64) * stride_vh
    hi = tl.minimum(n_new, m0 + BLOCK_M)
    for j0 in range(0, hi, BLOCK_N):
        key = j0 + offs_n  # (BLOCK_N,) key token index within the sequence
        n_mask = key < hi
        key_t = (start + key).to(tl.int64)
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(k_base + key_t[:, None] * stride_kt + offs_d[None, :] * stride_kd,
                    mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        v = tl.load(v_base + key_t[:, None] * stride_vt + offs_d[None, :] * stride_vd,
                    mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        causal = (key[None, :] <= tok[:, None]) & n_mask[None, :]
        m_i, l_i, acc = online_softmax_step(q, k, v, causal, m_i, l_i, acc, qk_scale)

    # every real row saw at least its own token, so l_i > 0 there; padded rows are not stored
    acc = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_offs = row_t[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :] * stride_od
    tl.store(out_ptr + o_offs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & d_mask[None, :])


def _check_inputs(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: RaggedBatch,
    scale: float,
) -> None:
    named = {"q": q, "k_new": k_new, "v_new": v_new, "k_cache": k_cache, "v_cache": v_cache}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name} must be a 3-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    if q.dtype not in _DTYPES:
        raise ValueError(f"q must be fp32, fp16 or bf16, got {q.dtype}")
    for name, t in named.items():
        if t.dtype != q.dtype:
            raise ValueError(f"{name} is {t.dtype} but q is {q.dtype}: cast them to one dtype")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}: move them to one device")
    check_launchable(q, "q", meta)
    n_tokens, n_q_heads, head_dim = q.shape
    if k_new.shape != v_new.shape or k_new.shape[0] != n_tokens or k_new.shape[2] != head_dim:
        raise ValueError(f"k_new/v_new must be (T={n_tokens}, Hkv, D={head_dim}), got {tuple(k_new.shape)} "
                         f"and {tuple(v_new.shape)}")
    n_kv_heads = k_new.shape[1]
    if n_kv_heads == 0 or n_q_heads % n_kv_heads:
        raise ValueError(f"q heads ({n_q_heads}) must be a multiple of kv heads ({n_kv_heads})")
    if k_cache.shape != v_cache.shape or k_cache.shape[0] != n_kv_heads or k_cache.shape[2] != head_dim:
        raise ValueError(f"k_cache/v_cache must be (Hkv={n_kv_heads}, num_cells, D={head_dim}), got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if n_tokens != meta.num_tokens:
        raise ValueError(f"q has {n_tokens} rows but meta.cu_seqlens covers {meta.num_tokens} tokens")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")


def paged_attention_triton(
    q: torch.Tensor,  # (T, Hq, D) new tokens' queries, RoPE applied
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D)
    v_cache: torch.Tensor,  # (Hkv, num_cells, D)
    meta: RaggedBatch,
    scale: float,
) -> torch.Tensor:  # (T, Hq, D) in q's dtype
    """Ragged prefix+causal attention over a paged cache; raises ValueError on bad inputs."""
    _check_inputs(q, k_new, v_new, k_cache, v_cache, meta, scale)
    n_tokens, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    out = torch.empty_like(q)
    if n_tokens == 0 or n_q_heads == 0 or head_dim == 0:
        return out
    group = n_q_heads // n_kv_heads
    block_g = triton.next_power_of_2(group)
    # ~64 rows per program (tokens x group heads); fewer tokens for decode-sized batches,
    # but at least 16 rows, the smallest tl.dot tile
    block_m = min(max(64 // block_g, 1), triton.next_power_of_2(meta.max_new))
    block_m = max(block_m, 16 // block_g, 1)
    block_d = max(triton.next_power_of_2(head_dim), 16)
    # two (BLOCK_N, BLOCK_D) K/V tiles per pipeline stage: keep a row at <= 256 B so fp32
    # head_dim 128 still fits shared memory with two stages
    block_n = 64 if block_d * q.element_size() <= 256 else 32
    t = meta.tensors()
    tables = t["block_tables"]  # (B, max_blocks) int32
    grid = (meta.num_seqs, triton.cdiv(meta.max_new, block_m), n_kv_heads)
    _paged_attention_kernel[grid](
        q, k_new, v_new, k_cache, v_cache, out,
        t["cu_seqlens"], t["prefix_lens"], tables,
        float(scale) * _LOG2E,
        head_dim, group, meta.block_size,
        *q.stride(), *k_new.stride(), *v_new.stride(),
        *k_cache.stride(), *v_cache.stride(), *out.stride(),
        tables.stride(0),
        BLOCK_M=block_m, BLOCK_G=block_g, BLOCK_N=block_n, BLOCK_D=block_d,
        num_warps=4, num_stages=2,
    )  # fmt: skip
    return out
