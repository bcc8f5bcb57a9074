"""Rolls inside a forward: a stream far behind goes on past its roll point in the same forward.

Without it a forward advances a stream at most to its next roll point (engine/advance_planning.py), so a stream
that receives more than one span between rolls per forward falls behind without bound (review285 #1). Here, once
every waiting stream has its advance (FIFO, so no quiet stream waits behind a busy one) and its due queries, the
token budget left goes to the streams stopped at a roll point, one segment each per pass: the segment written so
far keeps its KV in a *retired* session (its blocks, freed once the forward is committed), and the stream's own
session rolls as the next forward would roll it (engine/session_booking.py: queued chunks a later roll drops are
booked uncomputed, then the roll), its kept tokens prefilled as a new sequence in front of its next chunks. So
each segment is the very sequence that forward would have run (same tokens, positions, cuts and logit rows), and
the answers are those of one roll per forward; what changes is how many forwards the backlog takes.

A segment is added only where the next forward would roll: no job waits at one of the stream's cuts (it reads the
tokens a roll moves), and no ask reads the stream in this forward (it reads where the forward ends). The retired
session's blocks and the new sequence's are counted together against the pool (eviction makes room, or the
stream stops at its roll point: the pool is never exceeded).
"""

from __future__ import annotations

from collections import deque

from engine.advance_planning import take_chunks
from engine.backlog_counts import BacklogCounts
from engine.batch import Advance
from engine.forward_plan import Plan
from engine.jobs import ProbeJob, QueryPlanner
from engine.lru_eviction import LruEviction
from engine.probe_placement import ProbePlacement
from engine.scheduler_stats import SchedulerStats
from engine.session import Session
from engine.session_booking import SessionBooking
from engine.stream import Stream, cuts_of


class RollsInForward:
    def __init__(self, booking: SessionBooking, backlog: BacklogCounts, eviction: LruEviction,
                 placement: ProbePlacement, stats: SchedulerStats, asks: deque[ProbeJob], idle: deque[ProbeJob]
                 ) -> None:
        # the scheduler's own, shared; the job queues are read, to leave a stream that jobs wait on unrolled
        self.booking = booking
        self.backlog = backlog
        self.eviction = eviction
        self.pool = eviction.pool
        self.placement = placement
        self.stats = stats
        self._asks = asks
        self._idle = idle

    def extend(self, plan: Plan, probe_budget: int, planner: QueryPlanner | None) -> int:
        """Spend ``plan.tokens_left`` on segments past the roll points of the streams planned, one per stream
        a pass, in the plan's (FIFO) order, until no stream can take one; the queries due at each segment's cuts
        are placed as it is added, within ``probe_budget``. Returns the probe budget left."""
        progressed = True
        while progressed and plan.tokens_left > 0:
            progressed = False
            for state in list(dict.fromkeys(plan.streams)):  # each stream once, in the order it was planned
                last = max(i for i, planned in enumerate(plan.streams) if planned is state)
                segment = len(plan.advances)  # where the segment goes, if one is added
                if plan.tokens_left > 0 and self._at_roll_point(plan, state, last) and self._segment(plan, state, last):
                    if planner is not None:
                        probe_budget = self.placement.add_due(plan, probe_budget, planner, segment)
                    # the probe budget may hand the whole segment back (its first cut had no room): the stream is
                    # rolled, but its kept tokens are prefilled by a later forward, so no roll happened in this one
                    if len(plan.advances) > segment:
                        self.stats.rolls_in_forward += 1
                    progressed = True
        return probe_budget

    def _at_roll_point(self, plan: Plan, state: Stream, last: int) -> bool:
        """Whether the forward stopped ``state`` at its roll point, and rolling it now is what the next forward
        would do: nothing reads its current session later (a job at a cut, an ask in this forward)."""
        item = plan.advances[last]
        if item.session is not state.session or not state.pending:
            return False
        if len(state.session.tokens) + len(item.tokens) + len(state.pending[0].tokens) <= state.roll_at:
            return False  # it stopped for the token budget, not at its roll point
        name = state.name
        if any(job.stream == name and job.cut is not None for job in (*self._asks, *self._idle)):
            return False  # a job waits at one of its cuts: a roll would move the tokens it reads
        return not any(job.stream == name and (job.cut is None or id(job) not in plan.job_items) for job in plan.jobs)

    def _segment(self, plan: Plan, state: Stream, last: int) -> bool:
        """Retire the segment planned so far, roll the stream and plan its next segment; False when none fits
        (the stream is then left rolled, as the next forward would leave it before taking its chunks)."""
        item = plan.advances[last]
        session = state.session
        # the segment keeps writing into the blocks it holds, through a retired session freed after the forward
        retired = Session(session.name, list(session.tokens), session.blocks, session.num_cached, session.version)
        item.session = retired
        plan.retired.append(retired)
        session.blocks, session.num_cached = [], 0
        offset = len(session.tokens)  # the segment booked in the stream's log, as its commit would book it
        for chunk in plan.chunks[last]:
            state.boundaries.append(offset)
            offset += len(chunk.tokens)
        session.tokens.extend(item.tokens)
        ticks_before = sum(c.ticks for planned, chunks in zip(plan.streams, plan.chunks) if planned is state
                           for c in chunks)
        # as the next forward would start: what a later roll drops is booked uncomputed, then the roll
        prediction, waiting = state.next_token_logits, len(state.pending)
        self.booking.skip_discarded(state)
        if len(state.pending) < waiting:  # the retired segment's commit must not undo what the skip booked
            plan.booked_after[id(item)] = (state.event_ts, state.arrival_ns)
            state.next_token_logits = prediction  # (the retired segment's surprise starts from it)
        self.booking.roll_if_needed(state, len(state.pending[0].tokens))
        chunks, closes = take_chunks(state, plan.tokens_left, first=False)
        if not chunks:
            return False
        self.backlog.queued(state, chunks, -1)
        if self.pool.num_free:
            self.booking.share_header(session, plan)
        segment = Advance(session, [t for c in chunks for t in c.tokens])
        if not self.eviction.make_room(plan.advances + [segment]):  # the retired blocks are counted too
            self.backlog.put_back(state, chunks)
            self.stats.deferred += 1
            return False
        plan.advances.append(segment)
        plan.streams.append(state)
        plan.chunks.append(chunks)
        plan.cuts.append(cuts_of(state, chunks, closes, ticks_before))
        plan.tokens_left -= len(segment.tokens) + session.num_uncached
        return True
