"""Advance planning: which streams' queued chunks one forward advances, within the token budget and the KV pool.

Streams are taken in the order their oldest pending chunk arrived (FIFO across streams, so a quiet stream is never
held back behind busy ones), up to ``max_batch_streams``. Each takes whole chunks up to the budget and its window
(an oversized chunk goes alone into an empty forward), after booking uncomputed what a later roll would drop and
rolling where its next chunk passes the roll point. An advance stops at the stream's next roll point
(``take_chunks``: no roll after the first chunk); the budget left is then spent past those roll points, by rolls
inside the forward (engine/rolls_in_forward.py), once every waiting stream has its advance. A stream the pool
cannot hold now, even after eviction, keeps its chunks and waits. Each tick group an advance closes is a cut,
where standing queries are due (engine/probe_placement.py places them).
"""

from __future__ import annotations

from collections import deque

from engine.backlog_counts import BacklogCounts
from engine.batch import Advance
from engine.forward_plan import Plan
from engine.jobs import ProbeJob
from engine.lru_eviction import LruEviction
from engine.scheduler_stats import SchedulerStats
from engine.session_booking import SessionBooking
from engine.stream import Chunk, Stream, cuts_of


class AdvancePlanning:
    def __init__(self, streams: dict[str, Stream], max_batch_streams: int, booking: SessionBooking,
                 backlog: BacklogCounts, eviction: LruEviction, stats: SchedulerStats, asks: deque[ProbeJob],
                 idle: deque[ProbeJob]) -> None:
        # all the scheduler's own, shared; the job queues are read, to leave a stream that jobs wait on unrolled
        self.streams = streams
        self.max_batch_streams = max_batch_streams
        self.booking = booking
        self.backlog = backlog
        self.eviction = eviction
        self.pool = eviction.pool  # the pool eviction makes room in
        self.stats = stats
        self._asks = asks
        self._idle = idle

    def plan_advances(self, budget: int) -> Plan:
        """Advances for the streams that waited longest, within the token ``budget`` and the KV pool. A stream's
        advance may span many tick groups; each group it closes is a cut, where standing queries are due."""
        plan = Plan()
        waiting = sorted((s for s in self.streams.values() if s.pending), key=lambda s: s.waiting_since)
        for state in waiting:
            if len(plan.advances) >= self.max_batch_streams:
                break
            waiting_at_cut = any(job.stream == state.name and job.cut is not None for job in (*self._asks, *self._idle))
            # taken before a skip (which books tokens uncomputed) and a roll (whose re-prefill is no rebuild)
            evicted = state.session.num_uncached > 0
            if not waiting_at_cut:
                self.booking.skip_discarded(state)
            need = len(state.pending[0].tokens)  # rolls go chunk by chunk, so they never depend on grouping
            if len(state.session.tokens) + need > state.roll_at:
                if waiting_at_cut:
                    continue  # a roll would move the tokens that jobs still waiting at a cut read
                self.booking.roll_if_needed(state, need)
            chunks, closes = take_chunks(state, budget, first=not plan.advances)
            if not chunks:
                break
            self.backlog.queued(state, chunks, -1)
            tokens = [t for c in chunks for t in c.tokens]
            if state.session.num_cached == 0 and self.pool.num_free:
                self.booking.share_header(state.session, plan)
            cost = len(tokens) + state.session.num_uncached
            item = Advance(state.session, tokens)  # its logit rows are set once the due points are final
            if not self.eviction.make_room(plan.advances + [item]):
                self.backlog.put_back(state, chunks)
                self.stats.deferred += 1
                continue
            plan.advances.append(item)
            plan.streams.append(state)
            plan.chunks.append(chunks)
            plan.cuts.append(cuts_of(state, chunks, closes))
            if evicted:
                plan.rebuilt.append(state)
            budget -= cost
        plan.tokens_left = budget
        return plan


def take_chunks(state: Stream, budget: int, first: bool) -> tuple[list[Chunk], list[bool]]:
    """Whole chunks up to the budget and the window (an oversized chunk goes alone into an empty batch),
    and whether each closes a tick group: a cut chunk, or the last one pending."""
    chunks: list[Chunk] = []
    closes: list[bool] = []
    used = state.session.num_uncached
    room = state.roll_at - len(state.session.tokens)
    while state.pending:
        size = len(state.pending[0].tokens)
        fits_budget = used + size <= budget or (first and not chunks)
        fits_window = size <= room or not chunks  # a roll happens before the first chunk only
        if not (fits_budget and fits_window):
            break
        chunk = state.pending.popleft()
        chunks.append(chunk)
        closes.append(chunk.cut or not state.pending)
        used += size
        room -= size
    return chunks, closes
