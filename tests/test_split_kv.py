"""The split-KV (flash-decoding) Triton kernel against the torch reference: interpreted on CPU (one worker
subprocess, as in test_kernels.py), compiled on CUDA when there is one. Tolerances as in test_kernels.py."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
import torch

from interpreted import interpreted_tests, worker_main
from flashtick_kernels.metadata import RaggedBatch
from flashtick_kernels.reference import paged_attention_ref
from test_kernels import BF16_TOL, FP32_TOL, HAVE_TRITON, Case, Spec, make_case, needs_cuda

SPLIT_SPECS = {
    # (spec, split_cells): many splits, prefixes ending inside a split, a sequence with no prefix, 16 new tokens
    # (5 splits: the interpreter runs every (sequence, split, kv head) program, and those past a prefix exit)
    "many_splits_gqa2": (Spec([150, 0, 37, 1], [1, 3, 16, 5], 16, 4, 2, 24), 32),
    "one_split": (Spec([90, 12], [2, 7], 16, 2, 1, 32), 1000),
    "odd_group_bs1": (Spec([70, 5], [4, 1], 1, 6, 2, 40), 16),
    "probes_only_decode": (Spec([129, 64, 200], [1, 1, 1], 32, 8, 1, 64), 64),
}


def check_split(name: str, fused_qkv: bool = False) -> None:
    from flashtick_kernels.split_kv import split_kv_attention_triton

    spec, split_cells = SPLIT_SPECS[name]
    case = make_case(spec, seed=5, fused_qkv=fused_qkv)
    got = split_kv_attention_triton(*case, split_cells=split_cells)
    assert got.shape == case.q.shape and got.dtype == case.q.dtype
    torch.testing.assert_close(got, paged_attention_ref(*case), **FP32_TOL)


def check_rejects_long_appends() -> None:
    from flashtick_kernels.split_kv import split_kv_attention_triton

    with pytest.raises(ValueError, match="at most 16 new tokens"):
        split_kv_attention_triton(*make_case(Spec([40], [17], 16, 2, 1, 16), seed=0))


INTERPRETED_CHECKS: dict[str, Callable[[], None]] = {
    **{f"split-{name}": partial(check_split, name) for name in SPLIT_SPECS},
    "split-many_splits_gqa2-strided_qkv": partial(check_split, "many_splits_gqa2", True),
    "split-rejects-long-appends": check_rejects_long_appends,
}


interpreted, test_split_kv_interpreted = interpreted_tests(__file__, INTERPRETED_CHECKS, HAVE_TRITON)


def test_the_shape_picks_split_kv_only_for_few_rows_over_a_long_prefix() -> None:
    if not HAVE_TRITON:
        pytest.skip("triton is not importable on this platform")
    from flashtick_kernels.split_kv import use_split_kv

    def meta(prefixes: list[int], new: list[int]) -> RaggedBatch:
        cu = [0]
        for n in new:
            cu.append(cu[-1] + n)
        return RaggedBatch(cu, prefixes, [list(range(-(-(p + n) // 16))) for p, n in zip(prefixes, new)],
                           [-1] * cu[-1], 16)

    assert use_split_kv(meta([4096, 10], [16, 1]))
    assert not use_split_kv(meta([4096, 10], [17, 1]))  # a long append in the batch: the paged kernel
    assert not use_split_kv(meta([1000, 10], [16, 1]))  # short prefixes: enough programs already
    assert not use_split_kv(meta([4096], [0]))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["llama_32k", "batched_probes_2k"])
def test_cuda_split_kv_matches_reference(name: str, dtype: torch.dtype) -> None:
    from flashtick_kernels.split_kv import split_kv_attention_triton

    spec = {"llama_32k": Spec([32768], [16], 16, 32, 8, 128),
            "batched_probes_2k": Spec([2048] * 64, [16] * 64, 16, 32, 8, 128)}[name]
    case = make_case(spec, seed=6, dtype=dtype, device="cuda")
    got = split_kv_attention_triton(*case)
    expected = paged_attention_ref(*Case(*(t.float() for t in case[:5]), case.meta, case.scale))
    torch.testing.assert_close(got.float(), expected, **(FP32_TOL if dtype == torch.float32 else BF16_TOL))


if __name__ == "__main__":  # the interpreter worker started by the `interpreted` fixture
    worker_main(INTERPRETED_CHECKS)
