"""Rebuild planning: the forwards that compute the KV of restored sessions (tokens booked by ``Scheduler.restore``
from a tick log, not cached), within the token budget and the free pool (``Engine.rebuild`` runs them).
It evicts nothing, so streams beyond the pool are rebuilt by their next forward instead. A helper of the scheduler
(engine/scheduler.py), which keeps ``plan_rebuild``/``commit_rebuild`` as its entry points.
"""

from __future__ import annotations

import torch

from engine.batch import Advance
from engine.block_manager import BlockManager
from engine.forward_plan import Plan
from engine.scheduler_stats import SchedulerStats
from engine.session_booking import SessionBooking
from engine.stream import Stream


class RebuildPlanning:
    def __init__(self, streams: dict[str, Stream], blocks: BlockManager, booking: SessionBooking,
                 stats: SchedulerStats, max_batch_tokens: int) -> None:
        # the scheduler's own, shared: its streams, block manager, booking and counters
        self.streams = streams
        self.blocks = blocks
        self.booking = booking
        self.stats = stats
        self.max_batch_tokens = max_batch_tokens

    def plan(self) -> Plan | None:
        """A forward that computes the KV of restored sessions (Scheduler.plan_rebuild); None when there is nothing
        (more) to rebuild."""
        plan = Plan()
        budget = self.max_batch_tokens
        for state in self.streams.values():
            session = state.session
            if not session.num_uncached or state.pending:
                continue
            if session.num_cached == 0 and self.blocks.pool.num_free:
                self.booking.share_header(session, plan)
            item = Advance(session, [], "last")  # the last row: the prediction a next chunk's surprise starts from
            if plan.advances and session.num_uncached > budget:
                break
            if self.blocks.blocks_needed(plan.advances + [item]) > self.blocks.pool.num_free:
                break
            plan.advances.append(item)
            plan.streams.append(state)
            budget -= session.num_uncached
        if not plan.advances:
            return None
        plan.forward = self.blocks.allocate(plan.advances, plan.copies)
        return plan

    def commit(self, plan: Plan, logits: list[torch.Tensor]) -> None:
        """Book a rebuild forward that ran (Scheduler.commit_rebuild)."""
        self.blocks.commit(plan.forward)
        for state, rows in zip(plan.streams, logits):
            state.next_token_logits = rows[-1].clone()
            state.rebuilds += 1
        self.stats.rebuilt_streams += len(plan.streams)
