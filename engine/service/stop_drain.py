"""The drain on stop: what the feeds already handed to the ingest sockets is read first (accepted, and logged when
there is a tick log, so a restart owes their answers), then computed (and its answers published) within
limits.drain_s of the stop, each forward sized to the time left; what could not be read is refused as `stopping`
(the sender told on `_rejects/`, the count in the stop line), and a request to the control socket gets a reply."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import zmq

from engine.service.config import ServiceConfig
from engine.service.expired_streams import ExpiredStreamsLine
from engine.service.forward_pace import ForwardPace
from engine.service.ingest_reading import PLACING_SETTLE_MS
from engine.service.pipeline import TickPipeline
from engine.service.sharded import ShardedPipeline

# the end of limits.drain_s kept for a last read of the ingest queues (at most this, and a tenth of drain_s): what
# came while the stop computed is read (accepted and logged), not dropped with the socket
LAST_READ_S = 1.0
LAST_READ_SHARE = 0.1
# the first read, before any forward: reading a message costs a small part of computing it, and one read is accepted
# where one left unread is lost with the socket (review376 #4: computing first left 7,335 of a 30,000-tick burst
# unread). With a tick log what is read is logged and the restart answers it, so the first read may take all of
# drain_s but the last read's share; without one, what is read and not computed is lost all the same, so it takes at
# most this share of drain_s and leaves the rest to compute (a feed that keeps the queues full: review351 #11)
FIRST_READ_SHARE = 0.6
# a stop's forwards are each sized to this share of the time it has left, at the recent forwards' pace: one that runs
# twice as slow as they did (a loaded machine's pace moves) still ends in time
FORWARD_SHARE_OF_TIME_LEFT = 0.5
# each read of the ingest queues during a stop takes at most this share of the time left: a feed that keeps them
# full must leave the stop time to compute what it read
READ_SHARE_OF_TIME_LEFT = 0.5
# past limits.drain_s, what the ingest sockets still hold is read for at most this long and refused as `stopping`:
# each sender told on `_rejects/`, the count said in the stop line, where closing the socket dropped it unsaid
REFUSE_UNREAD_S = 0.5


@dataclass
class DrainDone:
    """What a stop's drain did: messages read, tokens computed, forwards, and the seconds of each."""

    read: int = 0
    refused: int = 0  # messages read past limits.drain_s and refused as `stopping`
    drained: int = 0
    forwards: int = 0
    read_s: float = 0.0
    compute_s: float = 0.0
    timed_out: bool = False  # the compute ran to the last read's share of drain_s (else the feeds went quiet first)


