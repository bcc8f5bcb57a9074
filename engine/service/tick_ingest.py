"""One engine's ticks in: a wire message (raw or tokenized ticks) or a single tick decoded, checked, written to the
tick log and queued for its session, a tick group per stream a message feeds; the refusals counted. A mixin of
TickPipeline (pipeline.py), whose state it reads: the ingest path is per tick, so it adds no call of its own.
The sharded front door ingests its own way (sharded_ingest.py) with the same tick-log append (``log_or_refuse``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any, Callable

from connectors.encoder import EncodedTick, Ingested, StreamEncoders, listed_ticks
from connectors.ticks import InvalidTick, Tick
from engine.engine import Engine
from engine.scheduler import AdmissionRefused
from engine.service.adaptation import AnswerAdaptation
from engine.service.config import ServiceConfig
from engine.service.durability import DataDir
from engine.service.live_scores import LiveScores
from engine.service.move_marks import move_mark, watch_moves
from engine.service.new_stream_budget import NewStreamBudget
from engine.service.receive_clock import ReceiveClock
from engine.service.shedding import Shedding
from engine.service.ticklog import LogWriteError
from engine.service.untrained_tokens import UntrainedTokens
from engine.service.when_behind import conflating, shed_message
from queries.registry import Registry


def log_or_refuse(data: DataDir, item: EncodedTick) -> None:
    """The tick log append that accepts a tick: a failed write refuses it, with nothing half-applied."""
    try:
        data.items.append(item)
    except LogWriteError as e:
        raise InvalidTick("log_unavailable", f"{e} (the tick was not accepted)", item.stream) from None


class TickIngest:
    """TickPipeline's ingest (a mixin: it feeds the pipeline's engine, tick log and encoders)."""

    config: ServiceConfig
    engine: Engine
    registry: Registry
    encoders: StreamEncoders
    data: DataDir | None
    receive_clock: ReceiveClock
    shedding: Shedding
    new_streams: NewStreamBudget
    scores: LiveScores
    adaptation: AnswerAdaptation
    untrained: UntrainedTokens
    ticks_in: int
    rejected: Counter[str]
    last_received_ns: int | None
    ingest_unread_s: float  # (told by the server) how long its ingest queue has held unread messages
    # the last time the server found this engine idle (nothing to compute, no message waiting on ingest); data its
    # ts dates earlier (a stalled venue's burst) waited upstream, not for the engine: its lag counts from here, so
    # `lag_s`, `behind` and when_behind: shed are the engine's own (review323 #5). None: no server tells it
    idle_at_ns: int | None
    _read_ns: int | None
    # a reorder window's release being ingested: when its ticks were read off the socket, by ts (ingest_message)
    _read_before: Mapping[int, int]
    _grouping: set[str]
    shed_refusal: Callable[..., InvalidTick | None]  # (LagCheck's) why a tick read now is refused while behind

    def ingest(self, tick: Tick) -> None:
        """Accept one validated tick: ordering check, codec, queue for its session. Raises InvalidTick,
        and then the stream's ordering and codec state are as they were. The tick joins its stream's open
        group (``end_group`` closes it; so does a forward that takes it as the stream's last pending tick)."""
        self.encoders.ingest(tick, self._submit)
        self._grouping.discard(tick.stream)  # not a message: its group stays open
        self.ticks_in += 1

    def ingest_message(self, data: bytes, read_before: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
        """Decode a wire message (one tick or a list) and ingest the good ticks, one tick group per stream;
        returns the rejections. While behind with ``when_behind: shed``, the whole message is refused unread.
        ``read_before``: for one stream's ticks a reorder window held, when each was read off the socket, by its
        ts: its clock offset is taken from then (review411 #11: taken at the release, the hold read as clock skew,
        a clock 400 ms ahead was not flagged and its data_age_ms left the hold out); its lag counts from now."""
        if (shed := shed_message(self, data, tokenized=False)) is not None:
            return shed
        with self._reading(data, read_before) as read_ns:
            return self._counted(self.encoders.ingest_message(data, self._submit, conflating(self), read_ns))

    def ingest_tokenized(self, data: bytes, read_before: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
        """Already-tokenized ticks from an out-of-process connector: a msgpack list of
        ``{stream: str, ts: int ns, tokens: [int], ticks: int}``; returns the rejections (``read_before`` as for
        ``ingest_message``)."""
        if (shed := shed_message(self, data, tokenized=True)) is not None:
            return shed
        with self._reading(data, read_before) as read_ns:
            return self._counted(self.encoders.ingest_tokenized(data, self._submit, read_ns))

    @contextmanager
    def _reading(self, data: bytes, read_before: Mapping[int, int] | None) -> Iterator[int]:
        """A wire message read now, inside its tick-log message: its read time, which every tick it submits is
        dated from (receive_clock.py), until it is ingested (``read_before``: ingest_message's)."""
        self._read_ns, self._read_before = time.time_ns(), read_before or {}
        self.new_streams.message_started()
        try:
            with self.data.items.message(listed_ticks(data)) if self.data is not None else nullcontext():
                yield self._read_ns
        finally:
            self._read_ns, self._read_before = None, {}

    def _submit(self, item: EncodedTick) -> None:
        """Every check, then the log, then the engine: the log holds exactly the accepted items."""
        read = self._read_ns  # (None for a quote conflation held past its message: it counts from its submit)
        # (what waited upstream of an idle engine is no lag)
        received = None if read is None else self.receive_clock.arrived_ns(item.stream, item.ts, read, self.idle_at_ns)
        # how long it waited before its read: what its ts says, else as long as the ingest queue held messages unread
        waited_s = self.ingest_unread_s if received is None else (read - received) / 1e9
        if self.config.limits.when_behind == "shed" and \
                (refusal := self.shed_refusal(item.stream, waited_s)) is not None:
            raise refusal
        if read is not None and item.stream not in self.engine.scheduler.streams and \
                (problem := self.new_streams.refusal(item.stream)) is not None:  # a wire message's flood of names
            self.engine.scheduler.stats.refused_streams += 1
            raise InvalidTick("stream_refused", problem, item.stream)
        if self.data is not None:
            problem = self.engine.scheduler.admission_problem(item.stream)
            if problem is not None:  # refused before the log, as the scheduler refuses without one: counted alike
                self.engine.scheduler.stats.refused_streams += 1
                raise InvalidTick("stream_refused", problem, item.stream)
            log_or_refuse(self.data, item)
        self._enqueue(item, received)
        self._accepted(item)
        if read is not None:
            self.receive_clock.accepted(item.stream, item.ts, self._read_before.get(item.ts, read))
            if received is not None:  # a tick its ts dates: the message's, the newest
                self.last_received_ns = max(received, self.last_received_ns or received)
    def flush_held(self) -> list[dict[str, Any]]:
        """Submit the quotes conflation holds (before each forward): a tick group of their own, and in the tick log
        a message of their own (logged outside any, a restart grouped them with the message before); returns the
        rejections."""
        if not self.encoders.held:
            return []
        with self.data.items.message(len(self.encoders.held)) if self.data is not None else nullcontext():
            return self._counted(self.encoders.flush_held(self._submit))

    def _accepted(self, item: EncodedTick) -> None:
        """An item the engine took (live, or replayed from the tick log): its price, for what reads marks."""
        self.adaptation.accepted(item)
        self.scores.accepted(item)
        self.untrained.accepted(item.stream, item.tokens)
        self.shedding.accepted(item.stream)
        watch_moves(self.registry, self.engine.scheduler, item.stream, item.ts, move_mark(item.tick))

    def _enqueue(self, item: EncodedTick, received_ns: int | None = None) -> None:
        try:
            self.engine.submit(item.stream, item.tokens, item.ts, item.ticks, received_ns=received_ns)
        except AdmissionRefused as e:
            raise InvalidTick("stream_refused", str(e), item.stream) from None
        self._grouping.add(item.stream)

    def _counted(self, result: Ingested) -> list[dict[str, Any]]:
        """After a whole message: close the groups it fed, count it."""
        self.engine.close_groups(self._grouping)
        self._grouping.clear()
        self.ticks_in += result.ticks
        for r in result.rejections:
            self.rejected[r.reason] += r.count
            if r.reason == "overloaded" and r.stream is not None:
                self.shedding.counts.add(r.stream, r.count)
                if r.stream in self.engine.scheduler.streams:  # (held: its answers say their newer ticks refused)
                    self.shedding.refused(r.stream, r.count)
        return [r.to_wire() for r in result.rejections]
