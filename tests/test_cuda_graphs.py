"""CUDA graphs (engine/cuda_graphs.py): batches padded into a bucket's static buffers give the logits of the
plain forward.

On CPU the padded static-buffer path runs without capture (``cuda_graphs="eager"``) on the Triton kernels
under the interpreter (one worker subprocess, tests/interpreted.py): bucketing, padding, the synthetic launch
shape and buffer reuse across batches are all what a replay would run. The GPU test captures and replays.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from functools import partial

import pytest
import torch

from conftest import hf_logits, tiny_hf_model
from engine.batch import Advance, Probe
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import from_hf_model
from engine.runner import ModelRunner
from engine.session import Session
from interpreted import interpreted_tests, worker_main
from flashtick_kernels.metadata import RaggedBatch
from test_kernels import HAVE_TRITON, needs_cuda


def engines(family: str, device: str, graphs, layers: int = 2, **shape) -> tuple[Engine, Engine, torch.nn.Module]:
    """(an engine with graphs as given, one without, the transformers model) over the same weights (``shape``:
    the family's config overridden)."""
    hf = tiny_hf_model(family, seed=5, num_hidden_layers=layers, **shape)
    spec = CacheSpec(block_size=16, cells=2048)
    with_graphs = Engine(ModelRunner(from_hf_model(hf, device=device), spec, cuda_graphs=graphs))
    plain = Engine(ModelRunner(from_hf_model(hf, device=device), spec, cuda_graphs=False))
    return with_graphs, plain, hf


# the largest bucket's tokens in the CPU check: small, as the interpreter runs ~30 programs a token a layer
MAX_TOKENS = 16


def drive(engine: Engine, vocab: int) -> tuple[list[torch.Tensor], list[int]]:
    """Mixed batches: advances of several sessions (one over a prefix across a block boundary), probes with and
    without cuts, shapes that fall in the same bucket one after another (so stale buffer contents would show),
    buckets of the paged and (once a prefix passes split_kv.SPLIT_MIN_PREFIX) the split-KV kernel, a probe of
    SPLIT_MAX_NEW (16) tokens, a batch past the largest bucket (MAX_TOKENS on CPU). Each batch fits MAX_TOKENS
    but the one past it: each padded token costs the interpreted check ~30 programs a layer.
    Returns every item's logits, and the first batch's tokens of session "a"."""
    rng = random.Random(0)
    tok = lambda n: [rng.randrange(vocab) for _ in range(n)]  # noqa: E731
    a, b, c = Session("a"), Session("b"), Session("c")
    first = tok(13)
    out = [*engine.run([Advance(a, first, "all"), Advance(b, tok(3), "all")])]
    out += engine.run([Advance(a, tok(4), "all"), Probe(b, tok(3)), Advance(c, tok(9), "last")])  # a: cells 13-16
    out += engine.run([Probe(a, tok(6)), Probe(b, tok(2))])
    out += engine.run([Advance(a, tok(3), "all"), Probe(a, tok(4), cut=a.num_cached + 1), Probe(c, tok(9))])
    out += engine.run([Probe(b, tok(1), "last"), Probe(c, tok(7))])  # the third's paged bucket again
    out += engine.run([Advance(b, tok(MAX_TOKENS + 1), "all")])  # past max_tokens=MAX_TOKENS below, eager
    out += engine.run([Probe(a, tok(16))])
    return out, first


def check_padded_path(family: str, min_split_prefix: int | None) -> None:
    import flashtick_kernels.split_kv

    if min_split_prefix is not None:  # make the split-KV kernel take these short prefixes too
        flashtick_kernels.split_kv.SPLIT_MIN_PREFIX = min_split_prefix
    from engine.cuda_graphs import CudaGraphs

    # one layer and 4 query heads on 2 KV heads (GQA groups of 2): engine/cuda_graphs.py pads the batch into its
    # static buffers around the whole forward and holds nothing per layer or head, so a second layer or more heads
    # ran none of its code again, only more of the interpreter's programs (a token's RoPE+KV write is one a head: 12
    # of llama3's 8 + 2 + 2, now 8). The layer loop and llama3's groups of 4 on the Triton kernels: test_fused's
    # model checks (two layers)
    graphed, plain, hf = engines(family, "cpu", False, layers=1, num_attention_heads=4, num_key_value_heads=2)
    runner = graphed.runner  # buffers for at most MAX_TOKENS tokens: the batch of one more runs eagerly
    runner.graphs = graphs = CudaGraphs(runner.model, runner.kv.tensor, runner.kv.block_size,
                                        runner.config.max_positions, runner.device, max_tokens=MAX_TOKENS,
                                        mode="eager")
    # The padded path on the Triton kernels against the plain forward on the torch reference kernels (each
    # Triton kernel is checked against its reference in test_kernels/test_fused/test_split_kv; the
    # interpreter runs a program at a time, so a Triton plain side doubled this check's minutes)
    os.environ["FLASHTICK_KERNELS"] = "triton"
    try:
        got, first = drive(graphed, hf.config.vocab_size)
    finally:
        del os.environ["FLASHTICK_KERNELS"]
    want, _ = drive(plain, hf.config.vocab_size)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)
    assert graphs.stats.eager == 1  # the MAX_TOKENS + 1 batch; every other one went through the padded buffers
    split = [b for b in graphs.buckets if b.split_prefix]
    assert (len(split) > 0) == (min_split_prefix is not None), graphs.buckets  # the split-KV kernel's buckets too
    assert len(graphs.buckets) < 7  # batches of one shape share a bucket
    torch.testing.assert_close(got[0], hf_logits(hf, first), rtol=0, atol=1e-4)  # and they are transformers'


