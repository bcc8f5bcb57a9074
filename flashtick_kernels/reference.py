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

from flashtick_kernels.grouped import grouped_attention, plan_groups
from flashtick_kernels.metadata import RaggedBatch

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
    rows: torch.Tensor | None = None,  # (R,) int64: only these rows' outputs are wanted (the last layer's)
) -> torch.Tensor:  # (T, Hq, D), or (R, Hq, D) for ``rows``
    plan = meta.memo("grouped", lambda: plan_groups(meta, meta.groups)) if meta.groups is not None else None
    wanted = None if rows is None else meta.memo("wanted_rows", lambda: _wanted_rows(meta, rows))
    if plan is None:
        out = paged_attention_loop(q, k_new, v_new, k_cache, v_cache, meta, scale, wanted=wanted)
    else:
        # many short sequences: a few padded ops instead of a loop per sequence; long appends loop (in the last
        # layer only if a row of theirs is wanted: a chunk of ticks ingested without logits is skipped there)
        out = torch.empty_like(q)
        out.index_copy_(0, plan.tokens, grouped_attention(q, k_new, v_new, k_cache, v_cache, plan, scale))
        out = paged_attention_loop(q, k_new, v_new, k_cache, v_cache, meta, scale, plan.loop_seqs, out, wanted)
    return out if rows is None else out.index_select(0, rows)


def _wanted_rows(meta: RaggedBatch, rows: torch.Tensor) -> list[int | None]:
    """Per sequence, the first row the loop attends for: None when no row of it is wanted, r when the wanted rows
    are its tail r..end (a question's last row; a choice's candidate rows), else its first row (all of them).
    Built once per forward, on the host (one read of ``rows``)."""
    wanted: list[list[int]] = [[] for _ in range(meta.num_seqs)]
    ends = meta.cu_seqlens
    seq = 0
    for row in sorted(rows.tolist()):
        while row >= ends[seq + 1]:
            seq += 1
        wanted[seq].append(row)
    first: list[int | None] = []
    for i, mine in enumerate(wanted):
        tail = bool(mine) and mine == list(range(ends[i + 1] - len(mine), ends[i + 1]))
        first.append(None if not mine else mine[0] if tail else ends[i])
    return first


def paged_attention_loop(
    q: torch.Tensor,  # (T, Hq, D)
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, num_cells, D)
    v_cache: torch.Tensor,  # (Hkv, num_cells, D)
    meta: RaggedBatch,
    scale: float,
    seqs: tuple[int, ...] | None = None,
    out: torch.Tensor | None = None,
    wanted: list[int | None] | None = None,  # per sequence its first row attended, None: none (_wanted_rows)
) -> torch.Tensor:  # (T, Hq, D); rows a sequence's ``wanted`` leaves out are left unset
    """One sequence at a time (all, or ``seqs`` into ``out``): prefixes read through views,
    long appends in query tiles."""
    out = torch.empty_like(q) if out is None else out
    for i in range(meta.num_seqs) if seqs is None else seqs:
        a, b = meta.cu_seqlens[i], meta.cu_seqlens[i + 1]
        start = a if wanted is None else wanted[i]
        if a == b or start is None:
            continue
        runs = meta.prefix_runs(i)
        prefix_k, prefix_v = _prefix_kv(k_cache, runs), _prefix_kv(v_cache, runs)
        if start > a and b - start <= Q_TILE:  # (a longer tail takes the tiled path below, all rows)
            # The wanted tail only: (b - start)/n of the work over the prefix (a 16-token question's last row
            # over a 4k prefix: ~4x less attention in the last layer)
            tail = _attend_last_flash if b - start == 1 and _flash_prefix_ok(q, k_new) else _attend
            out[start:b] = tail(q[start:b], k_new[a:b], v_new[a:b], prefix_k, prefix_v, scale)
            continue
        if _flash_prefix_ok(q, k_new):
            out[a:b] = _attend_flash(q[a:b], k_new[a:b], v_new[a:b], prefix_k, prefix_v, scale)
            continue
        # Query tiles bound the score matrix, (Hkv, g*tile, P+n), during long prefills.
        for t0 in range(a, b, Q_TILE):
            t1 = min(t0 + Q_TILE, b)
            out[t0:t1] = _attend(q[t0:t1], k_new[a:t1], v_new[a:t1], prefix_k, prefix_v, scale)
    return out