class StopDrain:
    """The Server's drain on stop (a mixin: it steps the server's engine and reads its ingest sockets)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    serve_hints: bool
    _stop_requested: float | None  # monotonic time of the first stop(): limits.drain_s counts from it
    _pace: ForwardPace
    _expired_line: ExpiredStreamsLine
    _answer_owed_requests: Callable[[], None]  # (control_socket.py)
    _drain_control: Callable[[], None]  # (control_socket.py)
    _sockets: dict[str, zmq.Socket]
    _unread: Callable[[], dict[str, int | None]]  # (heartbeat.py: what waits unread at the ingest socket)
    unread_at_stop: dict[str, int | None] | None = None  # ... as the sockets close (the stop line says it)

    def _drain(self) -> None:
        """On stop: first read what the feeds already handed to the ingest sockets (until they stay empty, for at
        most FIRST_READ_SHARE of limits.drain_s): read, it is accepted and logged, and a restart owes its answers,
        where unread it was lost with the socket. Then compute (and publish) what was accepted, reading again while
        more arrives meanwhile; then read once more right before the sockets close, so only what is still on the
        wire when they close is left, not whatever came while the drain computed. All of it within limits.drain_s
        of the stop: each forward sized to a share of the time left (at the recent forwards' pace), each later read
        given at most READ_SHARE_OF_TIME_LEFT of it (a feed that keeps the queue full took the whole drain_s in
        reading, and nothing was computed: review351 #11), the last read given the end of it. What the sockets
        still hold then is refused as `stopping` (REFUSE_UNREAD_S at most: each sender told on `_rejects/`, the
        count said), and every control request still owed a reply gets one. Say what it did and what is left."""
        drain_s = self.config.limits.drain_s
        deadline = (self._stop_requested or time.monotonic()) + drain_s
        compute_until = deadline - min(LAST_READ_S, LAST_READ_SHARE * drain_s)  # the rest is the last read's
        done = DrainDone()
        started = time.monotonic()
        logged = self.pipeline.data is not None
        done.read += self._read_until_settled(compute_until if logged else
                                              min(compute_until, started + FIRST_READ_SHARE * drain_s))
        done.read_s += time.monotonic() - started
        self._compute_until(compute_until, done)
        while (now := time.monotonic()) < compute_until:
            started = now
            more = self._read_queued_ingest(now + READ_SHARE_OF_TIME_LEFT * (compute_until - now))
            # a queue read empty between two messages of a feed still sending is no end: its next ones are computed
            # too, not left to the last read below (review392 #3: a stop under a live feed ended 3.4 s into drain_s 7
            # with the last read's ticks uncomputed); only feeds quiet for a moment end the loop
            if not more and not self._ingest_unread(min(PLACING_SETTLE_MS / 1000, compute_until - now)):
                done.read_s += time.monotonic() - started
                break
            done.read, done.read_s = done.read + more, done.read_s + time.monotonic() - started
            self._compute_until(compute_until, done)
        started = time.monotonic()
        # (accepted, not computed: left; a feed still sending is read to the end, what ZeroMQ took of it kept)
        done.read += self._read_until_settled(deadline, steady_flow_ends=False)
        done.read_s += time.monotonic() - started
        done.timed_out = time.monotonic() >= compute_until
        if time.monotonic() >= deadline and self._ingest_unread():
            done.refused = self._refuse_unread(time.monotonic() + REFUSE_UNREAD_S)
        self.unread_at_stop = self._unread()  # (what is still on the wire: lost with the socket, said)
        self._say_drained(done)
        self._answer_owed_requests()  # (control_socket.py: asks still waiting, requests that came meanwhile)
        self._expired_line.say(time.monotonic(), stopping=True)  # the log accounts for every expiry

    def _compute_until(self, until: float, done: DrainDone) -> None:
        """Forwards over what is pending, each sized to a share of the time left before ``until``."""
        started, pending = time.monotonic(), self.pipeline.pending_tokens()
        while self.pipeline.busy and (tokens := self._pace.tokens_within(
                FORWARD_SHARE_OF_TIME_LEFT * (until - time.monotonic()))):
            self._step(tokens)
            done.forwards += 1
            if self._sockets["control"].poll(0):  # a request meanwhile: refused as `stopping` now, not after
                self._drain_control()
        done.drained += max(0, pending - self.pipeline.pending_tokens())
        done.compute_s += time.monotonic() - started

    def _say_drained(self, done: DrainDone) -> None:
        read, drained, left = done.read, done.drained, self.pipeline.pending_tokens()
        drain_s = self.config.limits.drain_s
        if not self.serve_hints:
            return
        kept = "logged: the restart answers them" if self.pipeline.data is not None else "not logged: no log.dir"
        if read:
            print(f"flashtick: read {read} messages the feeds had queued before stopping (their ticks accepted, "
                  f"{kept}, or refused with a reason as ever); a "
                  f"message sent after this is not read (a feed resumes from `streams` once the service is back: "
                  f"`flashtick feed` does)", file=sys.stderr, flush=True)
        unread = (self.unread_at_stop or {}).get("unread_messages")
        if done.refused or unread:
            print(f"flashtick: stopped reading at limits.drain_s={drain_s:g} s with messages still queued at the "
                  f"ingest sockets: {done.refused} more read were refused as `stopping` (each sender told on "
                  f"`_rejects/`)" + (f", about {unread} more ({self.unread_at_stop['unread_bytes']} bytes in this "
                                     f"host's kernel buffers) are left unread and lost with the socket" if unread
                                     else "") +
                  "; not accepted, they must be sent again (a feed resumes from `streams` once the service is back: "
                  "`flashtick feed` does)", file=sys.stderr, flush=True)
        if drained or left:
            # left when drain_s ran out, or else those the last read brought as the sockets closed (review392 #3: the
            # line blamed drain_s for a stop that ended 3.4 s into its 7)
            why = (f"after limits.drain_s={drain_s:g} s" if done.timed_out else
                   "read from the ingest queues as they closed, after the feeds had gone quiet")
            print(f"flashtick: drained {drained} pending tokens before stopping"
                  + (f"; {left} still pending {why}" if left else "")
                  + (" (logged: the restart computes them)" if left and self.pipeline.data is not None else "")
                  + f" ({done.forwards} forwards in {done.compute_s:.1f} s; {done.read_s:.1f} s reading the "
                    f"ingest queues)", file=sys.stderr, flush=True)
