"""ZeroMQ feed client: push ticks to the engine's ingest socket (connectors/feed_pump.py pumps a Source through it).

The engine binds a PULL socket; feed handlers connect a PUSH socket to it and
send msgpack (never pickle: the engine must not run code a feed sends). One
`send` call is one message: a single tick is a map, a list is a list of maps.
The engine validates every tick and counts rejections, so a dict is sent as
given; a `Tick` was validated when it was built.

A send never waits for ever: with no engine accepting, the first message fails
after `connect_timeout_ms`, and a later one after `send_timeout_ms` without the
engine taking messages, both with `FeedTimeout`. PUSH has no reply path, so the
engine publishes each rejection on its answers socket (topic `_rejects/`);
`RejectWatch` (connectors/reject_watch.py) counts the ones for a feed's own
streams.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from typing import Any, Callable, Mapping, Protocol, Sequence

import zmq

from connectors.handshake import curve_client, monitor_event
from connectors.price_offsets import PriceOffset
from connectors.send_wait import SendWait
from connectors.service_topics import MAX_ECHOED_TOPIC, echoed_topic
from connectors.tcp_endpoints import ipv6_for
from connectors.ticks import Tick
from connectors.unclosed_clients import close_when_collected
from connectors.wire_offsets import unshifted_tick
from connectors.wire_payload import SendItem, pack
from engine.forked_clients import CreatingProcess
from engine.quoting import quoted

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
WATCH_SLICE_MS = 50  # a send that waits checks the connection and the engine's reading at least this often


class FeedTimeout(TimeoutError):
    """No engine took a message in time: none is accepting connections, or it read nothing for the time-out."""


class EngineLost(ConnectionError):
    """The connection to the engine dropped since the last send (it restarted, or the network did): what was
    in flight may never have reached it, and the message being sent was not sent. PUSH has no receipts, so only
    the engine can say what it holds (control op `streams`): see ``FeedResume``."""


class FeedResume(Protocol):
    """What lets a feed go on across a restart of the engine with no hole and no duplicate: it keeps what was
    sent until the engine confirms it, and after the connection dropped says what to send again
    (engine/service/feed_resume.py holds the one that asks the engine's control socket)."""

    restarts: int  # connections that dropped and were resumed
    resent: int  # ticks sent again after them
    lost_ticks: int  # ticks the engine had taken and, restarted without them (its log not kept), no longer held
    superseded_ticks: int  # ticks the engine left out for a feed of their streams placed after this one began
    sent_twice_ticks: int  # ticks the engine left out as sent twice: as many as it took of their streams after this
    # feed was placed (a stopped feed's last ticks read late, or another live feed's)

    def sent(self, ticks: list[Tick], rejected: Mapping[str, int]) -> None:
        """``ticks`` left in one message; ``rejected``: per stream, this feed's ticks the engine refused so far."""

    def lost(self, unsent: list[list[Tick]], rejected: Mapping[str, int]) -> list[list[Tick]]:
        """The connection dropped before the messages ``unsent`` could leave: once the engine is back, the messages
        to send now, in order: whatever it does not hold of what was sent, each as the message it went in (a tick
        group each), then ``unsent``."""

    def unconfirmed(self, rejected: Mapping[str, int]) -> int:
        """Asks the engine now: how many of the ticks sent it has neither accepted nor refused yet."""


def new_tag() -> str:
    """A tag for one feed's messages, unique among the feeds of an engine: this process and a random part."""
    return f"feed/{os.getpid()}.{secrets.token_hex(4)}"


def check_endpoint(endpoint: Any, what: str = "endpoint") -> str:
    """An endpoint a client connects to: `transport://address`, and for tcp a port in 1..65535 (ZeroMQ takes
    tcp://host:99999 and then waits for ever)."""
    if not isinstance(endpoint, str) or "://" not in endpoint:
        raise ValueError(f"{what} must look like 'tcp://host:port', got {quoted(endpoint)}")
    if endpoint.startswith("tcp://"):
        port = endpoint.rsplit(":", 1)[-1] if endpoint.count(":") >= 2 else ""
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"{what} {quoted(endpoint)}: a tcp endpoint needs a port from 1 to 65535 after the host "
                             f"('tcp://127.0.0.1:5555')")
    return endpoint


