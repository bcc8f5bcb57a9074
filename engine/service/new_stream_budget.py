"""How many new streams the ingest opens: at most `limits.max_new_streams_per_message` from one message, and at most
`limits.max_new_streams_per_s` a second over all messages (a bucket that holds one second's worth, so a feed that
starts with its whole universe at once is taken). A stream past either is refused as `stream_refused`, its ticks
counted and said on `_rejects/` like every refusal, and the sender may send them again a second later: a message of
10,000 made-up names (review309 #2) otherwise opened 10,000 sessions in one read, each wanting its first forward
and a KV block, and put every stream already held two minutes behind.

ZeroMQ's PULL socket does not say which peer sent a message, so the per-second bound is over all feeds together;
CURVE's allow-list is what keeps an unknown peer off the socket (docs/configuration.md). One engine's ingest
(tick_ingest.py) and the sharded front door's (sharded_ingest.py, over all its shards) each hold one.
"""

from __future__ import annotations

import time

from engine.quoting import quoted


class NewStreamBudget:
    """The new streams the ingest may still open: ``message_started`` before each wire message, ``refusal`` for each
    tick of a stream the engine does not hold (None: opened, counted)."""

    def __init__(self, per_message: int, per_s: float, clock=time.monotonic) -> None:
        self.per_message, self.per_s, self._clock = per_message, per_s, clock
        self._in_message = 0
        self._tokens, self._filled_at = float(per_s), clock()
        self._refused: set[str] = set()  # this message's refused names: each tick of one is refused alike
        self.refused_streams = 0  # new streams turned away by either bound (stats: new_streams_refused)

    def message_started(self) -> None:
        self._in_message = 0
        self._refused.clear()

    def refusal(self, stream: str) -> str | None:
        """Why a new stream is refused now; None when it may open (and it is counted against both bounds)."""
        if stream in self._refused:
            return self._said(stream)
        now = self._clock()
        self._tokens = min(float(self.per_s), self._tokens + (now - self._filled_at) * self.per_s)
        self._filled_at = now
        if self._in_message >= self.per_message or self._tokens < 1:
            self._refused.add(stream)
            self.refused_streams += 1
            return self._said(stream)
        self._in_message += 1
        self._tokens -= 1
        return None

    def _said(self, stream: str) -> str:
        if self._in_message >= self.per_message:
            return (f"stream {quoted(stream)} refused: this message opened {self.per_message:,} new streams, the limit "
                    f"(limits.max_new_streams_per_message); send its ticks again in another message")
        return (f"stream {quoted(stream)} refused: {self.per_s:,g} new streams a second were opened, the limit "
                f"(limits.max_new_streams_per_s); send its ticks again a second later")
