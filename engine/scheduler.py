"""Scheduler: the one owner of every budget. It plans each forward and books what it produced.

Budgets, all explicit numbers: the KV block pool (cells), ingest tokens per forward (``max_batch_tokens``),
streams per forward, question tokens per forward (``max_probe_tokens``) and the model's positions (``window``,
``probe_reserve``).

``plan()`` takes the streams that have waited longest first (FIFO by arrival of their oldest pending chunk, so a
quiet stream is never held back behind busy ones; engine/advance_planning.py), then on-demand jobs, then the
standing queries made due by this batch's advances (engine/probe_placement.py), then spends the token budget left
on streams stopped at a roll point, rolling them inside the forward (engine/rolls_in_forward.py); it allocates the
KV for all of it (rebuilds included) through the block manager. ``commit()`` books the forward's results and
returns the answers the jobs produced (engine/forward_commit.py).

When the pool is full the policy decides: ``evict`` drops the least recently active sessions' KV
(engine/lru_eviction.py; their token logs stay, so they rebuild exactly on next use), ``refuse`` admits a new
stream only while the pool can hold a full window for every admitted stream. Accepted data is never dropped: a
stream that cannot fit now waits in its queue.

Context limit: a session that would pass ``window`` tokens rolls (engine/context_rolls.py holds where and
what it keeps); the scheduler applies the rolls, since it owns the KV they free.
"""

from __future__ import annotations

import time
from collections import deque

import torch

from engine.advance_planning import AdvancePlanning
from engine.backlog_counts import BacklogCounts
from engine.block_manager import BlockManager
from engine.context_rolls import Booked, ContextWindow, roll_points
from engine.forward_commit import ForwardCommit
from engine.forward_plan import Plan, StepReport
from engine.kept_contexts import KeptContexts
from engine.jobs import ProbeJob, QueryPlanner, StreamProgress
from engine.lru_eviction import LruEviction
from engine.probe_placement import ProbePlacement
from engine.rebuild_planning import RebuildPlanning
from engine.rolls_in_forward import RollsInForward
from engine.scheduler_stats import SchedulerStats
from engine.session import Session
from engine.session_booking import SessionBooking
from engine.quoting import quoted
from engine.settings import SchedulerConfig
from engine.stream import Chunk, Stream, logit_rows

IDLE_EVERY = 8  # idle work (generate steps) also runs every Nth forward, so constant ingest cannot starve it


def new_stream_problem(name: str, held: int, config: SchedulerConfig, max_streams_admitted: int,
                       window: int) -> str | None:
    """Why a new stream ``name`` would be refused by a scheduler under ``config`` that holds ``held`` streams and
    admits ``max_streams_admitted`` windows of ``window`` tokens (ContextWindow.windows_in_pool); None when it would
    go in. The one check: Scheduler.admission_problem's, and a sharded front door's for the shard a stream goes to
    (whose limits are per shard), so the two refuse alike and in the same words."""
    if held >= config.max_streams:
        return f"stream {quoted(name)} refused: {held} streams are held, the limit (scheduler.max_streams)"
    if config.when_full == "refuse" and held >= max_streams_admitted:
        return (f"stream {quoted(name)} refused: the KV pool holds {max_streams_admitted} streams of {window} "
                f"tokens and all are admitted")
    return None


class AdmissionRefused(RuntimeError):
    """A new stream was refused because the KV pool cannot hold another full window."""


class UnknownStream(KeyError):
    """A question was asked of a stream that has never sent data."""


