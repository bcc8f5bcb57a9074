"""Whether one engine is behind: how long its oldest data not yet computed has waited (``lag_s``, looked up at most
every LAG_CHECK_S), ``behind`` its limits (limits.max_backlog_tokens, limits.max_lag_s), and the when_behind: shed
check of a tick read now (``shed_refusal``; which ticks are shed, and the streams counted, is shedding.py's).
A mixin of TickPipeline (pipeline.py): the check runs on every tick while shedding, so it adds no call of its own."""

from __future__ import annotations

import time

from connectors.ticks import InvalidTick
from engine.engine import Engine
from engine.service.config import ServiceConfig
from engine.service.receive_clock import ReceiveClock
from engine.service.shedding import Backlog, Shedding

LAG_CHECK_S = 0.1  # how stale `TickPipeline.lag_s` may be


class LagCheck:
    """TickPipeline's lag and backlog (a mixin: it reads the pipeline's engine, limits and shedding)."""

    config: ServiceConfig
    engine: Engine
    shedding: Shedding
    receive_clock: ReceiveClock
    ingest_unread_s: float  # (told by the server) how long its ingest queue has held unread messages
    _lag_checked: float  # monotonic time of the last look-up of the oldest pending tick
    _pending_lag_s: float  # ... and how long it had waited then

    @property
    def behind(self) -> bool:
        """More accepted tokens wait for a forward than limits.max_backlog_tokens, or data has waited longer than
        limits.max_lag_s: accepted and not yet computed, or (``ingest_unread_s``, told by the server) unread in
        the ingest sockets' queues, where no token count sees it."""
        limits = self.config.limits
        return self.engine.scheduler.pending_tokens() > limits.max_backlog_tokens or self.lag_s() > limits.max_lag_s

    def lag_s(self) -> float:
        """Seconds the oldest data not yet computed has waited: the oldest accepted tick waiting for a forward,
        or the ingest queue left unread (``ingest_unread_s``); 0 when nothing waits. Looked up at most every
        LAG_CHECK_S (it walks the streams), so the check on every tick while shedding costs nothing."""
        now = time.monotonic()
        if now - self._lag_checked >= LAG_CHECK_S:
            oldest = self.engine.scheduler.oldest_pending_ns()
            self._lag_checked = now
            self._pending_lag_s = 0.0 if oldest is None else max(0.0, (time.time_ns() - oldest) / 1e9)
        return max(self._pending_lag_s, self.ingest_unread_s)

    def shed_refusal(self, stream: str | None, waited_s: float | None = None) -> InvalidTick | None:
        """Why a tick of ``stream`` read now is refused with when_behind: shed (``stream`` None: whether any
        stream's would be, the engine being past its bound); None to accept it (engine/service/shedding.py).
        ``waited_s``: how long the tick waited before it was read (its ts says it for a stream stamped with the
        wall clock, receive_clock.py; else as long as the ingest queue held messages unread); not given, for a
        message refused whole, its ticks' ts unread: ``read_wait_s``."""
        scheduler = self.engine.scheduler
        self.lag_s()  # (refreshes the oldest accepted tick's wait, at most every LAG_CHECK_S)
        own = 0 if stream is None else scheduler.pending_tokens_of(stream)
        waiting = scheduler.streams_waiting() + (stream is not None and own == 0)  # (the tick's stream counted)
        backlog = Backlog(scheduler.pending_tokens(), own, waiting, self._pending_lag_s,
                          self.read_wait_s(stream) if waited_s is None else waited_s)
        return self.shedding.refusal(stream, backlog)

    def read_wait_s(self, stream: str | None) -> float:
        """How long a message's ticks of ``stream`` waited before their read, their ts not looked at (a message
        refused whole): as long as the ingest queue held messages unread (``ingest_unread_s``) for a stream held
        whose ts is not the wall clock's; 0 for one stamped with the wall clock or new, whose ticks are weighed one
        by one, each by what its own ts says (a quiet feed's connection is read at once, however long a flood's
        queue on another waits: its messages are not refused whole for the flood's wait)."""
        if stream is not None and (stream not in self.engine.scheduler.streams
                                   or self.receive_clock.offset_ns(stream) is not None):
            return 0.0
        return self.ingest_unread_s
