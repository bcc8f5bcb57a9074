"""Triton split-KV (flash-decoding) attention: few new tokens per sequence over long paged prefixes.

Contract: exactly ``flashtick_kernels.paged_attention``'s (see flashtick_kernels/metadata.py): sequence i's new tokens,
rows ``cu_seqlens[i]:cu_seqlens[i+1]`` of q, attend to the first ``prefix_lens[i]`` cells of its
paged prefix and causally to the new K/V rows of the same sequence (read from ``k_new``/``v_new``).
Same dtypes, GQA ratios, head_dim, block sizes and strides; the same input checks.

Why a second kernel: the paged kernel runs one program per (sequence, tile of new tokens, kv
head), so a 16-token probe at 32k context is 8 programs walking 32k cells each, on a GPU with
132 SMs. Here the prefix is split into ranges of ``split_cells`` cells, one program each:

    pass 1, grid (sequence, split, kv head): the split's prefix range (the last split also the new
            tokens, causally) -> a partial output normalised by its own softmax sum, and that
            sum's log (log2 units), per row;
    pass 2, grid (sequence, kv head): the partials combined, weighted by exp2(lse - max lse).

``flashtick_kernels.paged_attention`` picks it by shape (``use_split_kv``): at most ``SPLIT_MAX_NEW`` new
tokens in every sequence and a prefix of at least ``SPLIT_MIN_PREFIX`` cells somewhere. The
partials cost (sequences x splits x kv heads x rows x head_dim) fp32 of scratch.

Tested with Triton 3.9.0 under TRITON_INTERPRET=1 (CPU, fp32) against the torch reference
(tests/test_split_kv.py); the CUDA tests there (marked ``gpu``) have not been run on a GPU yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.paged_attention import _LOG2E, _check_inputs, online_softmax_step

SPLIT_MAX_NEW = 16  # new tokens per sequence up to which split-KV is chosen
SPLIT_MIN_PREFIX = 1024  # ... when some prefix is at least this long
SPLIT_CELLS = 512  # prefix cells per split by default


def use_split_kv(meta: RaggedBatch) -> bool:
    """Few query rows over a long prefix: the shape flash-decoding is for (host-side lists, no sync)."""
    return 0 < meta.max_new <= SPLIT_MAX_NEW and max(meta.prefix_lens, default=0) >= SPLIT_MIN_PREFIX


@triton.jit
def _split_kv_partial_kernel(
    q_ptr, k_new_ptr, v_new_ptr, k_cache_ptr, v_cache_ptr, part_o_ptr, part_lse_ptr,
    cu_seqlens_ptr, prefix_lens_ptr, block_tables_ptr,
    qk_scale,  # softmax scale * log2(e)
    head_dim, group, block_size, split_cells, num_splits,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_kch, stride_kcc, stride_kcd,
    stride_vch, stride_vcc, stride_vcd,
    stride_bt,
    stride_po_b, stride_po_s, stride_po_h, stride_po_r,
    stride_pl_b, stride_pl_s, stride_pl_h,
    BLOCK_M: tl.constexpr,  # new tokens of the sequence (all of them: at most SPLIT_MAX_NEW)
    BLOCK_G: tl.constexpr,  # query heads per kv head, padded to a power of two
    BLOCK_N: tl.constexpr,  # keys per inner step
    BLOCK_D: tl.constexpr,  # head_dim padded to a power of two
):  # fmt: skip
    seq = tl.program_id(0)
    split = tl.program_id(1)
    kv_head = tl.program_id(2)
    start = tl.load(cu_seqlens_ptr + seq)
    n_new = tl.load(cu_seqlens_ptr + seq + 1) - start
    prefix_len = tl.load(prefix_lens_ptr + seq)

    # row r: new token r // BLOCK_G, query head kv_head * group + r % BLOCK_G (as in the paged kernel)
    offs_r = tl.arange(0, BLOCK_M * BLOCK_G)
    tok = offs_r // BLOCK_G  # (R,)
    head = kv_head * group + offs_r % BLOCK_G  # (R,)
    row_mask = (tok < n_new) & (offs_r % BLOCK_G < group)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    row_t = (start + tok).to(tl.int64)
    q = tl.load(q_ptr + row_t[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qd,
                mask=row_mask[:, None] & d_mask[None, :], other=0.0)  # (R, BLOCK_D)

    m_i = tl.full([BLOCK_M * BLOCK_G], -1.0e30, dtype=tl.float32)  # running row max, log2 units
    l_i = tl.zeros([BLOCK_M * BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M * BLOCK_G, BLOCK_D], dtype=tl.float32)  # (R, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)

    # 1) this split's range of the paged prefix
    kc_base = k_cache_ptr + kv_head.to(tl.int64) * stride_kch
    vc_base = v_cache_ptr + kv_head.to(tl.int64) * stride_vch
    lo = split * split_cells
    hi = tl.minimum(prefix_len, lo + split_cells)
    for c0 in range(lo, hi, BLOCK_N):
        cell = c0 + offs_n  # (BLOCK_N,)
        n_mask = cell < hi
        block = tl.load(block_tables_ptr + seq * stride_bt + cell // block_size, mask=n_mask, other=0)
        slot = block.to(tl.int64) * block_size + cell % block_size  # (BLOCK_N,) physical cell
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(kc_base + slot[:, None] * stride_kcc + offs_d[None, :] * stride_kcd, mask=kv_mask, other=0.0)
        v = tl.load(vc_base + slot[:, None] * stride_vcc + offs_d[None, :] * stride_vcd, mask=kv_mask, other=0.0)
        m_i, l_i, acc = online_softmax_step(q, k, v, n_mask[None, :], m_i, l_i, acc, qk_scale)

    # 2) the last split also takes the new tokens, causally
    if split == num_splits - 1:
        k_base = k_new_ptr + kv_head.to(tl.int64) * stride_kh
        v_base = v_new_ptr + kv_head.to(tl.int64) * stride_vh
        for j0 in range(0, n_new, BLOCK_N):
            key = j0 + offs_n
            n_mask = key < n_new
            key_t = (start + key).to(tl.int64)
            kv_mask = n_mask[:, None] & d_mask[None, :]
            k = tl.load(k_base + key_t[:, None] * stride_kt + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
            v = tl.load(v_base + key_t[:, None] * stride_vt + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
            causal = (key[None, :] <= tok[:, None]) & n_mask[None, :]
            m_i, l_i, acc = online_softmax_step(q, k, v, causal, m_i, l_i, acc, qk_scale)

    # a split that saw no key (past a short sequence's prefix) has l_i == 0: weight 0 in pass 2
    has_keys = l_i > 0
    lse = tl.where(has_keys, m_i + tl.math.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))  # (R,)
    acc = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    base = seq.to(tl.int64) * stride_po_b + split * stride_po_s + kv_head * stride_po_h
    tl.store(part_o_ptr + base + offs_r[:, None] * stride_po_r + offs_d[None, :], acc)
    tl.store(part_lse_ptr + seq.to(tl.int64) * stride_pl_b + split * stride_pl_s + kv_head * stride_pl_h + offs_r, lse)


@triton.jit
def _split_kv_combine_kernel(
    part_o_ptr, part_lse_ptr, out_ptr, cu_seqlens_ptr,
    head_dim, group, num_splits,
    stride_po_b, stride_po_s, stride_po_h, stride_po_r,
    stride_pl_b, stride_pl_s, stride_pl_h,
    stride_ot, stride_oh, stride_od,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    start = tl.load(cu_seqlens_ptr + seq)
    n_new = tl.load(cu_seqlens_ptr + seq + 1) - start
    offs_r = tl.arange(0, BLOCK_M * BLOCK_G)
    tok = offs_r // BLOCK_G
    head = kv_head * group + offs_r % BLOCK_G
    row_mask = (tok < n_new) & (offs_r % BLOCK_G < group)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    lse_base = part_lse_ptr + seq.to(tl.int64) * stride_pl_b + kv_head * stride_pl_h + offs_r
    o_base = part_o_ptr + seq.to(tl.int64) * stride_po_b + kv_head * stride_po_h + offs_r[:, None] * stride_po_r

    m = tl.full([BLOCK_M * BLOCK_G], -1.0e30, dtype=tl.float32)  # (R,) the largest lse over splits
    for split in range(0, num_splits):
        m = tl.maximum(m, tl.load(lse_base + split * stride_pl_s))
    total = tl.zeros([BLOCK_M * BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M * BLOCK_G, BLOCK_D], dtype=tl.float32)  # (R, BLOCK_D)
    for split in range(0, num_splits):
        w = tl.math.exp2(tl.load(lse_base + split * stride_pl_s) - m)  # (R,) 0 for a split with no keys
        total += w
        acc += w[:, None] * tl.load(o_base + split * stride_po_s + offs_d[None, :])
    acc = acc / tl.where(total > 0, total, 1.0)[:, None]
    row_t = (start + tok).to(tl.int64)
    tl.store(out_ptr + row_t[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :] * stride_od,
             acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & d_mask[None, :])


def split_kv_attention_triton(
    q: torch.Tensor,  # (T, Hq, D) new tokens' queries, RoPE applied
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D)
    v_cache: torch.Tensor,  # (Hkv, num_cells, D)
    meta: RaggedBatch,
    scale: float,
    split_cells: int = SPLIT_CELLS,
) -> torch.Tensor:  # (T, Hq, D) in q's dtype
    """Ragged prefix+causal attention over a paged cache, the prefix split across programs; raises
    ValueError on bad inputs or a sequence of more than SPLIT_MAX_NEW new tokens."""
    _check_inputs(q, k_new, v_new, k_cache, v_cache, meta, scale)
    if meta.max_new > SPLIT_MAX_NEW:
        raise ValueError(f"split-KV attention takes at most {SPLIT_MAX_NEW} new tokens per sequence, got "
                         f"{meta.max_new}: use flashtick_kernels.paged_attention")
    if split_cells < 1:
        raise ValueError(f"split_cells must be >= 1, got {split_cells}")
    n_tokens, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    out = torch.empty_like(q)
    if n_tokens == 0 or n_q_heads == 0 or head_dim == 0:
        return out
    group = n_q_heads // n_kv_heads
    block_g = triton.next_power_of_2(group)
    block_m = max(triton.next_power_of_2(meta.max_new), 16 // block_g, 1)  # >= 16 rows: the smallest dot tile
    block_d = max(triton.next_power_of_2(head_dim), 16)
    block_n = 64 if block_d * q.element_size() <= 256 else 32
    num_splits = max(1, triton.cdiv(max(meta.prefix_lens, default=0), split_cells))
    rows = block_m * block_g
    part_o = torch.empty(meta.num_seqs, num_splits, n_kv_heads, rows, block_d, dtype=torch.float32,
                         device=q.device)  # (B, S, Hkv, R, BLOCK_D) normalised partial outputs
    part_lse = torch.empty(meta.num_seqs, num_splits, n_kv_heads, rows, dtype=torch.float32,
                           device=q.device)  # (B, S, Hkv, R) their log2-sum-exp2
    t = meta.tensors()
    tables = t["block_tables"]
    _split_kv_partial_kernel[(meta.num_seqs, num_splits, n_kv_heads)](
        q, k_new, v_new, k_cache, v_cache, part_o, part_lse,
        t["cu_seqlens"], t["prefix_lens"], tables,
        float(scale) * _LOG2E,
        head_dim, group, meta.block_size, split_cells, num_splits,
        *q.stride(), *k_new.stride(), *v_new.stride(),
        *k_cache.stride(), *v_cache.stride(),
        tables.stride(0),
        *part_o.stride()[:4], *part_lse.stride()[:3],
        BLOCK_M=block_m, BLOCK_G=block_g, BLOCK_N=block_n, BLOCK_D=block_d,
        num_warps=4, num_stages=2,
    )  # fmt: skip
    _split_kv_combine_kernel[(meta.num_seqs, n_kv_heads)](
        part_o, part_lse, out, t["cu_seqlens"],
        head_dim, group, num_splits,
        *part_o.stride()[:4], *part_lse.stride()[:3],
        *out.stride(),
        BLOCK_M=block_m, BLOCK_G=block_g, BLOCK_D=block_d,
        num_warps=4,
    )  # fmt: skip
    return out
