"""The drain on stop: what the feeds already handed to the ingest sockets is read and computed (and its answers
published) within limits.drain_s of the stop, each forward sized to the time left, and what was left is said."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from engine.service.config import ServiceConfig
from engine.service.expired_streams import ExpiredStreamsLine
from engine.service.forward_pace import ForwardPace
from engine.service.pipeline import TickPipeline
from engine.service.sharded import ShardedPipeline

# the end of limits.drain_s kept for a last read of the ingest queues (at most this, and a tenth of drain_s): what
# came while the stop computed is read (accepted and logged), not dropped with the socket
LAST_READ_S = 1.0
LAST_READ_SHARE = 0.1
# a stop's forwards are each sized to this share of the time it has left, at the recent forwards' pace: one that runs
# twice as slow as they did (a loaded machine's pace moves) still ends in time
FORWARD_SHARE_OF_TIME_LEFT = 0.5
# each read of the ingest queues during a stop takes at most this share of the time left: a feed that keeps them
# full must leave the stop time to compute what it read
READ_SHARE_OF_TIME_LEFT = 0.5


@dataclass
class DrainDone:
    """What a stop's drain did: messages read, tokens computed, forwards, and the seconds of each."""

    read: int = 0
    drained: int = 0
    forwards: int = 0
    read_s: float = 0.0
    compute_s: float = 0.0


class StopDrain:
    """The Server's drain on stop (a mixin: it steps the server's engine and reads its ingest sockets)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    serve_hints: bool
    _stop_requested: float | None  # monotonic time of the first stop(): limits.drain_s counts from it
    _pace: ForwardPace
    _expired_line: ExpiredStreamsLine

    def _drain(self) -> None:
        """On stop: compute (and publish) what was accepted first, then read what the feeds already handed to the
        ingest sockets and compute that, again while more arrives meanwhile; then read once more right before the
        sockets close (accepted and logged: a restart owes their answers), so only what is still on the wire when
        they close is lost, not whatever came while the drain computed. All of it within limits.drain_s of the
        stop: each forward sized to a share of the time left (at the recent forwards' pace), each read given at
        most READ_SHARE_OF_TIME_LEFT of it (a feed that keeps the queue full took the whole drain_s in reading, and
        nothing was computed: review351 #11), the last read given the end of it, reading stopped at the deadline;
        what was not read stays unaccepted (a feed resumes from `streams`). Say what it did and what is left."""
        drain_s = self.config.limits.drain_s
        deadline = (self._stop_requested or time.monotonic()) + drain_s
        compute_until = deadline - min(LAST_READ_S, LAST_READ_SHARE * drain_s)  # the rest is the last read's
        done = DrainDone()
        self._compute_until(compute_until, done)
        while (now := time.monotonic()) < compute_until:
            started = now
            more = self._read_queued_ingest(now + READ_SHARE_OF_TIME_LEFT * (compute_until - now))
            done.read, done.read_s = done.read + more, done.read_s + time.monotonic() - started
            if not more:
                break
            self._compute_until(compute_until, done)
        started = time.monotonic()
        done.read += self._read_queued_ingest(deadline)  # (accepted, not computed: left)
        done.read_s += time.monotonic() - started
        self._say_drained(done, unread=time.monotonic() >= deadline and self._ingest_unread())
        self._expired_line.say(time.monotonic(), stopping=True)  # the log accounts for every expiry

    def _compute_until(self, until: float, done: DrainDone) -> None:
        """Forwards over what is pending, each sized to a share of the time left before ``until``."""
        started, pending = time.monotonic(), self.pipeline.pending_tokens()
        while self.pipeline.busy and (tokens := self._pace.tokens_within(
                FORWARD_SHARE_OF_TIME_LEFT * (until - time.monotonic()))):
            self._step(tokens)
            done.forwards += 1
        done.drained += max(0, pending - self.pipeline.pending_tokens())
        done.compute_s += time.monotonic() - started

    def _say_drained(self, done: DrainDone, unread: bool) -> None:
        read, drained, left = done.read, done.drained, self.pipeline.pending_tokens()
        drain_s = self.config.limits.drain_s
        if not self.serve_hints:
            return
        if read:
            print(f"flashtick: read {read} messages the feeds had queued before stopping; a message sent after this "
                  f"is not read (a feed resumes from `streams` once the service is back: `flashtick feed` does)",
                  file=sys.stderr, flush=True)
        if unread:
            print(f"flashtick: stopped reading at limits.drain_s={drain_s:g} s with messages still queued at the "
                  f"ingest sockets: they are not accepted (a feed resumes from `streams` once the service is back: "
                  f"`flashtick feed` does)", file=sys.stderr, flush=True)
        if drained or left:
            print(f"flashtick: drained {drained} pending tokens before stopping"
                  + (f"; {left} still pending after limits.drain_s={drain_s:g} s" if left else "")
                  + f" ({done.forwards} forwards in {done.compute_s:.1f} s; {done.read_s:.1f} s reading the "
                    f"ingest queues)", file=sys.stderr, flush=True)