INTERPRETED_CHECKS: dict[str, Callable[[], None]] = {
    "padded-llama3-paged": partial(check_padded_path, "llama3", None),
    "padded-qwen2-split": partial(check_padded_path, "qwen2-tied", 16),
}


interpreted, test_cuda_graphs_interpreted = interpreted_tests(__file__, INTERPRETED_CHECKS, HAVE_TRITON)


def random_batch(rng: random.Random) -> RaggedBatch:
    lengths = [rng.choice([0, 1, 2, 5, 16, 17, 40]) for _ in range(rng.randint(1, 9))]
    prefixes = [rng.choice([0, 3, 100, 1500, 3000]) for _ in lengths]
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return RaggedBatch(cu_seqlens=cu, prefix_lens=prefixes, block_tables=[[0] * -(-p // 16) for p in prefixes],
                       slot_mapping=[-1] * cu[-1], block_size=16)


@pytest.mark.skipif(not HAVE_TRITON, reason="triton is not importable on this platform")
def test_every_bucket_launches_the_kernel_its_batches_would_with_room_for_them() -> None:
    from engine.cuda_graphs import CudaGraphs
    from flashtick_kernels.split_kv import use_split_kv

    hf = tiny_hf_model("llama3", num_hidden_layers=1, max_position_embeddings=4096)  # prefixes up to 3,000
    runner = ModelRunner(from_hf_model(hf), CacheSpec(block_size=16, cells=4096), cuda_graphs="eager")
    graphs: CudaGraphs = runner.graphs
    rng = random.Random(1)
    seen = 0
    for _ in range(400):
        meta = random_batch(rng)
        b = graphs.bucket(meta, rows=rng.randint(0, max(meta.num_tokens, 1)))
        too_long = any(len(table) > graphs.width for table in meta.block_tables)
        if meta.num_tokens == 0 or meta.num_tokens > graphs.max_tokens or too_long:
            assert b is None
            continue
        seen += 1
        shape = graphs._bucket_shape(b)  # raises if the bucket cannot hold its tokens or picks another kernel
        assert shape.num_seqs >= meta.num_seqs and shape.num_tokens >= meta.num_tokens
        assert shape.max_new >= meta.max_new and use_split_kv(shape) == use_split_kv(meta)
        if use_split_kv(meta):
            assert max(shape.prefix_lens) >= max(meta.prefix_lens)
    assert seen > 100


def test_a_runner_on_cpu_captures_nothing_unless_asked() -> None:
    runner = ModelRunner(from_hf_model(tiny_hf_model("llama3", num_hidden_layers=1)), CacheSpec(block_size=16,
                                                                                                cells=256))
    assert runner.graphs is None
    if HAVE_TRITON:
        from engine.cuda_graphs import CudaGraphs

        with pytest.raises(ValueError, match="need a CUDA device"):
            CudaGraphs(runner.model, runner.kv.tensor, 16, 256, torch.device("cpu"))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("family", ["llama3", "qwen2-tied"])
def test_replayed_graphs_give_the_eager_logits_on_cuda(family: str) -> None:
    graphed, plain, hf = engines(family, "cuda", None)
    graphs = graphed.runner.graphs
    assert graphs is not None and graphs.mode == "capture"
    (got, _), (want, _) = drive(graphed, hf.config.vocab_size), drive(plain, hf.config.vocab_size)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)
    assert graphs.stats.capture_failed is None and graphs.stats.graphs >= 4 and graphs.stats.replays >= 6
    print(f"\n{graphs.stats}")


if __name__ == "__main__":  # the interpreter worker started by the `interpreted` fixture
    worker_main(INTERPRETED_CHECKS)
