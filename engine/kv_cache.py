"""The paged KV cache: a fixed pool of blocks with refcounts, and the tensor whose cells they index.

Capacity is counted in cells (token slots): ``num_blocks * block_size``. The
pool never grows (on the CPU its memory is committed as cells are first written);
an allocation that does not fit raises ``PoolExhausted`` before anything is
taken, so a failed request leaves the pool untouched.
Blocks shared between sessions (a common prefix, a fork) are refcounted and
always full: nobody writes into a shared block.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import torch

from engine.memory_limit import pool_over_memory_limit
from engine.models.config import ModelConfig
from engine.settings import CacheSpec


class PoolExhausted(RuntimeError):
    """Not enough free KV blocks for a request; nothing was allocated."""


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks <= 0:
            raise ValueError(f"num_blocks must be > 0, got {num_blocks}")
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refcount = [0] * num_blocks
        self._free_heap = list(range(num_blocks))  # lowest id first; may hold stale ids (lazy deletion)
        self.num_free = num_blocks
        self.touched_blocks = 0  # one past the highest block ever taken: what the pool's memory has been used up to

    @property
    def capacity_cells(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def used_cells(self) -> int:
        return (self.num_blocks - self.num_free) * self.block_size

    def blocks_for(self, cells: int) -> int:
        return -(-cells // self.block_size)

    def allocate(self, n: int, after: int | None = None) -> list[int]:
        """Take ``n`` free blocks. Prefers ``after+1, after+2, ...`` so a growing session stays
        physically contiguous (the CPU attention then reads it through views, without a gather)."""
        if n > self.num_free:
            raise PoolExhausted(
                f"KV pool exhausted: need {n} blocks ({n * self.block_size} cells), "
                f"{self.num_free} of {self.num_blocks} free"
            )
        taken: list[int] = []
        nxt = after + 1 if after is not None else None
        while len(taken) < n and nxt is not None and nxt < self.num_blocks and self.refcount[nxt] == 0:
            taken.append(nxt)
            self.refcount[nxt] = 1
            nxt += 1
        while len(taken) < n:
            block = heapq.heappop(self._free_heap)
            if self.refcount[block] == 0:  # skip ids taken out of order above
                taken.append(block)
                self.refcount[block] = 1
        self.num_free -= n
        self.touched_blocks = max(self.touched_blocks, max(taken, default=-1) + 1)
        return taken

    def share(self, blocks: list[int]) -> None:
        """Add a reference to blocks already held by someone else."""
        for block in blocks:
            if self.refcount[block] <= 0:
                raise ValueError(f"cannot share free block {block}")
        for block in blocks:
            self.refcount[block] += 1

    def free(self, blocks: list[int]) -> None:
        """Drop one reference per block; a block returns to the pool when nobody holds it."""
        for block in blocks:
            if self.refcount[block] <= 0:
                raise ValueError(f"double free of block {block}")
        for block in blocks:
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                heapq.heappush(self._free_heap, block)
                self.num_free += 1
        if len(self._free_heap) > 2 * self.num_blocks:  # drop stale ids left by contiguous allocation
            self._free_heap = [b for b, r in enumerate(self.refcount) if r == 0]

    def check(self) -> None:
        """Invariants, for tests and debugging: counts agree and no block is lost."""
        free = sum(1 for r in self.refcount if r == 0)
        if free != self.num_free or any(r < 0 for r in self.refcount):
            raise AssertionError(f"pool corrupt: {free} blocks at refcount 0, num_free={self.num_free}")
        if {b for b in self._free_heap if self.refcount[b] == 0} != {b for b, r in enumerate(self.refcount) if r == 0}:
            raise AssertionError("pool corrupt: a free block is missing from the free list")


class KVCache:
    """The storage the pool's cells index: one tensor (layers, 2, Hkv, cells, D). The runner holds it;
    the block pool that hands out its cells belongs to the scheduler (``new_pool``)."""

    def __init__(self, config: ModelConfig, spec: CacheSpec, dtype: torch.dtype, device: torch.device | str) -> None:
        self.num_blocks = spec.num_blocks(config, dtype)
        self.block_size = spec.block_size
        shape = (config.num_layers, 2, config.num_kv_heads, self.num_blocks * self.block_size, config.head_dim)
        # bytes one cell (a token's K and V in every layer) takes: what sizes kv.cells against memory
        self.cell_bytes = config.kv_bytes_per_token * dtype.itemsize
        cells = self.num_blocks * self.block_size
        pool = (f"the KV pool of {cells} cells x {self.cell_bytes} bytes per cell (this model, {dtype}) = "
                f"{cells * self.cell_bytes / 2**30:.1f} GiB")
        # a pool in host memory past the cgroup's limit is not refused by the allocator: the kernel kills the process
        if torch.device(device).type == "cpu" and (
                problem := pool_over_memory_limit(cells * self.cell_bytes, self.cell_bytes)) is not None:
            raise MemoryError(f"kv.cells / kv.bytes: {pool} {problem}")
        try:
            self.tensor = (_lazily_zeroed(shape, dtype) if torch.device(device).type == "cpu"
                           else torch.zeros(shape, dtype=dtype, device=device))
        except (RuntimeError, MemoryError) as e:  # the allocator's own words name neither the key nor the size
            raise MemoryError(f"kv.cells / kv.bytes: cannot allocate {pool} on {device}: lower kv.cells or kv.bytes "
                              f"({type(e).__name__})") from None

    def new_pool(self) -> BlockPool:
        """An empty pool over exactly these cells."""
        return BlockPool(self.num_blocks, self.block_size)

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    def summary(self) -> dict[str, int]:
        return {"kv_cell_bytes": self.cell_bytes, "kv_bytes_capacity": self.nbytes}

    def copy_cells(self, src: list[int], dst: list[int]) -> None:
        """Copy K/V of cells ``src`` into ``dst`` in every layer (copy-on-write of a partial block)."""
        index_src = torch.tensor(src, device=self.tensor.device)
        index_dst = torch.tensor(dst, device=self.tensor.device)
        self.tensor.index_copy_(3, index_dst, self.tensor.index_select(3, index_src))


# 64 bytes: a cache line, and the alignment torch's own CPU allocator gives (vector loads stay aligned)
ALIGNMENT = 64


def _lazily_zeroed(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A zeroed host tensor whose pages are committed only when first written. torch.zeros writes every byte at
    once, so the default pool (a quarter of memory, config_kv.py) would be resident from the start however few
    streams use it. numpy's zeros is calloc, whose large blocks are the kernel's zero pages until written: cells
    never written still read as zeros, as torch.zeros' did (a kernel that loads a whole block reads them)."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = torch.from_numpy(np.zeros(nbytes + ALIGNMENT, dtype=np.uint8))  # (nbytes + 64,) uint8
    start = -raw.data_ptr() % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).view(shape)  # (layers, 2, Hkv, cells, D)
