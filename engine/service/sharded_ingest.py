"""A sharded front door's ticks in: a wire message (raw or tokenized ticks) decoded and encoded here, checked (shed
while behind, each shard's admission limits), written to the tick log and appended to the buffer of the stream's
shard (rendezvous hashing picks it), a tick group per stream a message feeds; the refusals counted. A mixin of
ShardedPipeline (sharded.py), whose state it reads, as tick_ingest.py is one engine's: the ingest path is per tick,
so it adds no call of its own."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Callable

from connectors.encoder import EncodedTick, Ingested, StreamEncoders, listed_ticks
from connectors.ticks import InvalidTick
from engine.scheduler import new_stream_problem
from engine.service.adaptation import AnswerAdaptation
from engine.service.config import ServiceConfig
from engine.service.durability import DataDir
from engine.service.live_scores import LiveScores
from engine.service.move_marks import move_mark
from engine.service.new_stream_budget import NewStreamBudget
from engine.service.rejections import admission_limit
from engine.service.rendezvous import shard_for
from engine.service.shard import GroupEnd
from engine.service.shard_link import ShardLink
from engine.service.shedding import ShedCounts
from engine.service.pipeline import log_or_refuse
from engine.service.receive_clock import ReceiveClock
from engine.service.when_behind import conflating, overloaded, shed_message


class ShardedIngest:
    """ShardedPipeline's ingest (a mixin: it feeds the front door's tick log, encoders and shard buffers)."""

    config: ServiceConfig
    encoders: StreamEncoders
    data: DataDir
    scores: LiveScores
    adaptation: AnswerAdaptation
    ticks_in: int
    rejected: Counter[str]
    shed_counts: ShedCounts
    links: list[ShardLink]
    shard_of: dict[str, ShardLink]
    max_streams_admitted: int
    window: int
    shard_kv_cells: int
    behind: bool
    pending_tokens: Callable[[], int]
    lag_s: Callable[[], float]
    new_streams: NewStreamBudget
    streams_refused_here: int
    _reading_wire: bool = False  # (while a wire message is ingested: _wire_message)
    _read_ns: int | None = None  # ... and when it was read (its ticks' clock offsets: receive_clock.py)
    _read_before: Mapping[int, int] = {}  # ... or, held by a reorder window, its ticks' reads by ts (tick_ingest.py)
    receive_clock: ReceiveClock
    _grouping: dict[ShardLink, set[str]]
    _names: list[str]
    _by_name: dict[str, ShardLink]

    def _owner(self, stream: str) -> ShardLink:
        link = self.shard_of.get(stream)
        if link is None:
            link = self.shard_of[stream] = self._by_name[shard_for(stream, self._names)]
            link.streams.add(stream)
        return link

    def ingest_message(self, data: bytes, read_before: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
        """(TickIngest.ingest_message's, ``read_before`` included.)"""
        if (shed := shed_message(self, data, tokenized=False)) is not None:
            return shed
        with self.data.items.message(listed_ticks(data)), self._wire_message(read_before) as read_ns:
            return self._counted(self.encoders.ingest_message(data, self._submit, conflating(self), read_ns))

    @contextmanager
    def _wire_message(self, read_before: Mapping[int, int] | None) -> Iterator[int]:
        """A wire message read now (its read time, which its ticks' clock offsets are taken from, or from
        ``read_before``'s for ticks a reorder window held): the new streams it opens are bounded
        (new_stream_budget.py), as one engine's are; quotes conflation held past their message are not (they were
        read with it)."""
        self.new_streams.message_started()
        self._reading_wire, self._read_ns, self._read_before = True, time.time_ns(), read_before or {}
        try:
            yield self._read_ns
        finally:
            self._reading_wire, self._read_ns, self._read_before = False, None, {}

    def flush_held(self) -> list[dict[str, Any]]:
        """Submit the quotes conflation holds (before each round of shard calls), logged as a message of their own
        as one engine logs them (TickPipeline.flush_held); returns the rejections."""
        if not self.encoders.held:
            return []
        with self.data.items.message(len(self.encoders.held)):
            return self._counted(self.encoders.flush_held(self._submit))

    def ingest_tokenized(self, data: bytes, read_before: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
        """(TickIngest.ingest_tokenized's, ``read_before`` included.)"""
        if (shed := shed_message(self, data, tokenized=True)) is not None:
            return shed
        with self.data.items.message(listed_ticks(data)), self._wire_message(read_before) as read_ns:
            return self._counted(self.encoders.ingest_tokenized(data, self._submit, read_ns))

    def _counted(self, result: Ingested) -> list[dict[str, Any]]:
        """After a whole message: its tick group ends on each stream it fed (GroupEnd, in the shard's items, as one
        engine closes it), then it is counted."""
        for link, streams in self._grouping.items():
            link.buffer.append(GroupEnd(tuple(sorted(streams))))
        self._grouping.clear()
        self.ticks_in += result.ticks
        for r in result.rejections:
            self.rejected[r.reason] += r.count
            if r.reason == "overloaded" and r.stream is not None:
                self.shed_counts.add(r.stream, r.count)
        return [r.to_wire() for r in result.rejections]

    def shed_refusal(self, stream: str | None, _waited_s: float = 0.0) -> InvalidTick | None:
        """Why a tick of ``stream`` is refused with when_behind: shed: behind (as the shards' last replies say: the
        front door knows no stream's share of their backlogs, so every stream is refused alike, however long its
        tick waited); None otherwise."""
        return overloaded(self.pending_tokens(), self.lag_s(), self.config.limits, stream) if self.behind else None

    def _submit(self, item: EncodedTick) -> None:
        """Every check, then the log, then the shard's buffer: the log holds exactly the accepted items."""
        if self.config.limits.when_behind == "shed" and (refusal := self.shed_refusal(item.stream)) is not None:
            raise refusal
        if item.stream not in self.shard_of:
            # a wire message's flood of names bounded first, then each shard's admission, as one engine checks them
            problem = self.new_streams.refusal(item.stream) if self._reading_wire else None
            problem = problem or self._admission_problem(item.stream)
            if problem is not None:
                self.streams_refused_here += 1
                raise InvalidTick("stream_refused", problem, item.stream)
        log_or_refuse(self.data, item)
        link = self._owner(item.stream)
        link.buffer.append((item.stream, item.tokens, item.ts, item.ticks, time.time_ns(),  # (accepted now)
                            move_mark(item.tick)))
        link.buffered_tokens += len(item.tokens)
        self._grouping.setdefault(link, set()).add(item.stream)
        self.adaptation.accepted(item)
        self.scores.accepted(item)
        if self._read_ns is not None:  # (a wire tick: a quote conflation held past its message has no read time)
            self.receive_clock.accepted(item.stream, item.ts, self._read_before.get(item.ts, self._read_ns))

    def admission_limit(self) -> str:
        """Which limit of each shard turns new streams away (rejections.admission_limit)."""
        config = self.config.scheduler
        return admission_limit(config.max_streams, config.when_full, self.max_streams_admitted, self.window,
                               self.shard_kv_cells, shards=len(self.links))

    def _admission_problem(self, stream: str) -> str | None:
        """Scheduler.admission_problem's check for the shard the stream would go to (its limits are per shard)."""
        held = len(self._by_name[shard_for(stream, self._names)].streams)
        return new_stream_problem(stream, held, self.config.scheduler, self.max_streams_admitted, self.window)
