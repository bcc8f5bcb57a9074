"""Probe placement: where the jobs of one forward go, within the probe budget, the model's positions and the pool.

On-demand jobs (asks) are placed first, each whole or not at all: one past the probe budget waits for a later
forward unless it would go alone, one whose session is not resident waits unless eviction makes room. Standing
queries are placed at the cuts (due points) of the planned advances, in order; once the probe budget is spent the
rest of an advance is handed back to its stream's queue, so no due point is ever skipped. A probe that would pass
the model's positions fails with the reason instead of running.
"""

from __future__ import annotations

from collections import deque

from engine.backlog_counts import BacklogCounts
from engine.batch import Probe
from engine.block_manager import BlockManager
from engine.forward_plan import Plan
from engine.jobs import JobOutcome, ProbeJob, QueryPlanner
from engine.lru_eviction import LruEviction
from engine.quoting import quoted
from engine.scheduler_stats import SchedulerStats
from engine.stream import Stream


class ProbePlacement:
    def __init__(self, streams: dict[str, Stream], blocks: BlockManager, stats: SchedulerStats,
                 backlog: BacklogCounts, eviction: LruEviction, asks: deque[ProbeJob], idle: deque[ProbeJob]) -> None:
        # all the scheduler's own, shared: a job that must wait goes back to its queues
        self.streams = streams
        self.blocks = blocks
        self.pool = blocks.pool
        self.stats = stats
        self.backlog = backlog
        self.eviction = eviction
        self._asks = asks
        self._idle = idle

    def add_due(self, plan: Plan, budget: int, planner: QueryPlanner, first: int = 0) -> int:
        """Ask the planner what is due at every cut of the planned advances (from advance ``first`` on: a segment
        added by a roll inside the forward), in order, and place each job at its cut. Once the probe budget is
        spent the rest of the advances waits for a later forward (from its first unchecked cut on), so a due
        point is never skipped; the first cut gets its queries even past the budget (like an oversized job),
        unless on-demand asks took all of it. Returns the budget left."""
        keep: list[int] = []
        for i in range(first, len(plan.streams)):
            kept = len(plan.chunks[i])
            for cut in plan.cuts[i]:
                if budget <= 0:
                    kept = cut.chunk
                    break
                for job in planner.due([cut.progress]):  # standing queries: their stream's KV is resident
                    if not job.latest:
                        job.cut, job.at = cut.position, cut.progress
                        cut.jobs.append(job)
                        plan.job_items[id(job)] = plan.advances[i]  # it reads that segment's session
                    if job.idle:
                        self._idle.append(job)
                    elif (reason := self._window_problem(job, plan)) is not None:
                        self.stats.jobs_failed += 1
                        plan.failed.append(JobOutcome(job, error=reason))
                    else:
                        plan.jobs.append(job)
                        budget -= job.num_tokens
            keep.append(kept)
        for i in reversed(range(first, first + len(keep))):
            if keep[i - first] < len(plan.chunks[i]):
                self._truncate(plan, i, keep[i - first])
        return budget

    def _truncate(self, plan: Plan, i: int, kept: int) -> None:
        """Hand the chunks of advance ``i`` from ``kept`` on back to the stream's queue (dropping the advance
        when none is left); they had no due check yet."""
        state, chunks = plan.streams[i], plan.chunks[i]
        back = chunks[kept:]
        self.backlog.put_back(state, back)
        self.stats.probes_deferred += 1
        if kept == 0:
            for field_ in (plan.advances, plan.streams, plan.chunks, plan.cuts):
                del field_[i]
            return
        del chunks[kept:]
        plan.cuts[i] = [c for c in plan.cuts[i] if c.chunk < kept]
        plan.advances[i].tokens = [t for c in chunks for t in c.tokens]

    def add_job(self, plan: Plan, job: ProbeJob, budget: int, make_room: bool) -> int:
        """Add ``job`` to the plan if it fits the window, the probe budget and the pool; returns the budget left."""
        reason = self._window_problem(job, plan)
        if reason is not None:  # (asks only: due jobs are placed by add_due)
            self.stats.jobs_failed += 1
            plan.failed.append(JobOutcome(job, error=reason))
            return budget
        over_budget = job.num_tokens > budget and bool(plan.jobs)  # an oversized job goes alone
        if over_budget or (make_room and not self._room_for(plan, job)):
            self.stats.probes_deferred += 1
            self._asks.append(job)
            return budget
        plan.jobs.append(job)
        return budget - job.num_tokens

    def _room_for(self, plan: Plan, job: ProbeJob) -> bool:
        """Whether the pool holds ``job``'s probes beside the plan, evicting idle sessions if it must. A probe
        allocates no blocks of its own (blocks_needed): only a session whose KV is not resident and not yet
        in the plan needs room, so the common case costs nothing and a flood of asks stays linear."""
        session = self.streams[job.stream].session
        resident = self.pool.blocks_for(len(session.tokens)) <= len(session.blocks)
        if resident or any(a.session is session for a in plan.advances) or any(
                j.stream == job.stream for j in plan.jobs):
            return True
        probes = [Probe(session, tokens, job.logits, job.cut, job.overlap) for tokens in job.probes]
        return self.eviction.make_room(plan.advances + plan.probes(self.streams) + probes)

    def _window_problem(self, job: ProbeJob, plan: Plan) -> str | None:
        """A probe may not run past the model's positions; the job fails with the reason instead."""
        state = self.streams[job.stream]
        start = job.cut
        if start is None:  # an ask: after everything committed and everything this plan advances
            start = len(state.session.tokens) + sum(len(a.tokens) for a in plan.advances
                                                    if a.session is state.session)
        longest = max((len(p) for p in job.probes), default=0)
        limit = self.blocks.max_positions
        if start - job.overlap + longest <= limit:
            return None
        return (f"probe of {longest} tokens on stream {quoted(job.stream)} would pass the model's {limit} positions "
                f"(raise scheduler.probe_reserve or shorten the question)")
