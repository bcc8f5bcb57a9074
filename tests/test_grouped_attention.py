"""The torch backend's grouped path equals its per-sequence loop (and so dense attention)."""

from __future__ import annotations

import random

import pytest
import torch

from flashtick_kernels.grouped import plan_groups
from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.reference import paged_attention_loop, paged_attention_ref


def random_grouped_batch(seed: int, n_sessions: int, gqa: int, block_size: int = 8, dtype=torch.float32,
                         long_first: bool = False):
    """Sessions with random prefixes; each has an advance and 0-3 probes that see the advance."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    n_kv, head_dim = 2, 16
    num_blocks = 256
    k_cache = torch.randn(n_kv, num_blocks * block_size, head_dim, dtype=dtype)
    v_cache = torch.randn_like(k_cache)
    free = list(range(num_blocks))
    rng.shuffle(free)
    cu, prefix_lens, tables, slots, groups = [0], [], [], [], []
    for session in range(n_sessions):
        cached = rng.choice([0, 1, 7, 8, 9, 40, 100])
        advance = 200 if long_first and session == 0 else rng.choice([0, 1, 4, 13])
        table = [free.pop() for _ in range(-(-(cached + advance + 1) // block_size))]
        seqs = [(cached, advance, True)] + [(cached + advance, rng.randint(1, 5), False)
                                            for _ in range(rng.randint(0, 3))]
        for prefix, n, writes in seqs:
            cu.append(cu[-1] + n)
            prefix_lens.append(prefix)
            tables.append(table)
            groups.append(session)
            slots += [table[(prefix + i) // block_size] * block_size + (prefix + i) % block_size if writes else -1
                      for i in range(n)]
    T = cu[-1]
    meta = RaggedBatch(cu, prefix_lens, tables, slots, block_size, groups=groups)
    q = torch.randn(T, n_kv * gqa, head_dim, dtype=dtype)
    k = torch.randn(T, n_kv, head_dim, dtype=dtype)
    v = torch.randn(T, n_kv, head_dim, dtype=dtype)
    return q, k, v, k_cache, v_cache, meta


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gqa", [1, 2, 4])
def test_grouped_equals_loop(seed: int, gqa: int) -> None:
    q, k, v, kc, vc, meta = random_grouped_batch(seed, n_sessions=5, gqa=gqa)
    # the advance writes its K/V before attention, exactly as the model does, so probes see it
    rows = [t for t, s in enumerate(meta.slot_mapping) if s >= 0]
    kc[:, [meta.slot_mapping[t] for t in rows]] = k[rows].transpose(0, 1)
    vc[:, [meta.slot_mapping[t] for t in rows]] = v[rows].transpose(0, 1)
    assert plan_groups(meta, meta.groups) is not None
    grouped = paged_attention_ref(q, k, v, kc, vc, meta, 0.25)
    loop = paged_attention_loop(q, k, v, kc, vc, meta, 0.25)
    torch.testing.assert_close(grouped, loop, atol=1e-5, rtol=1e-5)


def test_a_long_append_goes_to_the_loop_and_the_rest_stays_grouped() -> None:
    q, k, v, kc, vc, meta = random_grouped_batch(3, n_sessions=4, gqa=2, long_first=True)
    rows = [t for t, s in enumerate(meta.slot_mapping) if s >= 0]
    kc[:, [meta.slot_mapping[t] for t in rows]] = k[rows].transpose(0, 1)
    vc[:, [meta.slot_mapping[t] for t in rows]] = v[rows].transpose(0, 1)
    plan = plan_groups(meta, meta.groups)
    assert plan is not None and 0 in plan.loop_seqs and plan.tokens.numel() < meta.num_tokens
    torch.testing.assert_close(paged_attention_ref(q, k, v, kc, vc, meta, 0.25),
                               paged_attention_loop(q, k, v, kc, vc, meta, 0.25), atol=1e-5, rtol=1e-5)
    # the last layer's rows only: the long append's last row and every probe's last; the rest of the long
    # append is never attended there
    ends = [b - 1 for a, b in zip(meta.cu_seqlens, meta.cu_seqlens[1:]) if b > a]
    wanted = torch.tensor(ends)
    got = paged_attention_ref(q, k, v, kc, vc, meta, 0.25, rows=wanted)
    torch.testing.assert_close(got, paged_attention_loop(q, k, v, kc, vc, meta, 0.25)[wanted], atol=1e-5, rtol=1e-5)


def test_plan_falls_back_to_the_loop_for_one_session_or_long_appends() -> None:
    meta = RaggedBatch([0, 3, 5], [10, 13], [[0, 1], [0, 1]], [-1] * 5, 8, groups=[7, 7])
    assert plan_groups(meta, meta.groups) is None  # one session: views beat a gather
    long = RaggedBatch([0, 300, 301], [0, 0], [[], []], [-1] * 301, 8, groups=[1, 2])
    assert plan_groups(long, long.groups) is None


def test_bf16_grouped_tracks_fp32() -> None:
    q, k, v, kc, vc, meta = random_grouped_batch(11, n_sessions=4, gqa=2, dtype=torch.bfloat16)
    out = paged_attention_ref(q, k, v, kc, vc, meta, 0.25)
    ref = paged_attention_loop(q.float(), k.float(), v.float(), kc.float(), vc.float(), meta, 0.25)
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


def test_sessions_far_apart_in_length_go_to_separate_buckets_and_match_the_loop() -> None:
    # prefixes of 0-100 cells: padding every session to the longest would waste most of the gather
    q, k, v, kc, vc, meta = random_grouped_batch(5, n_sessions=12, gqa=2)
    rows = [t for t, s in enumerate(meta.slot_mapping) if s >= 0]
    kc[:, [meta.slot_mapping[t] for t in rows]] = k[rows].transpose(0, 1)
    vc[:, [meta.slot_mapping[t] for t in rows]] = v[rows].transpose(0, 1)
    plan = plan_groups(meta, meta.groups)
    assert plan is not None and len(plan.buckets) > 1
    assert sorted(plan.tokens.tolist()) == list(range(meta.num_tokens))  # every row once
    torch.testing.assert_close(paged_attention_ref(q, k, v, kc, vc, meta, 0.25),
                               paged_attention_loop(q, k, v, kc, vc, meta, 0.25), atol=1e-5, rtol=1e-5)