# Rows of queries attended at once in one sequence (the matmul path: half precision).
Q_TILE = 256
# fp32 on CPU: every sequence's causal part goes through torch's fused CPU flash kernel too, whatever its
# length: the (Hkv, g*n, P+n) score matrix is never materialised, and even a 1-16 token question over a
# 1k-4k prefix takes ~20-25% less than the matmul causal block and its merge.


def _attend_flash(
    q: torch.Tensor,  # (n, Hq, D) all of a sequence's new tokens
    k_new: torch.Tensor,  # (n, Hkv, D)
    v_new: torch.Tensor,  # (n, Hkv, D)
    prefix_k: list[torch.Tensor],  # views (Hkv, L, D) of the cached prefix
    prefix_v: list[torch.Tensor],
    scale: float,
) -> torch.Tensor:  # (n, Hq, D)
    """A whole sequence through the CPU flash kernel: the prefix runs (fully visible) and the new tokens
    (square, so the kernel's causal mask is exactly ours), merged by their log-sum-exps."""
    n, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    group = n_q_heads // n_kv_heads
    qh = q.transpose(0, 1)  # (Hq, n, D); q head h reads kv head h // group
    kh, vh = k_new.transpose(0, 1), v_new.transpose(0, 1)  # (Hkv, n, D)
    if group > 1:
        kh, vh = kh.repeat_interleave(group, dim=0), vh.repeat_interleave(group, dim=0)  # (Hq, n, D)
    # fp32 only (_flash_prefix_ok): outputs and log-sum-exps need no casts
    o, lse = _FLASH_CPU(qh[None], kh[None], vh[None], 0.0, True, attn_mask=None, scale=scale)
    parts = [(o[0], lse[0])]  # (Hq, n, D), (Hq, n)
    # rows ordered (group, token) per kv head, as _attend lays them out: a view of (Hq, n) order
    qg = qh.reshape(n_kv_heads, group * n, head_dim)
    for k, v in zip(prefix_k, prefix_v):
        o, lse = _FLASH_CPU(qg[None], k[None], v[None], 0.0, False, attn_mask=None, scale=scale)
        parts.append((o[0].reshape(n_q_heads, n, head_dim), lse[0].reshape(n_q_heads, n)))
    return _merge(parts).transpose(0, 1)  # (Hq, n, D) -> (n, Hq, D)


