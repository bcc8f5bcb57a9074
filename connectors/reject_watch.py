"""What a feed hears back from the engine: PUSH has no reply path, so the engine publishes each tick it refuses on
its answers socket (`_rejects/`, beside `_heartbeat/`); `RejectWatch` subscribes there, counts the rejections of the
streams its feed sent, by reason and by stream, says them as they come, and learns the engine's message size limit
from its heartbeats.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Callable

import msgpack
import zmq

from connectors.feed import FeedTimeout, check_endpoint
from connectors.handshake import HandshakeMonitor, curve_client
from connectors.service_topics import HEARTBEAT_TOPIC, REJECTS_TOPIC
from connectors.tcp_endpoints import ipv6_for
from connectors.ticks import counted, shown_name

REJECTS_SAY_EVERY_S = 10.0  # after the first rejection of each reason, a watch says the counts at most this often


class RejectWatch:
    """Counts the rejections an engine publishes on `_rejects/` for the streams a feed sent.

    A SUB socket on the engine's answers endpoint takes `_rejects/` and
    `_heartbeat/`. `wait_ready` returns once a heartbeat came, so the
    subscription is in place and no later rejection is missed. A rejection is
    ours when its `stream` is one we sent (`streams`) and, given our `tag` (the
    FeedClient's), its `topic` (the tag its message carried, echoed by the
    engine) is ours: another publisher's rejections of the same streams are
    counted in `others`, not as ours. One without a `topic` (an engine of an
    earlier version, or a rejection made away from any message: a conflated
    quote) is ours by its stream alone. One without a stream (a message that was
    not msgpack, or too large) cannot be told from another feed's and is
    counted in `unattributed`; but one that stands for a reason's rejections
    spread over many streams (`streams`, see `published_rejections`) is ours
    by our tag alone, counted by reason (not by stream).

    With `say`, our rejections are also said as they come (a feed losing every tick to a full disk must not be
    silent until its summary): the first of each reason at once, with the engine's why; then, at most every
    REJECTS_SAY_EVERY_S, one line with the counts per reason since the last line.
    """

    def __init__(self, endpoint: str, *, context: zmq.Context | None = None, server_public_key: bytes | None = None,
                 client_keypair: tuple[bytes, bytes] | None = None, say: Callable[[str], None] | None = None,
                 tag: str | None = None) -> None:
        self.endpoint = check_endpoint(endpoint, "answers endpoint")
        self._sock = (context or zmq.Context.instance()).socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        curve_client(self._sock, server_public_key, client_keypair)  # the same CURVE identity as the feed's
        self._handshake = HandshakeMonitor(self._sock, curve=bool(server_public_key))  # why no heartbeat came
        for topic in (REJECTS_TOPIC, HEARTBEAT_TOPIC):
            self._sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        ipv6_for(self._sock, endpoint)
        self._sock.connect(endpoint)
        self.streams: set[str] = set()
        self.rejected: Counter[str] = Counter()  # reason -> count, our streams only
        self.rejected_by_stream: Counter[str] = Counter()  # stream -> count (what the engine never counted of ours)
        self.first_errors: dict[str, str] = {}  # reason -> the engine's text of the first such rejection of ours
        self.unattributed = 0
        self.tag = tag
        self.others = 0  # rejections of our streams of ticks another publisher sent (their echoed tag not ours)
        self.heartbeats = 0
        self.max_message_bytes: int | None = None  # the engine's limits.max_message_bytes, from its heartbeats
        self._say = say
        self._unsaid: Counter[str] = Counter()  # our rejections since the last line that said them, by reason
        self._said_at = -math.inf  # monotonic time of that line

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the first heartbeat; raises FeedTimeout if none comes within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.heartbeats == 0:
            left = deadline - time.monotonic()
            if left <= 0:
                refused = self._handshake.refused()  # a refused CURVE key: not "is anything running there?"
                raise FeedTimeout(f"no heartbeat from {self.endpoint} in {timeout_s:g} s: "
                                  + (refused or "is it the answers endpoint of a running `flashtick serve`?"))
            self.poll(max(1, int(left * 1000)))

    def poll(self, timeout_ms: int = 0) -> int:
        """Take what has arrived, waiting up to `timeout_ms` for a first message; returns our rejections taken."""
        ours = self._take(timeout_ms)
        self._say_counts()
        return ours

    def _take(self, timeout_ms: int) -> int:
        if not self._sock.poll(timeout_ms):
            return 0
        ours = 0
        while True:
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return ours
            if frames[0] == HEARTBEAT_TOPIC.encode():
                self.heartbeats += 1
                self._limits(frames[-1])
            elif len(frames) == 2:
                ours += self._count(frames[1])

    def _limits(self, payload: bytes) -> None:
        """The engine's message size limit, from a heartbeat (an older engine's says nothing: None)."""
        try:
            beat = msgpack.unpackb(payload, raw=False)
        except Exception:  # not ours to judge
            return
        limit = beat.get("max_message_bytes") if isinstance(beat, dict) else None
        self.max_message_bytes = limit if type(limit) is int and limit > 0 else self.max_message_bytes

    def _count(self, payload: bytes) -> int:
        try:
            rejection = msgpack.unpackb(payload, raw=False)
        except Exception:  # not ours to judge: a rejection we cannot read is not counted
            return 0
        stream = rejection.get("stream") if isinstance(rejection, dict) else None
        # one reason's rejections of a message spread over more streams than `_rejects/` names one by one
        # (connectors.service_topics.published_rejections): ours by our tag alone, counted by reason, not by stream
        spread = stream is None and isinstance(rejection, dict) and type(rejection.get("streams")) is int
        if stream is None and not spread:
            self.unattributed += 1
            return 0
        count = rejection.get("count", 1)  # a summed-up entry stands for `count` rejections of one message
        count = count if type(count) is int and count > 0 else 1
        if spread and self.tag is None:
            self.unattributed += count  # (whose they are cannot be told)
            return 0
        if spread and rejection.get("topic") != self.tag:
            return 0  # another publisher's message (ours carry our tag)
        if not spread and stream not in self.streams:
            return 0
        if not spread and self.tag is not None and rejection.get("topic", self.tag) != self.tag:
            self.others += count
            return 0
        reason = str(rejection.get("reason"))
        first = reason not in self.rejected
        self.rejected[reason] += count
        whose = counted(rejection["streams"], "stream") if spread else f"stream {shown_name(stream)}"
        error = rejection.get("error")
        if isinstance(error, str):
            self.first_errors.setdefault(reason, f"{whose}: {error}")
        if not spread:
            self.rejected_by_stream[stream] += count
        if self._say is not None and first:
            self._said_at = time.monotonic()  # (the counts that follow wait their interval from here)
            why = error if isinstance(error, str) else reason
            self._say(f"the engine refused {counted(count, 'tick')} of {whose}: {why}; more "
                      f"rejections are counted, said here at most every {REJECTS_SAY_EVERY_S:g} s")
        elif self._say is not None:
            self._unsaid[reason] += count
        return count

    def _say_counts(self) -> None:
        """Our rejections since the last line, per reason, once REJECTS_SAY_EVERY_S has passed since it."""
        now = time.monotonic()
        if self._say is None or not self._unsaid or now - self._said_at < REJECTS_SAY_EVERY_S:
            return
        since = now - self._said_at
        per_reason = ", ".join(f"{reason}: {n}" for reason, n in sorted(self._unsaid.items()))
        self._say(f"the engine refused {counted(sum(self._unsaid.values()), 'more tick')} in the last {since:.0f} s "
                  f"({per_reason}); {sum(self.rejected.values())} in all")
        self._unsaid.clear()
        self._said_at = now

    def settle(self, timeout_s: float, heartbeats: int = 2) -> None:
        """After the last send: wait until `heartbeats` heartbeats pass with no rejection of ours between them
        (the engine went round its loop since our messages came), or `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        quiet_since = self.heartbeats
        while self.heartbeats - quiet_since < heartbeats:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.poll(max(1, int(min(left, 0.1) * 1000))):
                quiet_since = self.heartbeats

    def close(self) -> None:
        self._handshake.close()
        if not self._sock.closed:
            self._sock.close()

    def __enter__(self) -> RejectWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
