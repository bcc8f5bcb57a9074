"""BlockManager: the scheduler's hands on the KV block pool. The only code that allocates.

``allocate(items)`` lays out a forward (rebuilds first where a session lost
its K/V, then the item's own tokens) and reserves the cells every advance will
write. It checks the model's positions and the pool before taking anything, so
a refused batch changes nothing. ``commit(batch)`` books what ran: committed
tokens, cached lengths and versions.
"""

from __future__ import annotations

from engine.batch import Advance, ForwardBatch, Probe, Sequence
from engine.kv_cache import BlockPool, PoolExhausted
from engine.quoting import quoted
from engine.session import Session


class BlockManager:
    def __init__(self, pool: BlockPool, max_positions: int,
                 positions_cause: str = "its max_position_embeddings") -> None:
        self.pool = pool
        self.max_positions = max_positions
        self.positions_cause = positions_cause  # where max_positions comes from (ModelConfig.positions_cause)

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    # -- planning -------------------------------------------------------------------------------

    def blocks_needed(self, items: list[Advance | Probe]) -> int:
        """KV blocks the items would allocate (the first item touching a session also rebuilds its tail)."""
        final_cells: dict[int, tuple[Session, int]] = {}
        for item in items:
            s = item.session
            cells = final_cells[id(s)][1] if id(s) in final_cells else len(s.tokens)
            cells += len(item.tokens) if isinstance(item, Advance) else 0
            final_cells[id(s)] = (s, cells)
        return sum(max(0, self.pool.blocks_for(cells) - len(s.blocks)) for s, cells in final_cells.values())

    def allocate(self, items: list[Advance | Probe],
                 copies: list[tuple[list[int], list[int]]] | None = None) -> ForwardBatch:
        """Lay out ``items`` as one forward and reserve its cells. Raises PoolExhausted or ValueError
        (a session past the model's positions) before anything is allocated."""
        self._check_positions(items)
        needed = self.blocks_needed(items)
        if needed > self.pool.num_free:
            raise PoolExhausted(f"batch needs {needed} KV blocks, {self.pool.num_free} of {self.pool.num_blocks} free")
        batch = ForwardBatch(copies=list(copies or []))
        cached_after: dict[int, int] = {}  # id(session) -> cached length once earlier sequences have run
        for item in items:
            s = item.session
            first = id(s) not in cached_after
            cached = cached_after.get(id(s), s.num_cached)
            rebuild = s.tokens[cached:] if first else []
            if isinstance(item, Probe) and rebuild:  # the probe needs its prefix in the cache: rebuild it first
                batch.sequences.append(self._writing(s, rebuild, len(rebuild), cached, "none"))
                cached += len(rebuild)
                rebuild = []
            if isinstance(item, Advance):
                batch.sequences.append(self._writing(s, rebuild + list(item.tokens), len(rebuild), cached, item.logits))
                cached += len(rebuild) + len(item.tokens)
            else:
                at = (cached if item.cut is None else item.cut) - item.overlap
                if not 0 <= at <= cached:  # a cut reads cells this batch has written or holds already
                    raise ValueError(f"probe cut {item.cut} on session {quoted(s.name)} outside [0, {cached}]")
                batch.sequences.append(Sequence(s, list(item.tokens), at, 0, item.logits, writes=False))
            cached_after[id(s)] = cached
            batch.item_sequence.append(len(batch.sequences) - 1)
        for seq in batch.sequences:  # every sequence sees the blocks reserved by the whole batch
            seq.block_table = list(seq.session.blocks)
        return batch

    def _check_positions(self, items: list[Advance | Probe]) -> None:
        length: dict[int, int] = {}
        for item in items:
            s = item.session
            committed = length.get(id(s), len(s.tokens))
            cut = item.cut if isinstance(item, Probe) and item.cut is not None else committed
            if isinstance(item, Probe):
                cut -= item.overlap
            after = cut + len(item.tokens)
            if after > self.max_positions:
                raise ValueError(f"session {quoted(s.name)} would reach {after} tokens, "
                                 f"past the model's {self.max_positions} positions")
            if isinstance(item, Advance):
                length[id(s)] = after

    def _writing(self, session: Session, token_ids: list[int], own_start: int, cached: int, logits) -> Sequence:
        seq = Sequence(session, token_ids, cached, own_start, logits, writes=True)
        seq.slots = self._reserve(session, cached, len(token_ids))
        return seq

    def _reserve(self, session: Session, start: int, n: int) -> list[int]:
        """Cells for tokens ``start .. start+n-1`` (the cached prefix below ``start`` stays untouched),
        allocating blocks as needed; cells already reserved are reused."""
        bs = self.pool.block_size
        if start % bs and self.pool.refcount[session.blocks[start // bs]] > 1:
            raise AssertionError(f"session {quoted(session.name)} would write into a shared block")
        missing = self.pool.blocks_for(start + n) - len(session.blocks)
        if missing > 0:
            session.blocks += self.pool.allocate(missing, after=session.blocks[-1] if session.blocks else None)
        return [session.blocks[c // bs] * bs + c % bs for c in range(start, start + n)]

    # -- after the forward ----------------------------------------------------------------------

    @staticmethod
    def commit(batch: ForwardBatch) -> None:
        """Book the sequences that ran: advances commit their tokens, writes extend the cached prefix."""
        for seq in batch.sequences:
            if not seq.writes:
                continue
            s = seq.session
            own = seq.own_tokens
            s.tokens += own
            s.num_cached = seq.first_position + len(seq.token_ids)
            s.version += 1 if own else 0
            s.check()

    # -- sharing and eviction -------------------------------------------------------------------

    def evict(self, session: Session) -> int:
        """Drop a session's KV (its token log stays); returns the cells freed."""
        freed = len(session.blocks) * self.pool.block_size
        self.pool.free(session.blocks)
        session.blocks = []
        session.num_cached = 0
        return freed

    def adopt_prefix(self, session: Session, source: Session, length: int) -> tuple[list[int], list[int]] | None:
        """Give ``session`` the K/V of ``source``'s first ``length`` tokens (which must equal its own)
        instead of computing them: full blocks are shared by refcount; a partial last block gets fresh
        cells, and the (source, target) cells to copy into them are returned for the runner."""
        if session.blocks or session.num_cached:
            raise ValueError(f"session {quoted(session.name)} already holds KV; evict it before adopting a prefix")
        if length > source.num_cached or session.tokens[:length] != source.tokens[:length]:
            raise ValueError(f"session {quoted(session.name)} does not start with {quoted(source.name)}'s first "
                             f"{length} tokens")
        bs = self.pool.block_size
        full = length // bs
        tail = length - full * bs
        if tail and self.pool.num_free < 1:
            raise PoolExhausted("no free KV block for the copied tail of a shared prefix")
        self.pool.share(source.blocks[:full])
        session.blocks = source.blocks[:full]
        session.num_cached = full * bs
        if not tail:
            return None
        target = self._reserve(session, session.num_cached, tail)
        session.num_cached += tail
        return [source.blocks[full] * bs + i for i in range(tail)], target
