"""The backlog's counts: what waits for a forward, kept as the streams' queues change.

Every chunk accepted and not yet in a forward waits in its stream's queue (``Stream.pending``). The service asks
how much waits after every message (back-pressure, shedding, ``forward_full``), so the totals are kept as chunks
are queued, taken, handed back or dropped, never recounted. The arrival order kept here makes planning FIFO
across streams: the stream that has waited longest goes first.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from engine.stream import Chunk, Stream


@dataclass
class BacklogCounts:
    chunks: int = 0
    tokens: int = 0
    streams_waiting: int = 0  # streams with pending tokens
    arrivals: int = 0  # queues that went from empty to waiting, in order (Stream.waiting_since)

    def push(self, state: Stream, chunk: Chunk) -> None:
        """Queue ``chunk`` behind ``state``'s pending ones; a stream whose queue was empty waits from now."""
        if not state.pending:
            self.arrivals += 1
            state.waiting_since = self.arrivals
        state.pending.append(chunk)
        self.queued(state, [chunk], +1)

    def put_back(self, state: Stream, chunks: list[Chunk]) -> None:
        """Return ``chunks``, taken from the front of ``state``'s queue by a plan that cannot keep them, in order."""
        state.pending.extendleft(reversed(chunks))
        self.queued(state, chunks, +1)

    def queued(self, state: Stream, chunks: list[Chunk], sign: int) -> None:
        """Count ``chunks`` in (``sign`` +1) or out (-1) of ``state``'s queue; the caller moves them."""
        tokens = sign * sum(len(c.tokens) for c in chunks)
        self.chunks += sign * len(chunks)
        self.tokens += tokens
        was_waiting = state.pending_tokens > 0
        state.pending_tokens += tokens
        state.pending_ticks += sign * sum(c.ticks for c in chunks)
        self.streams_waiting += (state.pending_tokens > 0) - was_waiting


class StreamBacklog(NamedTuple):
    """What of one stream waits for a forward: its ticks and tokens, and when the oldest of them reached the service
    (its first pending chunk's ``received_ns``: a stream's chunks queue in order), None when none waits."""

    ticks: int
    tokens: int
    since_ns: int | None


def stream_backlog(state: Stream) -> StreamBacklog:
    """``state``'s backlog (O(its pending chunks))."""
    if not state.pending:
        return StreamBacklog(0, 0, None)
    return StreamBacklog(sum(c.ticks for c in state.pending), state.pending_tokens, state.pending[0].received_ns)


def longest_waiting(streams: Iterable[Stream], most: int) -> list[Stream]:
    """The ``most`` streams whose oldest waiting data reached the service first, oldest first: the names an
    operator looks at when the engine is behind, since a stream advances at most a forward's token budget per forward
    and a busy one can fall further behind than the rest (review285 #1). O(streams)."""
    return heapq.nsmallest(most, (s for s in streams if s.pending), key=lambda s: s.pending[0].received_ns)
