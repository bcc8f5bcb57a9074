"""A stream expired or dropped from one engine's every layer. Idle past scheduler.stream_idle_s (``expire_idle``), its
KV is freed and its context kept (its tokens, codec state, trigger state, adaptation and latest answers: `get` still
reads them, and its next tick goes on as if it had never expired, engine/kept_contexts.py); at an operator's request
(``forget_stream``, refused as StreamBusy while data or an ask waits on it), or once an expired one is forgotten past
scheduler.expired_streams_kept: its session, its encoder's ordering and codec state, its receive clock and what the
queries held of it go. Each is logged first so a restart does it at the same point. A mixin of TickPipeline
(pipeline.py), whose state it reads; the sharded front door drops a stream its own way (sharded.py), with the same
StreamBusy."""

from __future__ import annotations

import time

from connectors.encoder import StreamEncoders
from engine.engine import Engine
from engine.quoting import quoted
from engine.service.adaptation import AnswerAdaptation
from engine.service.durability import DataDir
from engine.service.expired_streams import EXPIRE_PER_TURN
from engine.service.heap_memory import return_memory
from engine.service.live_scores import LiveScores
from engine.service.receive_clock import ReceiveClock
from engine.service.shedding import Shedding
from engine.service.untrained_tokens import UntrainedTokens
from queries.cache import AnswerCache
from queries.flash import FlashQueries
from queries.registry import Registry


def forget_answer_side(registry: Registry, cache: AnswerCache, stream: str) -> None:
    """What the answer side keeps of an expired stream (an `interval` query's grid, its topics' seqs), gone once
    its ordering guard is forgotten (scheduler.expired_streams_kept): it comes back as a new stream, whose topics'
    seqs go on above every seq forgotten (AnswerCache.forget_topics), so none is handed out twice."""
    topics = [spec.topic_for(stream) for spec in registry.matching(stream)]
    registry.drop_stream(stream, keep_grid=False)  # after the lookup, which caches the queries it matched
    cache.forget_topics(topics)


class StreamBusy(RuntimeError):
    """A stream cannot be forgotten now: data or a query job waits on it (the same request, later, is served)."""


class StreamRemoval:
    """TickPipeline's stream expiry and `forget` (a mixin: it drops a stream from the pipeline's every layer)."""

    engine: Engine
    encoders: StreamEncoders
    receive_clock: ReceiveClock
    shedding: Shedding  # (its streams' newer ticks refused: dropped with the stream)
    registry: Registry
    cache: AnswerCache
    flash: FlashQueries
    scores: LiveScores
    adaptation: AnswerAdaptation
    untrained: UntrainedTokens  # (the streams that sent a token the model never trained on)
    data: DataDir | None
    ingest_unread_s: float  # (told by the server) how long its ingest queue has held unread messages

    def expire_idle(self) -> list[str]:
        """Drop streams idle past scheduler.stream_idle_s from every layer, at most EXPIRE_PER_TURN a call (the
        rest at the next); returns their names. While the server's ingest queue holds unread messages (for
        ``ingest_unread_s``), a stream's next ticks may be among them, so it must be idle that much longer: every
        unread message came within ``ingest_unread_s``, so a stream idle past both was silent for stream_idle_s
        on its feed's side too, and an engine behind still expires what a caught-up one would (an engine behind on
        a burst never expires a quiet stream between two of its ticks read seconds apart). Messages whose ticks'
        ts is the wall clock date the wait (how far behind the reading is: seconds); undated ones count from the
        first turn that found them until a read empties the queue (ingest_reading.py). The expired streams
        whose guards are no longer kept (scheduler.expired_streams_kept) are forgotten here too (``_forget``)."""
        now_ns = time.time_ns() - int(self.ingest_unread_s * 1e9)
        expired = self.engine.scheduler.expire_idle(now_ns, limit=EXPIRE_PER_TURN)
        for stream in expired:
            if self.data is not None:
                self.data.items.log_expired(stream)
            self.encoders.drop(stream)
            self.receive_clock.drop(stream)
            self.shedding.newer_refused.pop(stream, None)
            self._drop_expired_answers(stream)
        for stream in self.encoders.take_forgotten():
            self.engine.scheduler.kept.forget(stream)
            self._drop_answer_state(stream, keep_grid=False)
            forget_answer_side(self.registry, self.cache, stream)
        if expired:
            return_memory()
        return expired

    def forget_stream(self, stream: str) -> None:
        """Drop ``stream`` from every layer at an operator's request, as an expiry does, and its ordering guard
        too: its next tick, of any time, starts it afresh (a stream a tick stamped ahead of the clock blocks).
        Logged first (a restart forgets it at the same point); raises LogWriteError, forgetting nothing, when
        the log refuses that, and StreamBusy while data or a query job waits on it."""
        if self.engine.scheduler.waiting_on(stream):
            raise StreamBusy(f"stream {quoted(stream)} has data or an ask waiting for a forward: send the request "
                             f"again in a moment (or once its feed is stopped)")
        if self.data is not None:
            self.data.items.log_forgotten(stream)
        self.engine.scheduler.drop(stream)
        self.encoders.forget(stream)
        self.receive_clock.drop(stream)
        self.shedding.newer_refused.pop(stream, None)
        self._drop_answer_state(stream, keep_grid=False)

    def _drop_expired_answers(self, stream: str) -> None:
        """What an expiry frees on the answer side: the answers made ready ahead (decoded ahead of a next tick that
        may be hours away). Its latest answers stay cached (~200 bytes each, against the KV it gave back), so `get`
        keeps a quiet name's standing answer, said idle (control_asks.py), until its next tick replaces it or its
        context is given up past scheduler.expired_streams_kept (``_drop_answer_state``, logged: a restart drops
        them there too). What decides its next answers stays with its kept context (its trigger counts and marks,
        its answers' adaptation and live scores), so they are those a run where it never expired (a backtest)
        gives."""
        self.flash.drop_stream(stream)
        self.cache.pack_stream(stream)  # (kept packed: a quarter of the memory, for a scanner's many quiet names)

    def _drop_answer_state(self, stream: str, keep_grid: bool = True) -> None:
        """What the queries held of ``stream`` (triggers, cached answers, flash state, scores, adaptation, the
        answer log's marks), gone with its context: a `forget`, or an expired stream forgotten past
        scheduler.expired_streams_kept."""
        self.registry.drop_stream(stream, keep_grid=keep_grid)
        self.cache.drop_stream(stream)
        self.flash.drop_stream(stream)
        self.scores.drop_stream(stream)
        self.adaptation.drop_stream(stream)
        self.untrained.drop(stream)
        if self.data is not None:
            self.data.answers.forget_stream(stream)
