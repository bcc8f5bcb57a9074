"""The block pool under random allocate/share/free traffic: no leak, no double free, never past capacity."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.kv_cache import BlockPool, CacheSpec, KVCache, PoolExhausted
from engine.models import ModelConfig

NUM_BLOCKS = 24


class PoolMachine(RuleBasedStateMachine):
    """Holders own lists of block references; the pool must agree with them at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(NUM_BLOCKS, block_size=4)
        self.holders: list[list[int]] = []

    @rule(n=st.integers(1, 8), contiguous=st.booleans())
    def allocate(self, n: int, contiguous: bool) -> None:
        after = self.holders[-1][-1] if contiguous and self.holders and self.holders[-1] else None
        free_before = self.pool.num_free
        if n > free_before:
            with pytest.raises(PoolExhausted):
                self.pool.allocate(n, after=after)
            assert self.pool.num_free == free_before
            return
        blocks = self.pool.allocate(n, after=after)
        assert len(set(blocks)) == n
        self.holders.append(blocks)

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def share(self, data: st.DataObject) -> None:
        source = data.draw(st.sampled_from(self.holders))
        self.pool.share(source)
        self.holders.append(list(source))

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.holders) - 1))
        self.pool.free(self.holders.pop(index))

    @rule(block=st.integers(0, NUM_BLOCKS - 1))
    def double_free_is_refused(self, block: int) -> None:
        if self.pool.refcount[block] == 0:
            with pytest.raises(ValueError, match="double free"):
                self.pool.free([block])

    @invariant()
    def pool_agrees_with_holders(self) -> None:
        expected = [0] * NUM_BLOCKS
        for blocks in self.holders:
            for b in blocks:
                expected[b] += 1
        assert self.pool.refcount == expected
        assert 0 <= self.pool.num_free <= NUM_BLOCKS
        self.pool.check()


# 50 runs x 200 steps = 10,000 operations
TestPool = PoolMachine.TestCase
TestPool.settings = settings(max_examples=50, stateful_step_count=200, deadline=None)


def test_capacity_from_bytes_and_cells() -> None:
    config = ModelConfig("llama", 100, 64, 128, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                         max_positions=256)
    # 2 (K,V) * 2 layers * 2 heads * 16 dims * 4 bytes = 512 bytes per token in fp32
    import torch

    assert CacheSpec(block_size=16, bytes=512 * 16 * 10).num_blocks(config, torch.float32) == 10
    assert CacheSpec(block_size=16, cells=100).num_blocks(config, torch.float32) == 6
    with pytest.raises(ValueError, match="exactly one of cells or bytes"):
        CacheSpec(block_size=16)
    with pytest.raises(ValueError, match="below one block"):
        CacheSpec(block_size=16, cells=8).num_blocks(config, torch.float32)


def test_the_pool_says_its_bytes_per_cell_and_in_all() -> None:
    """stats' kv_cell_bytes and kv_bytes_capacity: what sizes kv.cells against memory, from the real tensor."""
    import torch

    config = ModelConfig("llama", 100, 64, 128, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                         max_positions=256)
    for dtype, cell_bytes in ((torch.float32, 512), (torch.bfloat16, 256)):
        cache = KVCache(config, CacheSpec(block_size=16, cells=100), dtype, "cpu")  # 100 cells: 6 whole blocks of 16
        assert cache.summary() == {"kv_cell_bytes": cell_bytes, "kv_bytes_capacity": 6 * 16 * cell_bytes}
