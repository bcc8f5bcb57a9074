"""Session: one stream's committed tokens and the KV blocks that hold them.

``tokens`` is the committed log; token i sits at position i. ``blocks`` hold
the K/V of ``tokens[:num_cached]``. An evicted session keeps its log and drops
its blocks (``num_cached == 0``); the next forward that touches it rebuilds the
missing K/V exactly. A probe never changes any of this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from engine.kv_cache import BlockPool, KVCache

if TYPE_CHECKING:
    from engine.runner import ModelRunner


@dataclass(eq=False)
class Session:
    name: str
    tokens: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    num_cached: int = 0
    version: int = 0  # advances committed; answers are stamped with it
    runner: "ModelRunner | None" = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if not 0 <= self.num_cached <= len(self.tokens):
            raise ValueError(f"session {self.name!r}: num_cached={self.num_cached} outside [0, {len(self.tokens)}]")

    @property
    def num_uncached(self) -> int:
        return len(self.tokens) - self.num_cached

    # -- convenience: a session opened by a runner can drive it directly ------------------

    def advance(self, tokens: list[int], logits: str = "last") -> torch.Tensor:
        """Commit ``tokens``; returns their logits (``"last"``, ``"all"`` or ``"none"``)."""
        from engine.runner import Advance

        return self._runner().run([Advance(self, list(tokens), logits)])[0]

    def probe(self, tokens: list[int], logits: str = "all") -> torch.Tensor:
        """Logits of ``tokens`` evaluated after the committed prefix; the session is left as it was."""
        from engine.runner import Probe

        return self._runner().run([Probe(self, list(tokens), logits)])[0]

    def _runner(self) -> "ModelRunner":
        if self.runner is None:
            raise RuntimeError(f"session {self.name!r} was not opened by a ModelRunner")
        return self.runner

    # -- KV bookkeeping (the runner and scheduler call these) -----------------------------

    def reserve(self, pool: BlockPool, start: int, n: int) -> list[int]:
        """Cells for tokens ``start .. start+n-1`` (``start`` >= the cached prefix, which stays
        untouched), allocating blocks as needed. Cells already reserved are reused."""
        if start < self.num_cached:
            raise ValueError(f"session {self.name!r}: cannot reserve at {start}, below its {self.num_cached} cached")
        bs = pool.block_size
        if start % bs and pool.refcount[self.blocks[start // bs]] > 1:
            raise AssertionError(f"session {self.name!r} would write into a shared block")
        missing = pool.blocks_for(start + n) - len(self.blocks)
        if missing > 0:
            self.blocks += pool.allocate(missing, after=self.blocks[-1] if self.blocks else None)
        return [self.blocks[c // bs] * bs + c % bs for c in range(start, start + n)]

    def evict(self, pool: BlockPool) -> int:
        """Drop the KV (the token log stays); returns the cells freed."""
        freed = len(self.blocks) * pool.block_size
        pool.free(self.blocks)
        self.blocks = []
        self.num_cached = 0
        return freed

    def fork(self, name: str, cache: KVCache) -> "Session":
        """A new session with this one's committed prefix: full blocks shared, the partial one copied."""
        child = Session(name, tokens=self.tokens[: self.num_cached], runner=self.runner)
        child.adopt_prefix(self, self.num_cached, cache)
        return child

    def adopt_prefix(self, source: "Session", length: int, cache: KVCache) -> None:
        """Take the K/V of ``source``'s first ``length`` tokens (which must equal ours) instead of
        computing them: full blocks are shared by refcount, a partial last block is copied."""
        if self.blocks or self.num_cached:
            raise ValueError(f"session {self.name!r} already holds KV; evict it before adopting a prefix")
        if length > source.num_cached or self.tokens[:length] != source.tokens[:length]:
            raise ValueError(f"session {self.name!r} does not start with {source.name!r}'s first {length} tokens")
        pool = cache.pool
        bs = pool.block_size
        full = length // bs
        pool.share(source.blocks[:full])
        self.blocks = source.blocks[:full]
        self.num_cached = full * bs
        tail = length - full * bs
        if tail:
            dst = self.reserve(pool, self.num_cached, tail)
            cache.copy_cells([source.blocks[full] * bs + i for i in range(tail)], dst)
            self.num_cached += tail
