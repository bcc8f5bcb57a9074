"""ZeroMQ feed client: push ticks to the engine's ingest socket, and a pump from any Source.

The engine binds a PULL socket; feed handlers connect a PUSH socket to it and
send msgpack (never pickle: the engine must not run code a feed sends). One
`send` call is one message: a single tick is a map, a list is a list of maps.
The engine validates every tick and counts rejections, so a dict is sent as
given; a `Tick` was validated when it was built.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, NamedTuple, Sequence

import msgpack
import zmq

from connectors.source import Source
from connectors.ticks import Tick

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
SendItem = Tick | Mapping[str, Any]


class FeedTimeout(TimeoutError):
    """The engine did not take a message within send_timeout_ms (its queue and ours are full)."""


def _wire(item: Any) -> dict[str, Any]:
    if isinstance(item, Tick):
        return item.to_wire()
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(f"a tick is a Tick or a dict, got {type(item).__name__}")


def pack(ticks: SendItem | Sequence[SendItem]) -> tuple[bytes, int]:
    """msgpack payload of one tick (a map) or a batch (a list of maps), and how many ticks it holds."""
    if isinstance(ticks, (Tick, Mapping)):
        return msgpack.packb(_wire(ticks), use_bin_type=True), 1
    if isinstance(ticks, (list, tuple)):
        return msgpack.packb([_wire(t) for t in ticks], use_bin_type=True), len(ticks)
    raise TypeError(f"send() takes a Tick, a dict or a list of them, got {type(ticks).__name__}")


class FeedClient:
    """A PUSH socket connected to the engine's ingest PULL socket.

    `hwm` bounds the messages queued here while the engine is slow or not up
    yet; when it is reached `send` waits (back-pressure), for ever by default
    or up to `send_timeout_ms` and then raises FeedTimeout. `close` waits up to
    `linger_ms` for queued messages to leave. With `server_public_key` (z85)
    the socket is a CURVE client, for an engine with curve.ingest on;
    `client_keypair` (public, secret) is this feed's identity when the engine
    lets listed clients only in (without it a throwaway keypair is used).
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        hwm: int = 1000,
        send_timeout_ms: int | None = None,
        linger_ms: int = 2000,
        context: zmq.Context | None = None,
        server_public_key: bytes | None = None,
        client_keypair: tuple[bytes, bytes] | None = None,
    ) -> None:
        if not isinstance(endpoint, str) or "://" not in endpoint:
            raise ValueError(f"endpoint must look like 'tcp://host:port', got {endpoint!r}")
        if isinstance(hwm, bool) or not isinstance(hwm, int) or hwm < 0:
            raise ValueError(f"hwm must be an int >= 0 (0 = unbounded), got {hwm!r}")
        if send_timeout_ms is not None and (not isinstance(send_timeout_ms, int) or send_timeout_ms < 0):
            raise ValueError(f"send_timeout_ms must be None (wait) or an int >= 0, got {send_timeout_ms!r}")
        if not isinstance(linger_ms, int) or linger_ms < -1:
            raise ValueError(f"linger_ms must be an int >= -1 (-1 = wait for ever), got {linger_ms!r}")
        if client_keypair is not None and not server_public_key:
            raise ValueError("client_keypair needs server_public_key (the engine's CURVE public key) too")
        self.endpoint = endpoint
        self.send_timeout_ms = send_timeout_ms
        self._sock = (context or zmq.Context.instance()).socket(zmq.PUSH)
        self._sock.setsockopt(zmq.SNDHWM, hwm)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        self._sock.setsockopt(zmq.SNDTIMEO, -1 if send_timeout_ms is None else send_timeout_ms)
        if server_public_key:
            public, secret = client_keypair or zmq.curve_keypair()
            self._sock.curve_serverkey = server_public_key
            self._sock.curve_publickey = public
            self._sock.curve_secretkey = secret
        self._sock.connect(endpoint)
        self.messages = 0
        self.ticks = 0

    def send(self, ticks: SendItem | Sequence[SendItem]) -> int:
        """Send one message; returns the number of ticks in it (an empty list sends nothing)."""
        payload, n = pack(ticks)
        if n == 0:
            return 0
        if self._sock.closed:
            raise RuntimeError(f"FeedClient to {self.endpoint} is closed")
        try:
            self._sock.send(payload)
        except zmq.Again:
            raise FeedTimeout(
                f"engine at {self.endpoint} took no message for {self.send_timeout_ms} ms; is it running?"
            ) from None
        self.messages += 1
        self.ticks += n
        return n

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.close()

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FeedStats(NamedTuple):
    ticks: int
    messages: int
    seconds: float


def run_feed(
    source: Source,
    client: FeedClient,
    rate: float | None = None,
    max_ticks: int | None = None,
    batch: int = 256,
    *,
    stop: threading.Event | None = None,
    idle_sleep_s: float = 0.001,
) -> FeedStats:
    """Pump `source` into `client` until it is done, `max_ticks` are sent or `stop` is set.

    `rate` caps ticks per second (None: as fast as the source and socket go);
    each message carries up to `batch` ticks. A source with nothing ready is
    polled again after `idle_sleep_s`, since sources never block.
    """
    if rate is not None and not (isinstance(rate, (int, float)) and 0 < rate < float("inf")):
        raise ValueError(f"rate must be None or ticks per second > 0, got {rate!r}")
    if max_ticks is not None and (isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 0):
        raise ValueError(f"max_ticks must be None or an int >= 0, got {max_ticks!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    t0 = time.monotonic()
    sent = messages = 0
    while (max_ticks is None or sent < max_ticks) and not (stop is not None and stop.is_set()):
        want = batch if max_ticks is None else min(batch, max_ticks - sent)
        if rate is not None:
            # Tick number k may leave at t0 + k / rate; the +1 lets the first one go at once.
            allowed = int((time.monotonic() - t0) * rate) + 1 - sent
            if allowed <= 0:
                time.sleep(max(0.0, t0 + sent / rate - time.monotonic()))
                continue
            want = min(want, allowed)
        ticks = source.next_batch(want)
        if ticks:
            client.send(ticks)
            sent += len(ticks)
            messages += 1
        elif source.done:
            break
        else:
            time.sleep(idle_sleep_s)
    return FeedStats(sent, messages, time.monotonic() - t0)
