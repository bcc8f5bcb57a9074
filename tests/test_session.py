"""Session contracts: probes leave no trace, batching equals one-at-a-time, eviction rebuilds exactly."""

from __future__ import annotations

import random

import pytest
import torch

from conftest import hf_logits, tiny_engine, tiny_hf_model
from engine.batch import Advance, Probe
from engine.kv_cache import PoolExhausted
from engine.scheduler import SchedulerConfig
from engine.session import Session


def _tokens(n: int, seed: int, vocab: int = 160) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(n)]


def test_probes_leave_no_trace() -> None:
    hf = tiny_hf_model()
    prefix, question, more = _tokens(300, 1), _tokens(16, 2), _tokens(40, 3)
    probed_engine, clean_engine = tiny_engine(hf), tiny_engine(hf)
    probed, clean = Session("p"), Session("c")
    probed_engine.advance(probed, prefix)
    clean_engine.advance(clean, prefix)
    kv_before = probed_engine.runner.kv.tensor.clone()
    state_before = (list(probed.tokens), list(probed.blocks), probed.num_cached, probed.version)
    refcounts_before = list(probed_engine.blocks.pool.refcount)
    rng = random.Random(0)
    for _ in range(100):
        probed_engine.probe(probed, question[: rng.randint(1, 16)])
    assert torch.equal(probed_engine.runner.kv.tensor, kv_before)
    assert (list(probed.tokens), list(probed.blocks), probed.num_cached, probed.version) == state_before
    assert probed_engine.blocks.pool.refcount == refcounts_before
    assert torch.equal(probed_engine.advance(probed, more, logits="all"), clean_engine.advance(clean, more,
                                                                                               logits="all"))


def test_sixteen_sessions_in_one_batch_equal_one_at_a_time() -> None:
    hf = tiny_hf_model("qwen2-tied")
    lengths = [1, 2, 5, 16, 17, 31, 33, 47, 64, 80, 100, 127, 128, 129, 200, 255]
    prefixes = [_tokens(n, seed=n) for n in lengths]
    appends = [_tokens(1 + i % 7, seed=100 + i) for i in range(16)]
    batched, single = tiny_engine(hf), tiny_engine(hf)
    b_sessions = [Session(f"b{i}", list(p)) for i, p in enumerate(prefixes)]
    s_sessions = [Session(f"s{i}", list(p)) for i, p in enumerate(prefixes)]
    # the prefixes are prefilled in one batch on one side and one by one on the other
    batched.run([Advance(s, []) for s in b_sessions])
    for s in s_sessions:
        single.advance(s, [])
    together = batched.run([Advance(s, a, "all") for s, a in zip(b_sessions, appends)])
    alone = [single.advance(s, a, "all") for s, a in zip(s_sessions, appends)]
    for t, a in zip(together, alone):
        torch.testing.assert_close(t, a, atol=1e-5, rtol=0)
    probes_together = batched.run([Probe(s, a) for s, a in zip(b_sessions, appends)])
    for s, a, t in zip(s_sessions, appends, probes_together):
        torch.testing.assert_close(t, single.probe(s, a), atol=1e-5, rtol=0)


def test_advance_and_probe_in_one_forward_see_the_new_tokens() -> None:
    hf = tiny_hf_model()
    tokens = _tokens(120, 7)
    engine = tiny_engine(hf)
    session = Session("s", tokens[:100])
    advanced, probed = engine.run([Advance(session, tokens[100:110], "all"), Probe(session, tokens[110:])])
    reference = hf_logits(hf, tokens)
    assert (advanced - reference[100:110]).abs().max() <= 1e-4
    assert (probed - reference[110:]).abs().max() <= 1e-4
    assert engine.runner.stats.forwards == 1


def test_evicted_session_rebuilds_exactly() -> None:
    hf = tiny_hf_model()
    engine = tiny_engine(hf)
    pool = engine.blocks.pool
    session = Session("s")
    engine.advance(session, _tokens(150, 4))
    question = _tokens(12, 5)
    before = engine.probe(session, question)
    freed = engine.evict(session)
    assert freed > 0 and session.num_cached == 0 and pool.num_free == pool.num_blocks
    after = engine.probe(session, question)  # rebuilds the prefix in the same forward
    assert session.num_cached == 150 and len(session.tokens) == 150
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)
    assert engine.runner.stats.tokens_rebuilt == 150


def test_fork_shares_full_blocks_and_copies_the_tail() -> None:
    hf = tiny_hf_model()
    engine = tiny_engine(hf, block_size=16)
    parent = Session("parent")
    engine.advance(parent, _tokens(40, 6))  # 2 full blocks + 8 cells
    child = engine.fork(parent, "child")
    pool = engine.blocks.pool
    assert child.blocks[:2] == parent.blocks[:2] and all(pool.refcount[b] == 2 for b in parent.blocks[:2])
    assert child.blocks[2] != parent.blocks[2]
    question = _tokens(10, 8)
    parent_answer = engine.probe(parent, question)
    torch.testing.assert_close(engine.probe(child, question), parent_answer, atol=1e-6, rtol=0)
    engine.advance(child, _tokens(30, 13))  # writes only into the child's own tail block and new ones
    assert torch.equal(engine.probe(parent, question), parent_answer)
    reference = hf_logits(hf, parent.tokens + question)
    assert (engine.probe(parent, question) - reference[40:]).abs().max() <= 1e-4


def test_exhausted_pool_fails_cleanly_and_changes_nothing() -> None:
    hf = tiny_hf_model()
    # a pool of 4 blocks; the stream loop's window is set to fit in it (the engine checks that it does)
    engine = tiny_engine(hf, cells=64, block_size=16, scheduler=SchedulerConfig(window=32, probe_reserve=0))
    pool = engine.blocks.pool
    session = Session("s")
    engine.advance(session, _tokens(60, 9))
    free_before, blocks_before = pool.num_free, list(session.blocks)
    with pytest.raises(PoolExhausted, match="KV blocks"):
        engine.advance(session, _tokens(10, 10))
    assert pool.num_free == free_before and session.blocks == blocks_before
    assert len(session.tokens) == 60 and session.num_cached == 60
    pool.check()


def test_session_past_the_model_window_is_refused_and_changes_nothing() -> None:
    hf = tiny_hf_model(max_position_embeddings=64)
    engine = tiny_engine(hf, scheduler=SchedulerConfig(probe_reserve=8))
    session = Session("s")
    engine.advance(session, _tokens(60, 11))
    free_before, blocks_before = engine.blocks.pool.num_free, list(session.blocks)
    with pytest.raises(ValueError, match="past the model's 64 positions"):
        engine.advance(session, _tokens(5, 12))
    assert engine.blocks.pool.num_free == free_before and session.blocks == blocks_before
