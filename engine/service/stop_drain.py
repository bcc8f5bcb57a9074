"""The drain on stop: what the feeds already handed to the ingest sockets is read and computed (and its answers
published) within limits.drain_s of the stop, each forward sized to the time left, and what was left is said."""

from __future__ import annotations

import sys
import time

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


class StopDrain:
    """The Server's drain on stop (a mixin: it steps the server's engine and reads its ingest sockets)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    serve_hints: bool
    _stop_requested: float | None  # monotonic time of the first stop(): limits.drain_s counts from it
    _pace: ForwardPace
    _expired_line: ExpiredStreamsLine

    def _drain(self) -> None:
        """On stop: read what the feeds already handed to the ingest sockets and compute (and publish) what was
        accepted, again while more arrives meanwhile; then read once more right before the sockets close (accepted
        and logged: a restart owes their answers), so only what is still on the wire when they close is lost, not
        whatever came while the drain computed. All of it within limits.drain_s of the stop: each forward sized to
        a share of the time left (at the recent forwards' pace), the last read given the end of it, reading stopped
        at the deadline; what was not read stays unaccepted (a feed resumes from `streams`). Say what is left."""
        drain_s = self.config.limits.drain_s
        deadline = (self._stop_requested or time.monotonic()) + drain_s
        compute_until = deadline - min(LAST_READ_S, LAST_READ_SHARE * drain_s)  # the rest is the last read's
        read = self._read_queued_ingest(compute_until)
        drained = 0  # tokens computed by the drain: pending before each round of forwards less pending after it
        while True:
            pending = self.pipeline.pending_tokens()
            while self.pipeline.busy and (tokens := self._pace.tokens_within(
                    FORWARD_SHARE_OF_TIME_LEFT * (compute_until - time.monotonic()))):
                self._step(tokens)
            drained += max(0, pending - self.pipeline.pending_tokens())
            if time.monotonic() >= compute_until or not (more := self._read_queued_ingest(compute_until)):
                break
            read += more
        read += self._read_queued_ingest(deadline)  # (accepted, not computed: left)
        self._say_drained(read, drained, unread=time.monotonic() >= deadline and self._ingest_unread())
        self._expired_line.say(time.monotonic(), stopping=True)  # the log accounts for every expiry

    def _say_drained(self, read: int, drained: int, unread: bool) -> None:
        left = self.pipeline.pending_tokens()
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
                  + (f"; {left} still pending after limits.drain_s={drain_s:g} s" if left else ""),
                  file=sys.stderr, flush=True)
