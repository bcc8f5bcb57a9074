"""Pure-torch reference kernels: the CPU backend and the oracle for the Triton kernels.

Layout (one layer): ``k_cache``/``v_cache`` are (n_kv_heads, num_cells, head_dim)
with ``num_cells = num_blocks * block_size``; block ``b`` owns cells
``[b*block_size, (b+1)*block_size)``. Keeping cells contiguous per head lets a
run of physically adjacent blocks be read as a strided view, with no copy.

Supported: any head_dim, GQA ratio Hq/Hkv >= 1, fp32/bf16/fp16 (softmax in
fp32), any mix of prefix lengths (0 included) and new-token counts (0 included).
"""

from __future__ import annotations

import torch

from kernels.metadata import RaggedBatch

# Past this many runs a prefix is gathered into one copy: a Python loop over
# many tiny matmuls costs more than the copy does.
MAX_VIEW_RUNS = 8


def _prefix_kv(cache: torch.Tensor, runs: list[tuple[int, int]]) -> list[torch.Tensor]:
    """Views (Hkv, L_run, D) of the prefix, or a single gathered copy if it is fragmented."""
    if len(runs) <= MAX_VIEW_RUNS:
        return [cache[:, s:e] for s, e in runs]
    cells = torch.cat([torch.arange(s, e) for s, e in runs]).to(cache.device)
    return [cache.index_select(1, cells)]


def paged_attention_ref(
    q: torch.Tensor,  # (T, Hq, D) new tokens' queries, RoPE applied
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D)
    v_cache: torch.Tensor,  # (Hkv, num_cells, D)
    meta: RaggedBatch,
    scale: float,
) -> torch.Tensor:  # (T, Hq, D)
    _, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    group = n_q_heads // n_kv_heads
    out = torch.empty_like(q)
    runs = meta.prefix_runs()
    for i in range(meta.num_seqs):
        a, b = meta.cu_seqlens[i], meta.cu_seqlens[i + 1]
        n = b - a
        if n == 0:
            continue
        # rows ordered (group, token): row r is token r % n
        qi = q[a:b].view(n, n_kv_heads, group, head_dim).permute(1, 2, 0, 3).reshape(n_kv_heads, group * n, head_dim)
        keys = _prefix_kv(k_cache, runs[i]) + [k_new[a:b].transpose(0, 1)]  # each (Hkv, L, D)
        values = _prefix_kv(v_cache, runs[i]) + [v_new[a:b].transpose(0, 1)]
        scores = torch.cat([torch.matmul(qi, k.transpose(1, 2)) for k in keys], dim=-1)  # (Hkv, g*n, P+n)
        scores = scores.float().mul_(scale)
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)  # (n, n) new token j > i
        scores[..., scores.shape[-1] - n :].masked_fill_(future.repeat(group, 1), float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(q.dtype)  # (Hkv, g*n, P+n)
        o = None
        offset = 0
        for v in values:
            part = torch.matmul(probs[..., offset : offset + v.shape[1]], v)  # (Hkv, g*n, D)
            o = part if o is None else o.add_(part)
            offset += v.shape[1]
        out[a:b] = o.view(n_kv_heads, group, n, head_dim).permute(2, 0, 1, 3).reshape(n, n_q_heads, head_dim)
    return out


def write_kv_ref(
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D)
    v_cache: torch.Tensor,  # (Hkv, num_cells, D)
    meta: RaggedBatch,
) -> None:
    rows, cells = meta.write_rows()
    if rows.numel() == 0:
        return
    k_cache.index_copy_(1, cells, k_new.index_select(0, rows).transpose(0, 1).to(k_cache.dtype))
    v_cache.index_copy_(1, cells, v_new.index_select(0, rows).transpose(0, 1).to(v_cache.dtype))
