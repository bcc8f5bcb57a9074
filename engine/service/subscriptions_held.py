"""The subscriptions answer subscribers make libzmq hold: counted from the answers socket's XPUB notifications,
for `stats`, and said in the log as their memory grows (a subscriber flooding subscriptions)."""

from __future__ import annotations

import sys
import time

import zmq

from engine.service.drain_slice import DRAIN_SLICE_S

SUBSCRIPTION_MEMORY_FACTOR = 46  # bytes of libzmq's subscription trie per byte subscribed (measured, random prefixes)
SUBSCRIPTION_BYTES_SAID = 1 << 20  # distinct subscription bytes held that the log first says (~46 MiB in libzmq)


class SubscriptionsHeld:
    """The distinct subscriptions the answers socket's subscribers hold, from its XPUB notifications (one when a
    prefix is first subscribed, one when its last subscriber drops it, a disconnect included): libzmq keeps them in
    a trie of about SUBSCRIPTION_MEMORY_FACTOR bytes a byte, unbounded in number, so `stats` counts them
    (``subscriptions``, ``subscription_bytes``) and the log says when their bytes pass each power of two from
    SUBSCRIPTION_BYTES_SAID (a subscriber flooding subscriptions: only CURVE's clients_dir keeps strangers out)."""

    def __init__(self) -> None:
        self.next_said = SUBSCRIPTION_BYTES_SAID

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
            if counters["subscription_bytes"] >= self.next_said:
                self.next_said *= 2
                print(f"flashtick: answer subscribers hold {counters['subscriptions']} distinct subscriptions of "
                      f"{counters['subscription_bytes']} bytes, which libzmq keeps in about "
                      f"{SUBSCRIPTION_MEMORY_FACTOR * counters['subscription_bytes'] >> 20} MiB until they "
                      f"disconnect (a subscriber flooding subscriptions? with CURVE, curve.clients_dir keeps "
                      f"strangers out)", file=sys.stderr, flush=True)
