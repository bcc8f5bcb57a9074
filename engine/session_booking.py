"""Booking a stream's session outside a forward: rolls applied, chunks placed uncomputed, the shared header adopted.

A roll (engine/context_rolls.py says where and what it keeps) frees the session's KV and cuts its token log; a chunk
booked uncomputed (a restart replaying its tick log, queued chunks a later roll drops before anything reads them)
goes in the log where a forward over it would place it; a session whose KV is gone starts again from the shared
header's blocks. What is left to compute is computed by the next forward that touches the session (or by
Scheduler.plan_rebuild), so the log and its KV end exactly where chunk-by-chunk forwards would leave them.
"""

from __future__ import annotations

from engine.backlog_counts import BacklogCounts
from engine.block_manager import BlockManager
from engine.context_rolls import ContextWindow
from engine.forward_plan import Plan
from engine.scheduler_stats import SchedulerStats
from engine.session import Session
from engine.stream import Stream


class SessionBooking:
    def __init__(self, blocks: BlockManager, context: ContextWindow, stats: SchedulerStats, backlog: BacklogCounts,
                 header: Session | None) -> None:
        self.blocks = blocks
        self.context = context
        self.stats = stats  # the scheduler's: rolls and skipped tokens are counted there
        self.backlog = backlog
        self.header = header  # the tokens every session starts with, prefilled once (Scheduler.header)

    def skip_discarded(self, state: Stream) -> None:
        """Book without computing the queued chunks that a later roll in the same queue drops before anything
        reads them: a burst of many ticks in one group (a reconnecting feed, a replay's batch, a step that
        found a stream far behind) costs the window it ends with, not every window it passes through.

        A chunk is skipped only when it closes no group and is no due point (``Chunk.checked``) and neither is
        any chunk before it (no standing query is due there), and a roll happens at a later chunk that itself is
        neither: the roll re-encodes what it keeps, so every answer equals the one computed chunk by chunk; only
        the surprise of the first chunk after the skip loses its first token's term (the prediction before it was
        never computed: ``next_token_logits`` is cleared)."""
        skip = self.context.discarded(state)
        if not skip:
            return
        pending = state.pending
        booked = [pending.popleft() for _ in range(skip)]
        self.backlog.queued(state, booked, -1)
        for chunk in booked:
            self.book(state, chunk.tokens, chunk.event_ts, chunk.ticks)
            state.arrival_ns = chunk.arrival_ns
            self.stats.skipped_tokens += len(chunk.tokens)

    def book(self, state: Stream, tokens: list[int], event_ts: int, ticks: int) -> None:
        """Place a chunk in ``state``'s token log as a forward over it would (rolls included), uncomputed."""
        self.roll_if_needed(state, len(tokens))
        state.boundaries.append(len(state.session.tokens))
        state.session.tokens.extend(tokens)
        state.ticks += ticks
        state.event_ts = event_ts
        state.next_token_logits = None  # what follows these tokens is predicted once they are computed
        state.context_predicts = False  # (by the context they end only where a restore booked them: it says so)

    def roll_if_needed(self, state: Stream, incoming: int) -> None:
        """Keep sink + recent tokens (from a chunk boundary) when ``incoming`` more tokens (the next chunk:
        rolls go chunk by chunk) would pass the window."""
        session = state.session
        rolled = self.context.rolled(session.tokens, state.boundaries, state.roll_at, state.keep, incoming)
        if rolled is None:
            return
        self.blocks.evict(session)
        session.tokens, state.boundaries, state.roll_at = rolled
        state.context_reset = False
        state.context_predicts = False  # the rolled context is not the one that predicted the next token
        self.stats.rolls += 1

    def share_header(self, session: Session, plan: Plan) -> None:
        """A session whose KV is gone starts again from the shared header's blocks."""
        header = self.header
        if header is not None and header.num_cached and session.tokens[: len(header.tokens)] == header.tokens:
            copy = self.blocks.adopt_prefix(session, header, len(header.tokens))
            if copy is not None:
                plan.copies.append(copy)
