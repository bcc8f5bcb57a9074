"""Eviction: room in the KV pool for a forward, taken from the least recently active sessions.

Under ``scheduler.when_full: evict`` a forward that does not fit the free pool evicts the sessions that
advanced longest ago, never one the forward itself touches; their token logs stay, so they rebuild exactly on
next use. Under ``refuse`` nothing is evicted (admission keeps a full window for every stream instead). The
order is sorted at most once per plan: a flood of streams that need room costs one sort, not one per stream.
"""

from __future__ import annotations

from engine.batch import Advance, Probe
from engine.block_manager import BlockManager
from engine.scheduler_stats import SchedulerStats
from engine.stream import Stream


class LruEviction:
    def __init__(self, blocks: BlockManager, streams: dict[str, Stream], stats: SchedulerStats,
                 when_full: str) -> None:
        self.blocks = blocks
        self.pool = blocks.pool
        self.streams = streams  # the scheduler's, shared: the streams held now
        self.stats = stats
        self.when_full = when_full
        self._victims: list[Stream] | None = None  # LRU eviction order, built at most once per plan

    def reset(self) -> None:
        """Forget the order: the next ``make_room`` sorts the sessions again (a new plan)."""
        self._victims = None

    def make_room(self, items: list[Advance | Probe]) -> bool:
        """Evict least recently active sessions outside ``items`` until they fit; False if impossible."""
        needed = self.blocks.blocks_needed(items)
        if needed <= self.pool.num_free:
            return True
        if self.when_full == "refuse":
            return False
        busy = {id(item.session) for item in items}
        if self._victims is None:  # sorted once per plan, consumed from the least recently active end
            resident = [s for s in self.streams.values() if s.session.blocks]
            self._victims = sorted(resident, key=lambda s: s.last_active, reverse=True)
        while needed > self.pool.num_free and self._victims:
            victim = self._victims.pop()  # a busy one is in this plan (or deferred by it): not a victim now
            if id(victim.session) not in busy and victim.session.blocks:
                self.stats.evicted_cells += self.blocks.evict(victim.session)
                self.stats.evictions += 1
        return needed <= self.pool.num_free
