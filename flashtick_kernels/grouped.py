"""Grouped attention: the torch backend's path for batches of many short sequences.

The per-sequence loop in reference.py costs ~20 torch ops per sequence per
layer; with 32 streams x (1 advance + 3 question probes) that Python overhead
dominates a CPU forward. Here the whole batch is one gather, one scatter and
one call of torch's fused CPU flash-attention kernel per layer.

Sequences that share a session (an advance and the probes after it, whose
block tables agree) form one *group* (a *unit*: a group is cut into units of at
most MAX_ROWS_PER_GROUP rows). A unit's key columns are its session's prefix
cells, up to the longest prefix any of its sequences attends to, then its
sequences' new tokens laid end to end. Each query row sees the prefix columns
before its own ``prefix_len`` and, causally, the new columns of its own
sequence; an additive bias (0 / -inf) says so. Units are sorted by prefix
length into a few *buckets*, each padded to its own longest prefix. A
bucket's key columns are gathered from the cache into one (Hkv, U, L+R, D)
copy per layer, the new tokens' K/V scattered into it; the plan (indices,
bias) is built once per forward on the host and shared by every layer. Semantics are exactly those of
``paged_attention_loop``; fp32 on CPU runs the flash kernel (it never
materialises the score matrix), other dtypes a padded matmul in fp32.

A single session with a few sequences (a question on one session) stays on
the loop: it reads the prefix in place, and measured in the engine it beats
this path's gather, scatter and plan even at a 64-token prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from flashtick_kernels.metadata import RaggedBatch

MAX_ROWS_PER_GROUP = 128  # longer appends (prefill chunks) go through the tiled loop instead
MIN_GROUPED_SEQS = 8  # one session's sequences are grouped only when there are this many (its cuts' probes)
BUCKET_SLACK, BUCKET_MIN_CELLS = 0.15, 32  # a bucket's prefixes stay within 15% (+32 cells) of its shortest
MAX_SCORE_ELEMENTS = 1 << 25  # (groups x rows x keys) beyond this the padding would cost more than the loop

_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

Unit = tuple[int, int]  # (group id, n-th unit of that group)


@dataclass(frozen=True)
class Bucket:
    """Units of similar prefix length, padded to the same shape: one flash call per layer."""

    num_units: int  # U
    max_prefix: int  # L: prefix key columns per unit (>= 1)
    max_rows: int  # R: query rows (and new key columns) per unit
    key_cells: torch.Tensor  # (U*(L+R),) int64 cache cell of each key column; new columns read cell 0, then overwritten
    new_columns: torch.Tensor  # (U*R,) int64 key column u*(L+R) + L + r of padded row u*R + r
    row_sources: torch.Tensor  # (U*R,) int64 batch row behind padded row u*R + r (padding repeats a covered row)
    row_slots: torch.Tensor  # (T_b,) int64: the bucket's j-th token sits at padded row u*R + r
    masked: torch.Tensor  # (U, R, L+R) bool, True = may not attend
    _bias: dict = field(default_factory=dict, repr=False, compare=False)

    def bias(self, group: int, dtype: torch.dtype) -> torch.Tensor:  # (U, 1, g*R, L+R): 0 or -inf
        """The mask as an additive bias with rows ordered (g, r), built once per forward, not per layer."""
        key = (group, dtype)
        if key not in self._bias:
            zeros = torch.zeros(self.masked.shape, dtype=dtype, device=self.masked.device)
            self._bias[key] = zeros.masked_fill_(self.masked, float("-inf")).repeat(1, group, 1)[:, None]
        return self._bias[key]


@dataclass(frozen=True)
class GroupedPlan:
    buckets: tuple[Bucket, ...]
    tokens: torch.Tensor  # (T_g,) int64: the batch rows this plan covers, bucket after bucket
    loop_seqs: tuple[int, ...]  # sequences left to the per-sequence loop (long appends)


def plan_groups(meta: RaggedBatch, groups: list[int]) -> GroupedPlan | None:
    """The padded layout for this batch's short sequences, or None when the loop is better for all of it.

    A long append (a prefill chunk, a rebuild after a roll, a chunk of many ticks) is left to the loop,
    so one long sequence does not pad every other group to its length; the short probes after it (its
    queries, at their cuts) stay grouped, in units of at most MAX_ROWS_PER_GROUP rows. Units are sorted
    by prefix length into buckets, so a short session is not padded to the longest one's prefix.
    """
    members, loop_seqs = _units(meta, groups)
    prefix = {u: max(meta.prefix_lens[s] for s in seqs) for u, seqs in members.items()}
    n_seqs = sum(len(seqs) for seqs in members.values())
    if not members or (len(members) < 2 and n_seqs < MIN_GROUPED_SEQS):
        return None  # one session, few sequences: the loop reads its prefix in place, with fewer ops
    rows = {u: sum(meta.cu_seqlens[s + 1] - meta.cu_seqlens[s] for s in seqs) for u, seqs in members.items()}
    if len(members) * max(rows.values()) * (max(prefix.values()) + max(rows.values())) > MAX_SCORE_ELEMENTS:
        return None
    built = [_bucket(meta, [(unit, members[unit]) for unit in units], prefix, rows)  # (bucket, its units)
             for units in _by_prefix_length(sorted(members, key=prefix.__getitem__), prefix)]
    tokens = np.concatenate([np.arange(meta.cu_seqlens[s], meta.cu_seqlens[s + 1])
                             for _, units in built for _, seqs in units for s in seqs])
    return GroupedPlan(tuple(bucket for bucket, _ in built), torch.from_numpy(tokens).to(meta.device), loop_seqs)


def _by_prefix_length(units: list[Unit], prefix: dict[Unit, int]) -> list[list[Unit]]:
    """Units (sorted by prefix) cut where padding to the bucket's longest prefix would waste more than
    BUCKET_SLACK of it; the BUCKET_MIN_CELLS allowance keeps short prefixes together, where a bucket's
    own ops per layer would cost more than the padding they save."""
    buckets: list[list[Unit]] = [[]]
    for unit in units:
        first = buckets[-1][0] if buckets[-1] else unit
        if buckets[-1] and prefix[unit] > (1 + BUCKET_SLACK) * prefix[first] + BUCKET_MIN_CELLS:
            buckets.append([])
        buckets[-1].append(unit)
    return buckets


def _bucket(meta: RaggedBatch, members: list[tuple[Unit, list[int]]], prefix: dict[Unit, int], rows: dict[Unit, int]
            ) -> tuple[Bucket, list[tuple[Unit, list[int]]]]:
    """One bucket's padded layout, built on the host in numpy (no per-sequence torch calls)."""
    n_units = len(members)
    max_rows = max(rows[unit] for unit, _ in members)
    max_prefix = max(1, max(prefix[unit] for unit, _ in members))
    width = max_prefix + max_rows  # key columns per unit
    bs = meta.block_size
    cells = np.zeros((n_units, width), dtype=np.int64)
    sources = np.zeros((n_units, max_rows), dtype=np.int64)
    slots: list[np.ndarray] = []
    masked = np.ones((n_units, max_rows, width), dtype=bool)
    causal: dict[int, np.ndarray] = {}
    for u, (unit, seqs) in enumerate(members):
        n_prefix = prefix[unit]
        table = np.asarray(meta.block_tables[seqs[0]][: -(-n_prefix // bs)], dtype=np.int64)
        positions = np.arange(n_prefix)
        cells[u, :n_prefix] = table[positions // bs] * bs + positions % bs
        r = 0
        for s in seqs:
            a, b = meta.cu_seqlens[s], meta.cu_seqlens[s + 1]
            n = b - a
            slots.append(np.arange(u * max_rows + r, u * max_rows + r + n))
            sources[u, r : r + n] = np.arange(a, b)
            masked[u, r : r + n, : meta.prefix_lens[s]] = False
            if n not in causal:
                causal[n] = np.triu(np.ones((n, n), dtype=bool), 1)
            masked[u, r : r + n, max_prefix + r : max_prefix + r + n] = causal[n]
            r += n
        sources[u, r:] = sources[u, 0]  # padded rows: a real row's q/k/v, so every value stays finite
        masked[u, r:, 0] = False  # padded rows see one column, so their (discarded) softmax stays finite
    padded_row = np.arange(n_units * max_rows)
    new_columns = padded_row // max_rows * width + max_prefix + padded_row % max_rows
    as_tensor = lambda array: torch.from_numpy(array).to(meta.device)  # noqa: E731
    bucket = Bucket(n_units, max_prefix, max_rows, as_tensor(cells.reshape(-1)), as_tensor(new_columns),
                    as_tensor(sources.reshape(-1)), as_tensor(np.concatenate(slots)), as_tensor(masked))
    return bucket, members


def _units(meta: RaggedBatch, groups: list[int]) -> tuple[dict[Unit, list[int]], tuple[int, ...]]:
    """(group, unit) -> its non-empty short sequences, in batch order; and the long appends left to the loop."""
    length = lambda s: meta.cu_seqlens[s + 1] - meta.cu_seqlens[s]  # noqa: E731
    by_group: dict[int, list[int]] = {}
    for seq, group in enumerate(groups):
        if length(seq) > 0:
            by_group.setdefault(group, []).append(seq)
    loop_seqs = tuple(s for seqs in by_group.values() for s in seqs if length(s) > MAX_ROWS_PER_GROUP)
    members: dict[Unit, list[int]] = {}
    rows: dict[Unit, int] = {}
    for group, seqs in by_group.items():
        unit = (group, 0)
        for s in seqs:
            if length(s) > MAX_ROWS_PER_GROUP:
                continue
            if rows.get(unit, 0) + length(s) > MAX_ROWS_PER_GROUP:
                unit = (group, unit[1] + 1)
            members.setdefault(unit, []).append(s)
            rows[unit] = rows.get(unit, 0) + length(s)
    return members, loop_seqs


def grouped_attention(
    q: torch.Tensor,  # (T, Hq, D)
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, cells, D)
    v_cache: torch.Tensor,  # (Hkv, cells, D)
    plan: GroupedPlan,
    scale: float,
) -> torch.Tensor:  # (T_g, Hq, D): the rows plan.tokens names, in that order
    outs = [_bucket_attention(q, k_new, v_new, k_cache, v_cache, bucket, scale) for bucket in plan.buckets]
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def _bucket_attention(
    q: torch.Tensor,  # (T, Hq, D)
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, cells, D)
    v_cache: torch.Tensor,  # (Hkv, cells, D)
    bucket: Bucket,
    scale: float,
) -> torch.Tensor:  # (T_b, Hq, D): the bucket's rows, in its order
    _, n_q_heads, head_dim = q.shape
    n_kv = k_new.shape[1]
    group = n_q_heads // n_kv
    U, R = bucket.num_units, bucket.max_rows
    compute = torch.float32  # fp32 math for half inputs too
    keys = _key_columns(k_cache, k_new, bucket).to(compute)  # (U, Hkv, L+R, D)
    values = _key_columns(v_cache, v_new, bucket).to(compute)
    # query rows ordered (g, r) under each kv head: q head h reads kv head h // group
    rows = q.index_select(0, bucket.row_sources).view(U, R, n_kv, group, head_dim)  # (U, R, Hkv, g, D)
    rows = rows.permute(0, 2, 3, 1, 4).reshape(U, n_kv, group * R, head_dim).to(compute)  # (U, Hkv, g*R, D)
    bias = bucket.bias(group, compute)  # (U, 1, g*R, L+R), broadcast over kv heads
    if _FLASH_CPU is not None and q.device.type == "cpu":
        out, _ = _FLASH_CPU(rows, keys, values, 0.0, False, attn_mask=bias, scale=scale)  # (U, Hkv, g*R, D)
    else:
        scores = torch.matmul(rows * scale, keys.transpose(-1, -2)).add_(bias)  # (U, Hkv, g*R, L+R)
        out = torch.matmul(torch.softmax(scores, dim=-1), values)
    out = out.view(U, n_kv, group, R, head_dim).permute(0, 3, 1, 2, 4).reshape(U * R, n_q_heads, head_dim)
    return out.index_select(0, bucket.row_slots).to(q.dtype)


def _key_columns(cache: torch.Tensor, new: torch.Tensor, bucket: Bucket) -> torch.Tensor:  # (U, Hkv, L+R, D)
    """Every unit's key (or value) columns in one copy: its prefix cells, then its new tokens."""
    n_kv, _, head_dim = cache.shape
    columns = cache.index_select(1, bucket.key_cells)  # (Hkv, U*(L+R), D)
    padded = new.index_select(0, bucket.row_sources).transpose(0, 1).to(cache.dtype)  # (Hkv, U*R, D)
    columns.index_copy_(1, bucket.new_columns, padded)
    return columns.view(n_kv, bucket.num_units, -1, head_dim).transpose(0, 1)
