"""The subscriptions answer subscribers make libzmq hold: counted from the answers socket's XPUB notifications,
for `stats`, and said in the log as their memory grows (a subscriber flooding subscriptions)."""

from __future__ import annotations

import sys
import time

import zmq

from engine.quoting import quoted
from engine.service.drain_slice import DRAIN_SLICE_S

SUBSCRIPTION_MEMORY_FACTOR = 46  # bytes of libzmq's subscription trie per byte subscribed (measured, random prefixes)
SUBSCRIPTION_BYTES_SAID = 1 << 20  # distinct subscription bytes held that the log first says (~46 MiB in libzmq)
# The answers socket's largest inbound message (ZMQ_MAXMSGSIZE): ZeroMQ drops the connection of a subscriber sending
# a longer one, unread, and the subscriber reconnects and sends it again, for ever, its other subscriptions dead too.
# It was the longest topic a query can publish on (~385 bytes): a dashboard subscribing a long user-made topic went
# dark, in a reconnect loop nothing logged or counted (review308 #2). Now a subscription up to this is held (one
# longer than any topic matches nothing: counted and logged, its socket's other subscriptions served); only past
# limits.max_subscription_bytes (64 KiB by default, ~3 MiB of libzmq's trie; engine/service/config_limits.py) is the
# connection dropped


class SubscriptionsHeld:
    """The distinct subscriptions the answers socket's subscribers hold, from its XPUB notifications (one when a
    prefix is first subscribed, one when its last subscriber drops it, a disconnect included): libzmq keeps them in
    a trie of about SUBSCRIPTION_MEMORY_FACTOR bytes a byte, unbounded in number, so `stats` counts them
    (``subscriptions``, ``subscription_bytes``) and the log says when their bytes pass each power of two from
    SUBSCRIPTION_BYTES_SAID (a subscriber flooding subscriptions: only CURVE's clients_dir keeps strangers out)."""

    def __init__(self, longest_topic_bytes: int) -> None:
        self.next_said = SUBSCRIPTION_BYTES_SAID
        self.longest_topic_bytes = longest_topic_bytes  # a subscription longer than this can match no topic

    def read(self, sock: zmq.Socket, counters: dict[str, int]) -> None:
        deadline = time.monotonic() + DRAIN_SLICE_S
        while time.monotonic() <= deadline:
            try:
                frame = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if frame[:1] in (b"\x00", b"\x01"):  # (anything else a peer sends on it is dropped unread)
                sign = 1 if frame[:1] == b"\x01" else -1
                counters["subscriptions"] += sign
                counters["subscription_bytes"] += sign * (len(frame) - 1)
                if sign == 1 and len(frame) - 1 > self.longest_topic_bytes:
                    self._unmatchable(frame[1:], counters)
            if counters["subscription_bytes"] >= self.next_said:
                self.next_said *= 2
                print(f"flashtick: answer subscribers hold {counters['subscriptions']} distinct subscriptions of "
                      f"{counters['subscription_bytes']} bytes, which libzmq keeps in about "
                      f"{SUBSCRIPTION_MEMORY_FACTOR * counters['subscription_bytes'] >> 20} MiB until they "
                      f"disconnect (a subscriber flooding subscriptions? with CURVE, curve.clients_dir keeps "
                      f"strangers out)", file=sys.stderr, flush=True)

    def _unmatchable(self, prefix: bytes, counters: dict[str, int]) -> None:
        """A subscription longer than any topic: held (it matches nothing), counted, and said in the log at the
        first and at each power of two, so an operator finds the client whose dashboard shows nothing."""
        counters["subscriptions_unmatchable"] += 1
        count = counters["subscriptions_unmatchable"]
        if count & (count - 1) == 0:
            print(f"flashtick: a subscriber subscribed to a prefix of {len(prefix)} bytes, longer than any topic "
                  f"({self.longest_topic_bytes} bytes at most: limits.max_topic_bytes and max_stream_bytes), which "
                  f"matches nothing: {quoted(prefix[:48].decode('utf-8', 'replace'), 48)} ({count} such so far: "
                  f"stats subscriptions_unmatchable)", file=sys.stderr, flush=True)