class Scheduler:
    def __init__(self, blocks: BlockManager, config: SchedulerConfig | None = None,
                 planner: QueryPlanner | None = None) -> None:
        self.blocks = blocks
        self.pool = blocks.pool
        self.config = config or SchedulerConfig()
        self.planner = planner
        # the window, what a roll keeps and where it comes, checked against the model's positions and the pool
        self.context = context = ContextWindow.fit(blocks, self.config)
        self.window, self.sink, self.keep, self.roll_at = context.window, context.sink, context.keep, context.roll_at
        self.max_streams_admitted = self.context.windows_in_pool  # for the 'refuse' policy
        self.streams: dict[str, Stream] = {}
        self.kept = KeptContexts(self.config.expired_streams_kept)  # expired streams' contexts, without their KV
        self.stats = SchedulerStats()
        self.backlog = BacklogCounts()  # what waits for a forward, counted
        # tokens every session starts with; the engine prefills them once, sessions share the blocks
        self.header = Session("__header__", list(self.config.header)) if self.config.header else None
        self.header_logits: torch.Tensor | None = None  # (vocab,) the header's prediction, once the engine has it
        self._asks: deque[ProbeJob] = deque()
        self._idle: deque[ProbeJob] = deque()
        self._plans = 0
        # the helpers that act for it, one concept each; they share its streams, counters and job queues
        self.eviction = LruEviction(blocks, self.streams, self.stats, self.config.when_full)
        self.booking = SessionBooking(blocks, self.context, self.stats, self.backlog, self.header)
        self.advance_planning = AdvancePlanning(self.streams, self.config.max_batch_streams, self.booking,
                                                self.backlog, self.eviction, self.stats, self._asks, self._idle)
        self.placement = ProbePlacement(self.streams, blocks, self.stats, self.backlog, self.eviction,
                                        self._asks, self._idle)
        self.rebuilds = RebuildPlanning(self.streams, blocks, self.booking, self.stats, self.config.max_batch_tokens)
        self.forward_commit = ForwardCommit(blocks, self.stats, self._asks, self._idle, self.progress)
        self.rolls_in_forward = RollsInForward(self.booking, self.backlog, self.eviction, self.placement, self.stats,
                                               self._asks, self._idle)

    # -- ingest and asks ------------------------------------------------------------------------

    def submit(self, stream: str, tokens: list[int], event_ts: int, ticks: int = 1, cut: bool = False,
               arrival_ns: int | None = None, received_ns: int | None = None) -> None:
        """Queue a chunk for ``stream``; ``cut`` closes its tick group (see ``close_group``); ``arrival_ns``: when
        it was accepted (freshness counts from there; default now: a front door's shard gets it later);
        ``received_ns``: when it reached the service, if it waited before that (the lag counts from there).
        Raises AdmissionRefused for a new stream the pool cannot take."""
        state = self.streams.get(stream) or self._admit(stream)
        arrival = arrival_ns or time.time_ns()
        chunk = Chunk(list(tokens), event_ts, ticks, arrival, cut, min(received_ns or arrival, arrival))
        self.backlog.push(state, chunk)
        state.last_seen_ns = chunk.arrival_ns

    def close_group(self, stream: str) -> None:
        """End ``stream``'s tick group at its latest pending chunk: standing queries are checked right after
        it, with the prefix up to it, however many groups one forward then advances. A group also ends where
        a forward takes a stream's last pending chunk, so callers that never close groups group by forward."""
        state = self.streams.get(stream)
        if state is not None and state.pending:
            state.pending[-1].cut = True

    def due_point(self, stream: str) -> int | None:
        """Make ``stream``'s latest pending chunk a due point inside its group: standing queries that asked for it
        (the query layer's price moves) are checked right after it, with the prefix up to it; the group goes on.
        Returns the stream's tick count there, None when nothing is pending (a booked chunk: no point to answer)."""
        state = self.streams.get(stream)
        if state is None or not state.pending:
            return None
        state.pending[-1].due = True
        return state.ticks + state.pending_ticks

    def accepted_ticks(self, stream: str) -> int:
        """``stream``'s ticks accepted so far, computed or waiting (0 for a stream not held): the tick count a due
        point at its latest chunk has."""
        state = self.streams.get(stream)
        return 0 if state is None else state.ticks + state.pending_ticks

    def admission_problem(self, name: str) -> str | None:
        """Why data for ``name`` would be refused now (a new stream past a limit); None when it would go in."""
        if name in self.streams:
            return None
        return new_stream_problem(name, len(self.streams), self.config, self.max_streams_admitted, self.window)

    def _admit(self, name: str) -> Stream:
        problem = self.admission_problem(name)
        if problem is not None:
            self.stats.refused_streams += 1
            raise AdmissionRefused(problem)
        state = self.kept.take(name)  # an expired stream back: its session goes on, its KV recomputed
        if state is None:
            roll_at, keep = roll_points(name, self.roll_at, self.keep, self.sink)
            state = Stream(Session(name, list(self.config.header)), roll_at=roll_at, keep=keep,
                           next_token_logits=self.header_logits,  # the first tick's first token has the header before
                           context_reset=self.kept.was_reset(name))
        self.streams[name] = state
        return state

    def ask(self, job: ProbeJob) -> None:
        """Queue an on-demand job; it runs in the next forward that has room, ahead of standing queries."""
        state = self.streams.get(job.stream)
        if state is None:
            raise UnknownStream(job.stream)
        if job.cut is None and not job.latest and not job.idle:  # answered once the ticks accepted before it are
            job.after_ticks = state.ticks + sum(chunk.ticks for chunk in state.pending)
        (self._idle if job.idle else self._asks).append(job)

    def progress(self, stream: str) -> StreamProgress:
        state = self.streams.get(stream)
        if state is None:
            raise UnknownStream(stream)
        return state.progress([], None)

    def committed(self, stream: str) -> int | None:
        """``stream``'s ticks in forwards that ran (their standing queries answered), None for a stream not held."""
        state = self.streams.get(stream)
        return None if state is None else state.ticks

    @property
    def busy(self) -> bool:
        return bool(self._asks or self._idle or self.backlog.chunks)

    @property
    def max_chunk_tokens(self) -> int:
        """The longest chunk a stream can ever place: after a roll only the sink stays before it (a stream
        whose own roll point is earlier, ``roll_points``, still places it: the window's roll point bounds
        what the model sees)."""
        return self.roll_at - self.sink

    def forward_full(self) -> bool:
        """Whether what waits fills a forward: the token budget, or (streams that stop at their roll point,
        ``roll_inside_forward`` false) a window's room for every waiting stream. Batch drivers step only then."""
        if self.config.roll_inside_forward:
            return self.backlog.tokens >= self.config.max_batch_tokens
        waiting = sum(1 for s in self.streams.values() if s.pending)
        return self.backlog.tokens >= min(self.config.max_batch_tokens, self.max_chunk_tokens * max(1, waiting))

    def pending_tokens(self) -> int:
        """Tokens accepted and not yet in a forward: the backlog."""
        return self.backlog.tokens

    def oldest_pending_ns(self) -> int | None:
        """When the oldest data still waiting for a forward reached the service (time.time_ns: a chunk's
        received_ns; a stream's chunks queue in order), None when none waits. O(streams): callers cache it."""
        if not self.backlog.chunks:
            return None
        return min((s.pending[0].received_ns for s in self.streams.values() if s.pending), default=None)

    def pending_tokens_of(self, stream: str) -> int:
        """Of the backlog, the tokens of ``stream`` (0 for a stream not held)."""
        state = self.streams.get(stream)
        return 0 if state is None else state.pending_tokens

    def streams_waiting(self) -> int:
        """Streams with tokens waiting for a forward."""
        return self.backlog.streams_waiting

    def expire_idle(self, now_ns: int | None = None, limit: int | None = None) -> list[str]:
        """Expire streams silent for ``stream_idle_s`` before ``now_ns`` (no pending data, no waiting job): their KV
        returns to the pool and their context is kept (``expire``). At most ``limit`` of them (None: all; the rest
        go at the next call). Returns them."""
        if self.config.stream_idle_s is None:
            return []
        cutoff = (now_ns or time.time_ns()) - int(self.config.stream_idle_s * 1e9)
        asked = {job.stream for job in (*self._asks, *self._idle)}
        idle = [name for name, s in self.streams.items()
                if s.last_seen_ns < cutoff and not s.pending and name not in asked][:limit]
        for name in idle:
            self.expire(name)
        self.stats.streams_expired += len(idle)
        return idle

    def expire(self, stream: str) -> None:
        """``stream`` expired (here, or in the run a tick log replays): its KV returns to the pool, its context is
        kept (engine/kept_contexts.py), so its next data goes on with the same session, as if it had never left."""
        state = self.streams.get(stream)
        self.drop(stream, give_up=False)
        if state is not None:
            self.kept.keep(state)

    def start_at(self, stream: str, ticks: int, event_ts: int,
                 booked: Booked | None = None) -> str | None:
        """A stream restored from a tick log whose first segments were dropped: its tick count and event time go
        on from where the live run had them, and its session from ``booked`` (``Scheduler.booked`` when the
        segment began; without it, from the tokens the log still holds). Returns why admission refused the
        stream (the limits changed since it was logged), None when it is held: the caller records the refusal,
        since the log may hold no later item of the stream whose refusal would say it."""
        try:
            state = self.streams.get(stream) or self._admit(stream)
        except AdmissionRefused as e:
            return str(e)
        if state.ticks == 0 and len(state.session.tokens) == len(self.config.header):  # nothing past the header
            state.ticks, state.event_ts = ticks, event_ts
            state.last_seen_ns = time.time_ns()  # restored now, like restore(): not idle since 1970
            if booked is not None:
                tokens, boundaries, roll_at = booked
                state.session.tokens, state.boundaries, state.roll_at = list(tokens), list(boundaries), roll_at
                state.next_token_logits = None  # what follows these tokens is predicted once they are computed
                state.context_predicts = True  # (by their last row: they are the live run's context)
        return None

    def waiting_on(self, stream: str) -> bool:
        """Whether ``stream`` has data waiting for a forward, or a query job waiting on it (it cannot be dropped)."""
        state = self.streams.get(stream)
        return (state is not None and bool(state.pending)) or any(
            job.stream == stream for job in (*self._asks, *self._idle))

    def drop(self, stream: str, give_up: bool = True) -> None:
        """Forget ``stream`` (forgotten; turned away): its KV returns to the pool, its context (a kept one too) is
        given up, and its next data starts a new session, marked reset. Jobs waiting on it go too (a shard told to
        forget a stream: its front door lets no ask wait on it, and a standing query's probe answers a session that
        is gone). ``give_up`` False: the caller keeps the context (``expire``)."""
        if give_up:
            self.kept.forget(stream)
        state = self.streams.pop(stream, None)
        if state is not None:
            # (the backlog's counts stay those of the streams held)
            self.backlog.queued(state, list(state.pending), -1)
            self.blocks.evict(state.session)
        for jobs in (self._asks, self._idle):
            if any(job.stream == stream for job in jobs):
                kept = [job for job in jobs if job.stream != stream]
                jobs.clear()
                jobs.extend(kept)

    # -- planning --------------------------------------------------------------------------------

    def plan(self, max_tokens: int | None = None) -> Plan | None:
        """The next forward within every budget, its KV allocated; None when there is nothing to do.
        ``max_tokens``: a smaller budget for this forward alone, its advances and probes together (a stop's last
        forwards, sized to the time it has left); one stream's next chunk and its first due queries still go."""
        self._plans += 1
        self.eviction.reset()
        advance_budget = self.config.max_batch_tokens if max_tokens is None else \
            min(max_tokens, self.config.max_batch_tokens)
        plan = self.advance_planning.plan_advances(advance_budget)
        asks = list(self._asks)
        self._asks.clear()
        # idle work runs when nothing else does, and every IDLE_EVERY plans regardless
        if self._idle and ((not plan.advances and not asks) or self._plans % IDLE_EVERY == 0):
            asks.append(self._idle.popleft())
        if not plan.advances and not asks and not plan.copies:
            return None
        budget = self.config.max_probe_tokens
        if max_tokens is not None:  # what the advances left (at least 1: the first cut's queries go past it)
            budget = min(budget, max(1, max_tokens - sum(len(item.tokens) for item in plan.advances)))
        waiting: list[ProbeJob] = []  # ticks accepted before it are still queued (a roll inside may reach them)
        for job in asks:  # on-demand first; one that cannot fit waits for the next forward
            if plan.ticks_after(self.streams[job.stream]) < job.after_ticks:
                waiting.append(job)
            else:
                budget = self.placement.add_job(plan, job, budget, make_room=True)
        if self.planner is not None:
            budget = self.placement.add_due(plan, budget, self.planner)
            for job in [job for job in plan.jobs if plan.ticks_after(self.streams[job.stream]) < job.after_ticks]:
                plan.jobs.remove(job)  # the probe budget handed part of its stream's advance back
                self._asks.append(job)
        if self.config.roll_inside_forward and max_tokens is None:  # (a stop's forwards: advances + probes <= it)
            budget = self.rolls_in_forward.extend(plan, budget, self.planner)  # the budget left goes past roll points
        for job in waiting:
            if plan.ticks_after(self.streams[job.stream]) < job.after_ticks:
                self._asks.append(job)
            else:
                budget = self.placement.add_job(plan, job, budget, make_room=True)
        if not plan.advances and not plan.jobs and not plan.copies and not plan.failed:
            return None
        planned: set[int] = set()  # streams with an earlier segment in this forward (its commit predicts the next)
        for item, chunks, cuts, state in zip(plan.advances, plan.chunks, plan.cuts, plan.streams):
            # a restored stream with no prediction of its next token gets it from the context its first segment
            # rebuilds: its first chunk's surprise counts every token (review401 #1: one restored beyond the pool,
            # its rebuild left to its next forward, lost its first token's NLL). Not after a skip or roll: the
            # context then is not the one that predicted it, and the token is left out as before
            row_before = (state.next_token_logits is None and state.context_predicts
                          and item.session.num_uncached > 0 and id(state) not in planned)
            planned.add(id(state))
            item.logits = logit_rows(chunks, cuts, row_before)
        items = plan.advances + plan.probes(self.streams)
        advancing = {id(item.session) for item in plan.advances}  # an ask on an evicted stream rebuilds it too
        plan.rebuilt += [self.streams[name] for name in dict.fromkeys(
            p.session.name for p in items[len(plan.advances):]
            if p.session.num_uncached and id(p.session) not in advancing)]
        if self.blocks.blocks_needed(items) > self.pool.num_free:
            # each piece was fitted as it was planned, so this should not happen; if it does, evicting idle
            # sessions is better than failing a forward whose chunks (accepted ticks) have left their queues
            self.stats.late_evictions += 1
            self.eviction.reset()
            self.eviction.make_room(items)
        plan.forward = self.blocks.allocate(items, plan.copies)
        return plan

    def booked(self, stream: str) -> Booked | None:
        """``stream``'s session as a replay of every item accepted so far would book it (Scheduler.restore): its
        tokens, chunk boundaries and next roll point, its pending chunks included; None for a stream not held.
        What a tick log segment keeps of each stream, so a replay that starts there (retention dropped the
        segments before) goes on with the session the live run had, rolls and all."""
        state = self.streams.get(stream)
        if state is None:
            return None
        return self.context.booked(state)

    # -- after the forward -----------------------------------------------------------------------

    def commit(self, plan: Plan, logits: list[torch.Tensor]) -> StepReport:
        """Book a forward that ran (``logits``: the runner's outputs per item) and finish its jobs
        (engine/forward_commit.py)."""
        return self.forward_commit.commit(plan, logits)

    # -- restoring booked streams (a restart replaying its tick log) ----------------------------------

    def restore(self, stream: str, tokens: list[int], event_ts: int, ticks: int = 1) -> None:
        """Book an already-accepted chunk without computing it: the token log, rolls, chunk boundaries,
        tick count and event time end exactly where forwards over the same chunks would leave them (a roll
        depends on token counts and chunk boundaries only). The KV of what is left in the window is computed
        once, by ``plan_rebuild`` or the stream's next forward. Raises AdmissionRefused like ``submit``."""
        state = self.streams.get(stream) or self._admit(stream)
        if state.pending:
            raise ValueError(f"stream {quoted(stream)} has chunks waiting for a forward: restore before live data")
        self.booking.book(state, tokens, event_ts, ticks)
        state.context_predicts = True  # its context ends as the live run's did: its last row is the next prediction
        state.last_seen_ns = time.time_ns()

    def plan_rebuild(self) -> Plan | None:
        """A forward that computes the KV of restored sessions (tokens booked, not cached), within the token
        budget and the free pool; it evicts nothing, so streams beyond the pool are rebuilt by their next
        forward instead. None when there is nothing (more) to rebuild (engine/rebuild_planning.py plans it)."""
        return self.rebuilds.plan()

    def commit_rebuild(self, plan: Plan, logits: list[torch.Tensor]) -> None:
        self.rebuilds.commit(plan, logits)

    def kv_summary(self) -> dict[str, int]:
        pool = self.pool
        return {
            "kv_cells_capacity": pool.capacity_cells,
            "kv_cells_used": pool.used_cells,
            # the most cells ever held at once, up to the highest block taken: on the CPU the pool's memory is
            # committed as its cells are first written, so this x kv_cell_bytes is what the pool holds resident
            "kv_cells_touched": pool.touched_blocks * pool.block_size,
            "sessions_resident": sum(1 for s in self.streams.values() if s.session.blocks),
            "streams": len(self.streams),
            "contexts_kept": len(self.kept),
            "contexts_resumed": self.kept.resumed,
            "contexts_given_up": self.kept.given_up,
        }


__all__ = ["Scheduler", "SchedulerConfig", "AdmissionRefused", "UnknownStream"]