def _check_ms(name: str, value: Any, *, none_ok: bool) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be {'None (wait) or ' if none_ok else ''}an int >= 0, got {quoted(value)}")


# the service's default limits.max_message_bytes: a larger ingest message is refused whole there (`oversize`)
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


def _close_feed_sockets(process: CreatingProcess, sock: zmq.Socket, monitor: zmq.Socket | None) -> None:
    """The monitor first (libzmq keeps the descriptors of a socket closed under its monitor), then the socket, with
    its own linger: queued messages still leave. Nothing in a fork()ed child: the sockets are the parent's."""
    if process.forked:
        return
    if monitor is not None and not monitor.closed:
        if not sock.closed:
            sock.disable_monitor()
        monitor.close(linger=0)
    if not sock.closed:
        sock.close()


class FeedClient:
    """A PUSH socket connected to the engine's ingest PULL socket.

    Messages are queued only on a connection an engine accepted (ZeroMQ's
    IMMEDIATE), so with no engine `send` waits instead of queueing into the
    void: up to `connect_timeout_ms` for the first message, then FeedTimeout.
    `hwm` bounds the messages queued here while the engine is slow; when it is
    reached `send` waits (back-pressure) for as long as the engine reads this
    connection, and raises FeedTimeout once it read nothing for `send_timeout_ms`
    (None: waits for ever; where its reading cannot be seen, not Linux or not
    tcp://, once one send waited that long: connectors/send_wait.py); `say` hears
    a wait of seconds as it goes on. `close` waits up to `linger_ms` for
    queued messages to leave. With `server_public_key` (z85) the socket is a
    CURVE client, for an engine with curve.ingest on; `client_keypair` (public,
    secret) is this feed's identity when the engine lets listed clients only in
    (without it a throwaway keypair is used). A refused handshake looks like no
    engine: FeedTimeout after `connect_timeout_ms`. With `tag` (printable ASCII, at most MAX_ECHOED_TOPIC
    characters; `new_tag()` makes one) each message goes as two frames, `[tag, ticks]`: the engine echoes the tag
    in that message's rejections (`topic` on `_rejects/`), so a RejectWatch given the same tag counts this feed's
    own and not those of another publisher of the same streams. An engine of an earlier version ignores it.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        hwm: int = 1000,
        send_timeout_ms: int | None = 10_000,
        connect_timeout_ms: int = 3000,
        linger_ms: int = 2000,
        context: zmq.Context | None = None,
        server_public_key: bytes | None = None,
        client_keypair: tuple[bytes, bytes] | None = None,
        watch_connection: bool = False,
        tag: str | None = None,
        say: Callable[[str], None] | None = None,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """``watch_connection``: a send raises EngineLost once the connection to the engine dropped (rather than
        waiting for it to come back and sending past what was lost in flight). ``say``: hears that a send waits
        for a slow engine (after WAIT_SAID_S, then at most every WAIT_SAID_EVERY_S). ``max_message_bytes``: the
        engine's limits.max_message_bytes (its heartbeats say it): a message over it is refused here, a ValueError,
        where the engine would drop it whole (review421 #2: send returned its ticks, the engine refused them all);
        None sends any size."""
        check_endpoint(endpoint)
        if isinstance(hwm, bool) or not isinstance(hwm, int) or hwm < 0:
            raise ValueError(f"hwm must be an int >= 0 (0 = unbounded), got {quoted(hwm)}")
        _check_ms("send_timeout_ms", send_timeout_ms, none_ok=True)
        _check_ms("connect_timeout_ms", connect_timeout_ms, none_ok=False)
        if not isinstance(linger_ms, int) or linger_ms < -1:
            raise ValueError(f"linger_ms must be an int >= -1 (-1 = wait for ever), got {quoted(linger_ms)}")
        if client_keypair is not None and not server_public_key:
            raise ValueError("client_keypair needs server_public_key (the engine's CURVE public key) too")
        if tag is not None and (not isinstance(tag, str) or echoed_topic(tag.encode("utf-8")) != tag):
            raise ValueError(f"tag must be printable ASCII, 1 to {MAX_ECHOED_TOPIC} characters, got {quoted(tag)}")
        if max_message_bytes is not None and (isinstance(max_message_bytes, bool) or
                                              not isinstance(max_message_bytes, int) or max_message_bytes < 1):
            raise ValueError(f"max_message_bytes must be an int >= 1, or None, got {quoted(max_message_bytes)}")
        self.max_message_bytes = max_message_bytes
        self._process = CreatingProcess(f"FeedClient to {endpoint}")  # (a fork()ed child's use raises: review421 #1)
        self.tag = tag
        # what the engine adds to every tick's prices at ingest (its model's training offset: `health`'s
        # ingest_price_offset): ticks read with it go out without it, as the venue prints them (None: as they are)
        self.ingest_offset: PriceOffset | None = None
        self._frames: list[bytes] = [] if tag is None else [tag.encode("ascii")]  # the frames before the ticks
        self.endpoint = endpoint
        self.curve = {"server_public_key": server_public_key, "client_keypair": client_keypair}  # for RejectWatch
        self.send_timeout_ms = send_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._sock = (context or zmq.Context.instance()).socket(zmq.PUSH)
        self._sock.setsockopt(zmq.SNDHWM, hwm)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        self._sock.setsockopt(zmq.IMMEDIATE, 1)  # no engine, no queue: a send waits and times out, never lies
        self._sock.setsockopt(zmq.SNDTIMEO, WATCH_SLICE_MS)  # a send waits in slices (_send_frames)
        curve_client(self._sock, server_public_key, client_keypair)
        # the connection's descriptor (a send that waits looks at whether the engine reads it) and its drops
        self._monitor = self._sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self.watch_connection = watch_connection
        self.say = say
        self._fd: int | None = None
        self._dropped = False
        # dropped unclosed (a notebook's `FeedClient(...).send(rows)`), it closes with its own linger: the messages
        # a send took still leave, as after close()
        self.unclosed = close_when_collected(self, f"FeedClient to {endpoint}",
                                             functools.partial(_close_feed_sockets, self._process, self._sock,
                                                               self._monitor))
        ipv6_for(self._sock, endpoint)
        self._sock.connect(endpoint)
        self.messages = 0
        self.ticks = 0
        self.connections_lost = 0

    def send(self, ticks: SendItem | Sequence[SendItem]) -> int:
        """Send one message; returns the number of ticks in it (an empty list sends nothing)."""
        return self.send_packed(*pack(self.outgoing(ticks)))

    def outgoing(self, ticks: SendItem | Sequence[SendItem]) -> Any:
        """``ticks`` as they go out: without ``ingest_offset``, which the engine adds back."""
        if self.ingest_offset is None:
            return ticks
        if isinstance(ticks, (Tick, Mapping)):
            return unshifted_tick(ticks, self.ingest_offset)
        return [unshifted_tick(tick, self.ingest_offset) for tick in ticks]

    def send_packed(self, payload: bytes, n: int) -> int:
        """Send a message `pack` made of `n` ticks (a feed that weighed it first sends the same bytes)."""
        if n == 0:
            return 0
        self._process.check()
        if self._sock.closed:
            raise RuntimeError(f"FeedClient to {self.endpoint} is closed")
        if self.max_message_bytes is not None and len(payload) > self.max_message_bytes:
            raise ValueError(f"a message of {n} ticks packs to {len(payload):,} bytes, over the engine's "
                             f"limits.max_message_bytes ({self.max_message_bytes:,}), which refuses it whole "
                             f"(oversize): send it in smaller lists (one list is one message, one tick group per "
                             f"stream), or give FeedClient(max_message_bytes=) the engine's own limit")
        self._send_frames([*self._frames, payload])
        self.messages += 1
        self.ticks += n
        return n

    def _send_frames(self, frames: list[bytes]) -> None:
        """Send one message (atomic: all its frames or none), in slices of WATCH_SLICE_MS while it waits: checking
        that the connection never dropped (``watch_connection``: with no engine connected a send waits, IMMEDIATE,
        and the first one to go after a reconnect would land past whatever was lost in flight) and whether the
        engine reads. Raises FeedTimeout once no engine took the first message within ``connect_timeout_ms``, or
        once the engine read nothing for ``send_timeout_ms`` (SendWait)."""
        if self.watch_connection:  # (a look at the monitor, ~3 us, costs more than packing a tick: otherwise its few
            self._check_connection()  # events, a connect or a drop each, are read only once a send waits)
        try:
            self._sock.send_multipart(frames, zmq.NOBLOCK)
            return
        except zmq.Again:
            pass
        first = self.messages == 0
        timeout_ms = self.connect_timeout_ms if first else self.send_timeout_ms
        timeout_s = None if timeout_ms is None else timeout_ms / 1000
        wait = SendWait(self._connection_fd(), time.monotonic())
        while True:
            self._check_connection()
            try:
                self._sock.send_multipart(frames)
                return
            except zmq.Again:
                now = time.monotonic()
                if not first:
                    wait.look(self._connection_fd(), now)
                    if self.say is not None and (note := wait.note(now, self.endpoint, timeout_s)) is not None:
                        self.say(note)
                idle_s = now - wait.began if first else wait.idle_s(now)
                if timeout_s is not None and idle_s >= timeout_s:
                    raise FeedTimeout(self._timed_out(first, wait.reads_seen, timeout_ms)) from None

    def _timed_out(self, first: bool, reads_seen: bool, timeout_ms: int | None) -> str:
        if first:
            return (f"no engine accepting on {self.endpoint} after {timeout_ms} ms: is `flashtick serve` running, "
                    f"and is this its ingest endpoint (:5555 by default; answers and control are other ports)?")
        if reads_seen:
            return (f"the engine at {self.endpoint} read nothing of this feed's for {timeout_ms} ms (stopped, hung, "
                    f"or not reading; a slow engine is waited for while it reads): is `flashtick serve` still running?")
        return (f"engine at {self.endpoint} took no message for {timeout_ms} ms (stopped, not reading, or reading "
                f"slower than this feed sends: send_timeout_ms=None waits for ever): is `flashtick serve` still "
                f"running?")

    def _poll_monitor(self) -> None:
        """The connection's events so far: its descriptor once connected, and whether it dropped."""
        while self._monitor.poll(0):
            event = monitor_event(self._monitor.recv_multipart())
            if event["event"] == zmq.EVENT_CONNECTED:
                self._fd = int(event["value"])
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self._fd, self._dropped = None, True

    def _connection_fd(self) -> int | None:
        self._poll_monitor()
        return self._fd

    def dropped(self) -> bool:
        """Whether the connection to the engine dropped since the last check (``watch_connection`` only)."""
        self._poll_monitor()
        dropped, self._dropped = self._dropped and self.watch_connection, False
        self.connections_lost += dropped
        return dropped

    def _check_connection(self) -> None:
        if self.dropped():
            raise EngineLost(f"the connection to the engine at {self.endpoint} dropped (a restart?): messages in "
                             f"flight may not have reached it")

    def close(self) -> None:
        self.unclosed.detach()
        _close_feed_sockets(self._process, self._sock, self._monitor)

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