def _merge(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:  # (..., D)
    """Attention over several key parts, each (out (..., D), logsumexp (...)), as one: each part weighted by its
    share of the probability mass. Two parts (the usual case: the new tokens, then a prefix in one run) in
    three ops."""
    if len(parts) == 1:
        return parts[0][0]
    if len(parts) == 2:
        (o_first, lse_first), (o_second, lse_second) = parts
        share = torch.sigmoid(lse_second - lse_first)  # (...): the second part's share
        return torch.lerp(o_first, o_second, share[..., None])
    weights = torch.softmax(torch.stack([lse for _, lse in parts]), dim=0)  # (parts, ...)
    return sum(o * w[..., None] for (o, _), w in zip(parts, weights))


def _attend_last_flash(
    q: torch.Tensor,  # (1, Hq, D) the last of a sequence's new tokens
    k_new: torch.Tensor,  # (m, Hkv, D) all of its new tokens: the last one sees every one
    v_new: torch.Tensor,  # (m, Hkv, D)
    prefix_k: list[torch.Tensor],  # views (Hkv, L, D) of the cached prefix
    prefix_v: list[torch.Tensor],
    scale: float,
) -> torch.Tensor:  # (1, Hq, D)
    """The last row only, through the CPU flash kernel: nothing to mask, so the new tokens are one more fully
    visible part, and the q heads of a kv head are rows of one call (no repeated K/V)."""
    _, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    qg = q.view(n_kv_heads, n_q_heads // n_kv_heads, head_dim)[None]  # (1, Hkv, g, D): q head h reads kv h // g
    keys = [k_new.transpose(0, 1)[None]] + [k[None] for k in prefix_k]  # each (1, Hkv, L, D): new tokens first
    values = [v_new.transpose(0, 1)[None]] + [v[None] for v in prefix_v]
    parts = [_FLASH_CPU(qg, k, v, 0.0, False, attn_mask=None, scale=scale) for k, v in zip(keys, values)]
    return _merge(parts).reshape(1, n_q_heads, head_dim)  # (1, Hkv, g, D) -> (1, Hq, D)


def _attend(
    q: torch.Tensor,  # (n, Hq, D) the last n of the m new tokens seen so far
    k_new: torch.Tensor,  # (m, Hkv, D) new tokens up to and including q's
    v_new: torch.Tensor,  # (m, Hkv, D)
    prefix_k: list[torch.Tensor],  # views (Hkv, L, D) of the cached prefix
    prefix_v: list[torch.Tensor],
    scale: float,
) -> torch.Tensor:  # (n, Hq, D)
    n, n_q_heads, head_dim = q.shape
    n_kv_heads = k_new.shape[1]
    group = n_q_heads // n_kv_heads
    # rows ordered (group, token): row r is query token r % n
    qg = q.view(n, n_kv_heads, group, head_dim).permute(1, 2, 0, 3).reshape(n_kv_heads, group * n, head_dim)
    parts: list[tuple[torch.Tensor, torch.Tensor]] = []  # (out (Hkv, g*n, D), logsumexp (Hkv, g*n)), fp32
    if prefix_k and _flash_prefix_ok(q, prefix_k[0]):
        # The cached prefix is fully visible: torch's CPU flash kernel reads each run in place and
        # returns its log-sum-exp, so the parts merge exactly (fewer passes than matmul+softmax+matmul).
        for k, v in zip(prefix_k, prefix_v):
            o, lse = _FLASH_CPU(qg[None], k[None], v[None], 0.0, False, attn_mask=None, scale=scale)
            parts.append((o[0].float(), lse[0].float()))
        prefix_k, prefix_v = [], []
    parts.append(_attend_matmul(qg, k_new, v_new, prefix_k, prefix_v, scale, n))
    out = _merge(parts).to(q.dtype)  # (Hkv, g*n, D)
    return out.view(n_kv_heads, group, n, head_dim).permute(2, 0, 1, 3).reshape(n, n_q_heads, head_dim)


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _flash_prefix_ok(q: torch.Tensor, k: torch.Tensor) -> bool:
    return _FLASH_CPU is not None and q.device.type == "cpu" and q.dtype == k.dtype == torch.float32


def _attend_matmul(
    qg: torch.Tensor,  # (Hkv, g*n, D) rows ordered (group, token)
    k_new: torch.Tensor,  # (m, Hkv, D)
    v_new: torch.Tensor,  # (m, Hkv, D)
    prefix_k: list[torch.Tensor],  # views (Hkv, L, D) of the prefix still to attend here
    prefix_v: list[torch.Tensor],
    scale: float,
    n: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # out (Hkv, g*n, D) and logsumexp (Hkv, g*n), fp32
    m = k_new.shape[0]
    group = qg.shape[1] // n
    # fp32 math for half-precision inputs: scores and the P.V sum are never rounded to bf16
    upcast = (lambda t: t.float()) if qg.dtype != torch.float32 else (lambda t: t)
    qg = upcast(qg)
    keys = [upcast(k) for k in prefix_k] + [upcast(k_new.transpose(0, 1))]  # each (Hkv, L, D)
    values = [upcast(v) for v in prefix_v] + [upcast(v_new.transpose(0, 1))]
    scores = torch.cat([torch.matmul(qg, k.transpose(1, 2)) for k in keys], dim=-1)  # (Hkv, g*n, P+m)
    scores.mul_(scale)
    # query token t (global index m-n+t) must not see new token j > m-n+t
    future = torch.ones(n, m, dtype=torch.bool, device=qg.device).triu_(m - n + 1)  # (n, m)
    scores[..., scores.shape[-1] - m :].masked_fill_(future.repeat(group, 1), float("-inf"))
    # softmax in place, keeping its log-normaliser for merging with the flash parts
    row_max = scores.amax(dim=-1, keepdim=True)  # (Hkv, g*n, 1); finite: a row always sees itself
    probs = scores.sub_(row_max).exp_()  # (Hkv, g*n, P+m), unnormalised
    total = probs.sum(dim=-1, keepdim=True)
    probs.div_(total)
    lse = (row_max + total.log()).squeeze(-1)  # (Hkv, g*n)
    out = None
    offset = 0
    for v in values:
        part = torch.matmul(probs[..., offset : offset + v.shape[1]], v)  # (Hkv, g*n, D)
        out = part if out is None else out.add_(part)
        offset += v.shape[1]
    return out, lse


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
