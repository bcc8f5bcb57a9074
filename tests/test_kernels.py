"""Kernels: the torch reference against naive dense attention, and the Triton kernels against the reference.

Three tiers:
- reference vs. dense: runs everywhere, pure torch, fast.
- Triton under ``TRITON_INTERPRET=1`` on CPU, fp32: run in one worker subprocess (this
  file as a script), each check reported as its own test; see the section's comment.
- Triton compiled on CUDA (``@pytest.mark.gpu``), fp32 and bf16.

Tolerances:
- fp32: atol 1e-5, rtol 1e-4. Both sides accumulate in fp32 and the kernels' fp32 dots
  are IEEE (no TF32); what differs is the summation order (online softmax vs. one softmax),
  which moves O(1) outputs by ~1e-6 at these lengths: 10x margin, while any real bug
  (wrong cell, wrong mask, wrong head) shows up at >= 1e-2.
- bf16 (GPU): atol = rtol = 2e-2 against the fp32 reference on the same bf16-rounded
  inputs. bf16 keeps 8 mantissa bits (relative step 2^-8 = 3.9e-3); the probabilities and
  the output are each rounded to bf16 once, so errors of ~1e-2 are expected, not bugs.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import pytest
import torch

from interpreted import interpreted_tests, worker_main
from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.reference import paged_attention_ref, write_kv_ref

try:
    import triton  # noqa: F401

    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False

needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton is not importable on this platform")
needs_cuda = pytest.mark.skipif(not (HAVE_TRITON and torch.cuda.is_available()), reason="needs CUDA and triton")

FP32_TOL = {"atol": 1e-5, "rtol": 1e-4}
BF16_TOL = {"atol": 2e-2, "rtol": 2e-2}


class Spec(NamedTuple):
    prefix_lens: list[int]
    new_lens: list[int]
    block_size: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int


class Case(NamedTuple):
    q: torch.Tensor  # (T, Hq, D)
    k_new: torch.Tensor  # (T, Hkv, D)
    v_new: torch.Tensor  # (T, Hkv, D)
    k_cache: torch.Tensor  # (Hkv, num_cells, D)
    v_cache: torch.Tensor  # (Hkv, num_cells, D)
    meta: RaggedBatch
    scale: float


def make_case(spec: Spec, seed: int, *, dtype: torch.dtype = torch.float32, device: str = "cpu",
              fused_qkv: bool = False, contiguous_blocks: bool = False) -> Case:
    """A seeded ragged batch. Cache cells outside every prefix are NaN, so reading one is loud.

    Even sequences advance (their new tokens get the cells after their prefix), odd ones
    probe (slot -1). ``fused_qkv`` makes q/k/v strided views of one (T, Hq+2Hkv, D) tensor.
    """
    gen = torch.Generator().manual_seed(seed)
    bs, hq, hkv, d = spec.block_size, spec.n_q_heads, spec.n_kv_heads, spec.head_dim
    need = [-(-(p + n) // bs) for p, n in zip(spec.prefix_lens, spec.new_lens)]
    n_blocks = sum(need) + 2  # spare blocks that no sequence owns
    order = list(range(n_blocks)) if contiguous_blocks else torch.randperm(n_blocks, generator=gen).tolist()
    tables, slots, cu = [], [], [0]
    for i, (p, n, k) in enumerate(zip(spec.prefix_lens, spec.new_lens, need)):
        table, order = order[:k], order[k:]
        tables.append(table)
        cu.append(cu[-1] + n)
        slots += [table[c // bs] * bs + c % bs if i % 2 == 0 else -1 for c in range(p, p + n)]
    meta = RaggedBatch(cu, list(spec.prefix_lens), tables, slots, bs, device=torch.device(device))

    n_tokens = cu[-1]
    qkv = torch.randn(n_tokens, hq + 2 * hkv, d, generator=gen)  # (T, Hq+2Hkv, D)
    caches = torch.full((2, hkv, n_blocks * bs, d), float("nan"))  # (2, Hkv, num_cells, D)
    for table, p in zip(tables, spec.prefix_lens):
        cells = torch.tensor([table[c // bs] * bs + c % bs for c in range(p)], dtype=torch.long)
        caches[:, :, cells] = torch.randn(2, hkv, p, d, generator=gen)
    qkv, caches = qkv.to(device=device, dtype=dtype), caches.to(device=device, dtype=dtype)
    q, k_new, v_new = qkv.split([hq, hkv, hkv], dim=1)
    if not fused_qkv:
        q, k_new, v_new = q.contiguous(), k_new.contiguous(), v_new.contiguous()
    return Case(q, k_new, v_new, caches[0], caches[1], meta, d**-0.5)


def dense_attention(case: Case) -> torch.Tensor:  # (T, Hq, D), in float64
    """The contract spelled out naively: gather, concatenate, full mask, repeat_interleave."""
    q, k_new, v_new, k_cache, v_cache, meta, scale = case
    group = q.shape[1] // k_new.shape[1]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for i in range(meta.num_seqs):
        a, b, p, bs = meta.cu_seqlens[i], meta.cu_seqlens[i + 1], meta.prefix_lens[i], meta.block_size
        cells = torch.tensor([meta.block_tables[i][c // bs] * bs + c % bs for c in range(p)], dtype=torch.long)
        keys = torch.cat([k_cache[:, cells].transpose(0, 1), k_new[a:b]]).double()  # (P+n, Hkv, D)
        values = torch.cat([v_cache[:, cells].transpose(0, 1), v_new[a:b]]).double()
        keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)  # (P+n, Hq, D)
        scores = torch.einsum("thd,shd->hts", q[a:b].double(), keys) * scale  # (Hq, n, P+n)
        t = torch.arange(b - a)[:, None]
        s = torch.arange(p + b - a)[None, :]
        allowed = (s < p) | (s - p <= t)  # (n, P+n): the whole prefix, then causal
        probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        out[a:b] = torch.einsum("hts,shd->thd", probs, values)
    return out


def random_spec(rng: random.Random) -> Spec:
    n_seqs = rng.randint(1, 5)
    hkv, group = rng.choice([1, 2]), rng.choice([1, 2, 3])
    return Spec(
        prefix_lens=[rng.choice([0, rng.randint(1, 150)]) for _ in range(n_seqs)],
        new_lens=[rng.choice([0, 1, rng.randint(1, 12)]) for _ in range(n_seqs)],
        block_size=rng.choice([1, 4, 16]),  # bs 4 with long prefixes: > MAX_VIEW_RUNS runs, the gather path
        n_q_heads=hkv * group,
        n_kv_heads=hkv,
        head_dim=rng.choice([8, 24]),
    )


# ---------------------------------------------------------------- reference vs. dense (everywhere)


@pytest.mark.parametrize("seed", range(24))
def test_reference_matches_dense_attention(seed: int) -> None:
    spec = random_spec(random.Random(seed))
    case = make_case(spec, seed, fused_qkv=seed % 3 == 0, contiguous_blocks=seed % 2 == 1)
    got = paged_attention_ref(*case)
    torch.testing.assert_close(got.double(), dense_attention(case), **FP32_TOL)


def test_reference_matches_dense_on_long_appends() -> None:
    # hundreds of new tokens: past any query tiling the reference may do on long prefills
    case = make_case(Spec([40, 0, 7], [300, 5, 270], 16, 4, 2, 16), seed=99, fused_qkv=True)
    torch.testing.assert_close(paged_attention_ref(*case).double(), dense_attention(case), **FP32_TOL)


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_attends_for_the_wanted_rows_only(seed: int, dtype: torch.dtype) -> None:
    # The last layer asks for its logit rows only: each sequence's last row (a question's answer), a few
    # rows, or none of a sequence; what comes back equals those rows of the whole computation
    rng = random.Random(1000 + seed)
    spec = random_spec(rng)
    case = make_case(spec, seed, dtype=dtype, fused_qkv=seed % 2 == 0)
    cu = case.meta.cu_seqlens
    pick = [rng.choice(["last", "none", "some", "tail"]) for _ in range(case.meta.num_seqs)]
    if seed < 4:
        pick = ["last"] * case.meta.num_seqs
    rows = []
    for (a, b), how in zip(zip(cu, cu[1:]), pick):
        if a < b:
            if how == "tail":  # a choice's candidate rows: the last k
                rows += list(range(b - rng.randint(1, b - a), b))
            else:
                rows += [b - 1] if how == "last" else [] if how == "none" else \
                    sorted(rng.sample(range(a, b), rng.randint(1, b - a)))
    rows_t = torch.tensor(rows, dtype=torch.int64)
    got = paged_attention_ref(*case, rows=rows_t)  # (R, Hq, D)
    assert got.shape == (len(rows), *case.q.shape[1:])
    tol = FP32_TOL if dtype == torch.float32 else BF16_TOL
    torch.testing.assert_close(got.double(), dense_attention(case)[rows_t], **tol)


def test_reference_write_kv_fills_advance_cells_only() -> None:
    case = make_case(Spec([5, 3, 0], [4, 2, 3], 4, 2, 2, 8), seed=0)
    k_cache, v_cache = case.k_cache.clone(), case.v_cache.clone()
    write_kv_ref(case.k_new, case.v_new, k_cache, v_cache, case.meta)
    for t, slot in enumerate(case.meta.slot_mapping):
        if slot >= 0:
            assert torch.equal(k_cache[:, slot], case.k_new[t]) and torch.equal(v_cache[:, slot], case.v_new[t])
    untouched = torch.ones(k_cache.shape[1], dtype=torch.bool)
    untouched[[s for s in case.meta.slot_mapping if s >= 0]] = False
    torch.testing.assert_close(k_cache[:, untouched], case.k_cache[:, untouched], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("n", [1, 5, 16, 300])
def test_matmul_path_equals_flash_path(n: int) -> None:
    """fp32 on CPU attends through the flash kernel; the matmul path (half precision) must agree with it."""
    from flashtick_kernels.reference import Q_TILE, _attend, _attend_flash

    gen = torch.Generator().manual_seed(n)
    hkv, group, d = 2, 3, 16
    cache = torch.randn(2, hkv, 400, d, generator=gen)  # (2, Hkv, cells, D)
    runs = [(0, 37), (100, 164), (300, 301)]  # a fragmented prefix: three runs, one a single cell
    prefix_k, prefix_v = [cache[0][:, s:e] for s, e in runs], [cache[1][:, s:e] for s, e in runs]
    q = torch.randn(n, hkv * group, d, generator=gen)
    k_new, v_new = torch.randn(2, n, hkv, d, generator=gen)
    tiled = torch.cat([_attend(q[t0 : t0 + Q_TILE], k_new[: t0 + Q_TILE], v_new[: t0 + Q_TILE], prefix_k, prefix_v,
                               0.25)
                       for t0 in range(0, n, Q_TILE)])
    torch.testing.assert_close(tiled, _attend_flash(q, k_new, v_new, prefix_k, prefix_v, 0.25), **FP32_TOL)


def make_cut_case(seed: int, block_size: int = 16, with_groups: bool = True) -> Case:
    """Chunked evaluation's batch: per session an advance of ``n`` tokens after a cached prefix ``p``, then
    probes at cuts inside it (prefix length = the cut: the session's first ``cut`` cells, some written by
    that advance in this very forward). The cache holds real values past every cut, so a probe that read
    one would differ, not just turn NaN. Cells are as after the write (the model writes before attending)."""
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    hq, hkv, d, bs = 4, 2, 16, block_size
    sessions = [(rng.randint(0, 40), rng.randint(8, 60)) for _ in range(3)]  # (cached p, advanced n)
    n_blocks = sum(-(-(p + n) // bs) for p, n in sessions) + 1
    order = torch.randperm(n_blocks, generator=gen).tolist()
    caches = torch.full((2, hkv, n_blocks * bs, d), float("nan"))  # (2, Hkv, num_cells, D)
    cu, prefix, tables, slots, groups, rows = [0], [], [], [], [], []
    for sid, (p, n) in enumerate(sessions):
        k = -(-(p + n) // bs)
        table, order = order[:k], order[k:]
        cells = [table[c // bs] * bs + c % bs for c in range(p + n)]
        kv = torch.randn(2, hkv, p + n, d, generator=gen)  # the prefix, then the advance's own K/V
        caches[:, :, cells] = kv
        cuts = sorted(rng.sample(range(p, p + n + 1), 3)) + [rng.randint(0, p)]  # one cut inside the old prefix
        for start, length, writes in [(p, n, True)] + [(c, rng.randint(1, 5), False) for c in cuts]:
            cu.append(cu[-1] + length)
            prefix.append(start)
            tables.append(table)
            slots += cells[p : p + n] if writes else [-1] * length
            groups.append(sid)
            rows.append((writes, kv[:, :, p : p + n] if writes else None, length))
    meta = RaggedBatch(cu, prefix, tables, slots, bs, groups=groups if with_groups else None)
    q = torch.randn(cu[-1], hq, d, generator=gen)  # (T, Hq, D)
    k_new, v_new = torch.randn(2, cu[-1], hkv, d, generator=gen)  # (T, Hkv, D) each
    for i, (writes, kv, length) in enumerate(rows):
        if writes:  # an advance's new rows are the K/V it wrote
            k_new[cu[i] : cu[i + 1]] = kv[0].transpose(0, 1)
            v_new[cu[i] : cu[i + 1]] = kv[1].transpose(0, 1)
    return Case(q, k_new, v_new, caches[0], caches[1], meta, d**-0.5)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_groups", [True, False], ids=["grouped", "loop"])
def test_reference_probes_at_cuts_match_dense(seed: int, with_groups: bool) -> None:
    case = make_cut_case(seed, block_size=[16, 4, 1][seed % 3], with_groups=with_groups)
    torch.testing.assert_close(paged_attention_ref(*case).double(), dense_attention(case), **FP32_TOL)


def check_attention_probe_cuts(seed: int) -> None:
    from flashtick_kernels.paged_attention import paged_attention_triton

    case = make_cut_case(seed, block_size=16 if seed % 2 else 4)
    torch.testing.assert_close(paged_attention_triton(*case), paged_attention_ref(*case), **FP32_TOL)


# ---------------------------------------------------------------- Triton, interpreted on CPU
#
# The checks below run in one worker subprocess (this file run as a script) with TRITON_INTERPRET=1;
# tests/interpreted.py says why. Each check is reported as its own pytest test.

ATTENTION_SPECS = {
    # a batch mixing: no prefix, prefix crossing a block, 0 new tokens, 1-token appends
    "mixed_gqa1": Spec([0, 20, 37, 5, 0], [3, 1, 20, 0, 1], 16, 2, 2, 32),
    "gqa2_bs32_boundaries": Spec([33, 64, 0, 31], [1, 17, 5, 2], 32, 4, 2, 64),
    "gqa8_hd128": Spec([50, 0], [1, 9], 16, 8, 1, 128),
    "long_append": Spec([70, 0], [260, 3], 16, 2, 1, 32),
    "decode_batch": Spec([1, 15, 16, 17, 100], [1, 1, 1, 1, 1], 16, 4, 4, 64),
    # non-power-of-two head_dim, group and block size: the padded, masked paths
    "odd_sizes": Spec([13, 0, 29], [7, 4, 1], 12, 6, 2, 40),
}
SMALL = Spec([3], [2], 4, 4, 2, 16)


def check_attention(spec: Spec, fused_qkv: bool) -> None:
    from flashtick_kernels.paged_attention import paged_attention_triton

    case = make_case(spec, seed=1, fused_qkv=fused_qkv)
    got = paged_attention_triton(*case)
    assert got.shape == case.q.shape and got.dtype == case.q.dtype
    torch.testing.assert_close(got, paged_attention_ref(*case), **FP32_TOL)


def check_attention_empty_batch() -> None:
    from flashtick_kernels.paged_attention import paged_attention_triton

    assert paged_attention_triton(*make_case(Spec([4, 0], [0, 0], 16, 2, 1, 32), seed=2)).shape == (0, 2, 32)


def check_write_kv(dtype: torch.dtype) -> None:
    # Same dtype in and out only: the interpreter truncates fp32 -> bf16 where the GPU rounds
    # to nearest even, so the casting store is checked exactly on CUDA only.
    from flashtick_kernels.kv_write import write_kv_triton

    case = make_case(Spec([5, 16, 0, 40], [4, 2, 19, 1], 16, 4, 2, 40), seed=3, dtype=dtype, fused_qkv=True)
    expected = [case.k_cache.clone(), case.v_cache.clone()]
    write_kv_ref(case.k_new, case.v_new, *expected, case.meta)
    write_kv_triton(case.k_new, case.v_new, case.k_cache, case.v_cache, case.meta)
    torch.testing.assert_close(case.k_cache, expected[0], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(case.v_cache, expected[1], rtol=0, atol=0, equal_nan=True)


def bad_attention_inputs(case: Case) -> dict[str, tuple[tuple, str]]:
    """Attention launcher arguments broken one way each -> the message the ValueError must carry."""
    q, k, v, kc, vc, meta, scale = case
    other = RaggedBatch(meta.cu_seqlens, meta.prefix_lens, meta.block_tables, meta.slot_mapping,
                        meta.block_size, device=torch.device("meta"))
    return {
        "rank": ((q[0], k, v, kc, vc, meta, scale), "3-D"),
        "int_dtype": ((q.int(), k, v, kc, vc, meta, scale), "fp32, fp16 or bf16"),
        "dtype_mix": ((q, k.double(), v, kc, vc, meta, scale), "cast them to one dtype"),
        "group": ((q[:, :3], k, v, kc, vc, meta, scale), "multiple of kv heads"),
        "kv_shape": ((q, k, v[:, :, :8], kc, vc, meta, scale), "k_new/v_new must be"),
        "cache_shape": ((q, k, v, kc[:, :, :8], vc, meta, scale), "k_cache/v_cache must be"),
        "tokens": ((q[:-1], k[:-1], v[:-1], kc, vc, meta, scale), "covers"),
        "meta_device": ((q, k, v, kc, vc, other, scale), "RaggedBatch\\(device="),
        "scale": ((q, k, v, kc, vc, meta, 0.0), "scale must be > 0"),
    }


def check_attention_rejects(broken: str) -> None:
    from flashtick_kernels.paged_attention import paged_attention_triton

    args, message = bad_attention_inputs(make_case(SMALL, 0))[broken]
    with pytest.raises(ValueError, match=message):
        paged_attention_triton(*args)


def check_write_kv_rejects() -> None:
    from flashtick_kernels.kv_write import write_kv_triton as write

    k, v, kc, vc, meta = make_case(SMALL, 0)[1:6]
    for args, message in [
        ((k[0], v, kc, vc, meta), "3-D"),
        ((k.int(), v, kc, vc, meta), "fp32, fp16 or bf16"),
        ((k, v[:, :1], kc, vc, meta), "one shape"),
        ((k, v, kc[:1], vc[:1], meta), "k_cache/v_cache must be"),
        ((k[:1], v[:1], kc, vc, meta), "slot_mapping has"),
    ]:
        with pytest.raises(ValueError, match=message):
            write(*args)


INTERPRETED_CHECKS: dict[str, Callable[[], None]] = {
    **{f"attention-{name}": partial(check_attention, spec, False) for name, spec in ATTENTION_SPECS.items()},
    # strided q/k/v (views of a fused qkv tensor) on two specs only: the interpreter is slow
    "attention-mixed_gqa1-strided_qkv": partial(check_attention, ATTENTION_SPECS["mixed_gqa1"], True),
    "attention-odd_sizes-strided_qkv": partial(check_attention, ATTENTION_SPECS["odd_sizes"], True),
    "attention-empty_batch": check_attention_empty_batch,
    **{f"attention-probe_cuts-{seed}": partial(check_attention_probe_cuts, seed) for seed in range(2)},
    "write_kv-fp32": partial(check_write_kv, torch.float32),
    "write_kv-bf16": partial(check_write_kv, torch.bfloat16),
    **{f"attention-rejects-{b}": partial(check_attention_rejects, b)
       for b in bad_attention_inputs(make_case(SMALL, 0))},
    "write_kv-rejects": check_write_kv_rejects,
}


interpreted, test_triton_interpreted = interpreted_tests(__file__, INTERPRETED_CHECKS, HAVE_TRITON)


@needs_triton
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or torch.cuda.is_available(),
                    reason="checks the compiled module refusing CPU tensors")
def test_compiled_kernels_refuse_cpu_tensors() -> None:
    from flashtick_kernels.kv_write import write_kv_triton
    from flashtick_kernels.paged_attention import paged_attention_triton

    case = make_case(SMALL, 0)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        paged_attention_triton(*case)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        write_kv_triton(case.k_new, case.v_new, case.k_cache, case.v_cache, case.meta)


# ---------------------------------------------------------------- Triton, compiled on CUDA

GPU_SPECS = {
    **ATTENTION_SPECS,
    "llama_like": Spec([1000, 0, 511, 3], [300, 64, 1, 0], 16, 32, 8, 128),
    "decode_bs32": Spec([4097, 33, 250], [1, 1, 1], 32, 8, 1, 64),
}


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", GPU_SPECS)
def test_cuda_attention_matches_reference(name: str, dtype: torch.dtype) -> None:
    from flashtick_kernels.paged_attention import paged_attention_triton

    case = make_case(GPU_SPECS[name], seed=4, dtype=dtype, device="cuda", fused_qkv=name == "odd_sizes")
    got = paged_attention_triton(*case)
    assert got.dtype == dtype
    # the oracle: fp32 reference on the same (possibly bf16-rounded) inputs
    as_fp32 = Case(*(t.float() for t in case[:5]), case.meta, case.scale)
    torch.testing.assert_close(got.float(), paged_attention_ref(*as_fp32),
                               **(FP32_TOL if dtype == torch.float32 else BF16_TOL))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(
    ("dtype", "cache_dtype"),
    [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.float32, torch.bfloat16)],
    ids=["fp32", "bf16", "fp32_to_bf16"],
)
def test_cuda_write_kv_is_exact(dtype: torch.dtype, cache_dtype: torch.dtype) -> None:
    from flashtick_kernels.kv_write import write_kv_triton

    case = make_case(GPU_SPECS["llama_like"], seed=5, dtype=dtype, device="cuda", fused_qkv=True)
    got = [case.k_cache.to(cache_dtype), case.v_cache.to(cache_dtype)]
    expected = [c.clone() for c in got]
    write_kv_ref(case.k_new, case.v_new, *expected, case.meta)  # casts round to nearest even
    write_kv_triton(case.k_new, case.v_new, *got, case.meta)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)

if __name__ == "__main__":  # the interpreter worker started by the `interpreted` fixture
    worker_main(INTERPRETED_CHECKS)
