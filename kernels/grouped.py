"""Grouped attention: the torch backend's path for batches of many short sequences.

The per-sequence loop in reference.py costs ~20 torch ops per sequence per
layer; with 32 streams x (1 advance + 3 question probes) that Python overhead
dominates a CPU forward. Here the whole batch is a handful of padded tensor ops.

Sequences that share a session (an advance and the probes after it, whose
block tables agree) form one *group*: the group's prefix K/V is gathered once,
up to the longest prefix any of its sequences attends to, and each query row
masks the columns past its own ``prefix_len``. The group's new tokens are laid
end to end as extra key columns, visible to a row only within its own sequence
and causally. The plan (indices, mask) is built once per forward on the host
and shared by every layer. Semantics are exactly those of ``paged_attention_ref``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from kernels.metadata import RaggedBatch

MAX_ROWS_PER_GROUP = 128  # longer appends (prefill chunks) go through the tiled loop instead
MIN_GROUPED_SEQS = 8  # one session's sequences are grouped only when there are this many (its cuts' probes)
MAX_SCORE_ELEMENTS = 1 << 25  # (groups x rows x keys) beyond this the padding would cost more than the loop


@dataclass(frozen=True)
class GroupedPlan:
    num_groups: int
    max_prefix: int  # Lmax: prefix key columns per group (>= 1)
    max_rows: int  # Rmax: query rows per group
    prefix_cells: torch.Tensor  # (U*Lmax,) int64 cache cells, padded with cell 0 (masked)
    tokens: torch.Tensor  # (T_g,) int64: the batch rows this plan covers
    row_slots: torch.Tensor  # (T_g,) int64: covered token j sits at padded row u*Rmax + r
    masked: torch.Tensor  # (U, Rmax, Lmax+Rmax) bool, True = may not attend
    loop_seqs: tuple[int, ...]  # sequences left to the per-sequence loop (long appends)
    _bias: dict = field(default_factory=dict, repr=False, compare=False)

    def bias(self, group: int, dtype: torch.dtype) -> torch.Tensor:  # (U, g*Rmax, Lmax+Rmax): 0 or -inf
        """The mask as an additive bias with rows ordered (g, r), built once per forward, not per layer."""
        key = (group, dtype)
        if key not in self._bias:
            zeros = torch.zeros(self.masked.shape, dtype=dtype, device=self.masked.device)
            self._bias[key] = zeros.masked_fill_(self.masked, float("-inf")).repeat(1, group, 1)
        return self._bias[key]


def plan_groups(meta: RaggedBatch, groups: list[int]) -> GroupedPlan | None:
    """The padded layout for this batch's short sequences, or None when the loop is better for all of it.

    A long append (a prefill chunk, a rebuild after a roll, a chunk of many ticks) is left to the loop,
    so one long sequence does not pad every other group to its length; the short probes after it (its
    queries, at their cuts) stay grouped, in units of at most MAX_ROWS_PER_GROUP rows.
    """
    by_group: dict[int, list[int]] = {}
    for seq, group in enumerate(groups):
        if meta.cu_seqlens[seq + 1] > meta.cu_seqlens[seq]:
            by_group.setdefault(group, []).append(seq)
    length = lambda s: meta.cu_seqlens[s + 1] - meta.cu_seqlens[s]  # noqa: E731
    loop_seqs = tuple(s for seqs in by_group.values() for s in seqs if length(s) > MAX_ROWS_PER_GROUP)
    members: dict[tuple[int, int], list[int]] = {}  # (group, unit) -> its sequences
    rows: dict[tuple[int, int], int] = {}
    for group, seqs in by_group.items():
        unit = (group, 0)
        for s in seqs:
            if length(s) > MAX_ROWS_PER_GROUP:
                continue
            if rows.get(unit, 0) + length(s) > MAX_ROWS_PER_GROUP:
                unit = (group, unit[1] + 1)
            members.setdefault(unit, []).append(s)
            rows[unit] = rows.get(unit, 0) + length(s)
    if len(members) < 2 and sum(len(seqs) for seqs in members.values()) < MIN_GROUPED_SEQS:
        return None  # one session, few sequences: the loop reads its prefix through zero-copy views
    prefix = {g: max(meta.prefix_lens[s] for s in seqs) for g, seqs in members.items()}
    n_groups, max_rows = len(members), max(rows[g] for g in members)
    max_prefix = max(1, max(prefix.values()))
    if n_groups * max_rows * (max_prefix + max_rows) > MAX_SCORE_ELEMENTS:
        return None
    bs = meta.block_size
    # host-side layout in numpy (no per-sequence torch calls), shipped to the device once
    cells = np.zeros((n_groups, max_prefix), dtype=np.int64)
    tokens: list[np.ndarray] = []
    slots: list[np.ndarray] = []
    masked = np.ones((n_groups, max_rows, max_prefix + max_rows), dtype=bool)
    causal = {}
    for u, (group, seqs) in enumerate(members.items()):
        n_prefix = prefix[group]
        table = np.asarray(meta.block_tables[seqs[0]][: -(-n_prefix // bs)], dtype=np.int64)
        positions = np.arange(n_prefix)
        cells[u, :n_prefix] = table[positions // bs] * bs + positions % bs
        r = 0
        for s in seqs:
            a, b = meta.cu_seqlens[s], meta.cu_seqlens[s + 1]
            n = b - a
            tokens.append(np.arange(a, b))
            slots.append(np.arange(u * max_rows + r, u * max_rows + r + n))
            masked[u, r : r + n, : meta.prefix_lens[s]] = False
            if n not in causal:
                causal[n] = np.triu(np.ones((n, n), dtype=bool), 1)
            masked[u, r : r + n, max_prefix + r : max_prefix + r + n] = causal[n]
            r += n
        masked[u, r:, 0] = False  # padded rows see one column, so their (discarded) softmax stays finite
    device = meta.device
    as_tensor = lambda parts: torch.from_numpy(np.concatenate(parts)).to(device)  # noqa: E731
    return GroupedPlan(n_groups, max_prefix, max_rows, torch.from_numpy(cells.reshape(-1)).to(device),
                       as_tensor(tokens), as_tensor(slots), torch.from_numpy(masked).to(device), loop_seqs)


def grouped_attention(
    q: torch.Tensor,  # (T, Hq, D)
    k_new: torch.Tensor,  # (T, Hkv, D)
    v_new: torch.Tensor,  # (T, Hkv, D)
    k_cache: torch.Tensor,  # (Hkv, cells, D)
    v_cache: torch.Tensor,  # (Hkv, cells, D)
    plan: GroupedPlan,
    scale: float,
) -> torch.Tensor:  # (T_g, Hq, D): the rows plan.tokens names, in that order
    _, n_q_heads, head_dim = q.shape
    n_kv = k_new.shape[1]
    group = n_q_heads // n_kv
    U, L, R = plan.num_groups, plan.max_prefix, plan.max_rows
    compute = torch.float32 if q.dtype != torch.float32 else q.dtype  # fp32 math for half inputs

    def gather_prefix(cache: torch.Tensor) -> torch.Tensor:  # (Hkv, U, L, D), contiguous: no transpose
        return cache.index_select(1, plan.prefix_cells).view(n_kv, U, L, head_dim).to(compute)

    def pad_rows(x: torch.Tensor) -> torch.Tensor:  # (T, H, D) -> (U*R, H, D), zeros in the padding
        covered = x.index_select(0, plan.tokens)  # (T_g, H, D)
        return x.new_zeros(U * R, x.shape[1], head_dim).index_copy_(0, plan.row_slots, covered).to(compute)

    # batch dims ordered (Hkv, U) so the gathered prefix is used as laid out in the cache
    qg = pad_rows(q).view(U, R, n_kv, group, head_dim).permute(2, 0, 3, 1, 4).reshape(n_kv, U, group * R, head_dim)
    qg = qg * scale  # scaling the queries is cheaper than scaling the scores
    k_rows = pad_rows(k_new).view(U, R, n_kv, head_dim).permute(2, 0, 1, 3)  # (Hkv, U, R, D)
    v_rows = pad_rows(v_new).view(U, R, n_kv, head_dim).permute(2, 0, 1, 3)
    scores = torch.cat([torch.matmul(qg, gather_prefix(k_cache).transpose(-1, -2)),
                        torch.matmul(qg, k_rows.transpose(-1, -2))], dim=-1)  # (Hkv, U, g*R, L+R)
    scores.add_(plan.bias(group, scores.dtype))  # broadcast over Hkv
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs[..., :L], gather_prefix(v_cache)).add_(torch.matmul(probs[..., L:], v_rows))
    out = out.view(n_kv, U, group, R, head_dim).permute(1, 3, 0, 2, 4).reshape(U * R, n_q_heads, head_dim)
    return out.index_select(0, plan.row_slots).to(q.dtype)
