"""The client side of a ZeroMQ connection to the engine: CURVE client keys, and why a handshake failed.

Below the service (connectors' feeds and answer watchers use it as the service's own clients do): a refused
CURVE key, a socket of the wrong kind or nobody listening are said as such instead of a silent wait.
"""

from __future__ import annotations

import struct
import threading
import time
import weakref

import zmq

# -- the client side: why did the handshake fail? ---------------------------------------------------

# a socket of another kind answers a client's connection and then fails its handshake (ZeroMQ pairs socket types)
WRONG_SOCKET = ("the socket this client is for: a service has three, ingest (PUSH feeds, :5555 by default), answers "
                "(subscribers, :5556) and control (requests, :5557)")


def monitor_event(frames: list[bytes]) -> dict[str, int | bytes]:
    """A socket monitor's message as pyzmq's parse_monitor_message reads it ({event, value, endpoint}: a 16-bit
    event id and a 32-bit value, then the endpoint), without importing zmq.utils.monitor, whose zmq.asyncio import
    (asyncio, ssl) was a fifth of a client command's start (`flashtick ask`)."""
    if len(frames) != 2 or len(frames[0]) != 6:
        raise RuntimeError(f"invalid socket monitor message: {frames!r}")
    event, value = struct.unpack("=hi", frames[0])
    return {"event": event, "value": value, "endpoint": frames[1]}


# how often the process's drain takes every open monitor's events: ZeroMQ retries a refused connection every 100 ms,
# so a monitor fills its 1,000-message queue in about a minute and a half of an outage if nobody reads it
DRAIN_EVERY_S = 0.5


class _MonitorDrain:
    """Takes the events of every open HandshakeMonitor of this process, every DRAIN_EVERY_S, on one daemon thread.

    libzmq sends monitor events from its I/O thread with a blocking send: a monitor whose queue is full (a client
    left idle while its service is down retries its connection, and reports it, every 100 ms) blocks that I/O thread
    for good, and with it every socket of the context, other clients and an in-process server alike (a subscriber
    never reconnected after a long restart; a test process hung). A client reads its monitor only while it waits on
    a call, so this thread reads them between calls."""

    def __init__(self) -> None:
        self._monitors: weakref.WeakSet[HandshakeMonitor] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, monitor: "HandshakeMonitor") -> None:
        with self._lock:
            self._monitors.add(monitor)
            if self._thread is None or not self._thread.is_alive():  # (none yet, or a forked child's copy)
                self._thread = threading.Thread(target=self._run, name="flashtick-monitor-drain", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(DRAIN_EVERY_S)
            with self._lock:
                monitors = list(self._monitors)
            for monitor in monitors:
                try:
                    monitor.poll()
                except zmq.ZMQError:  # its context terminated (a shutdown), or it was closed meanwhile
                    with self._lock:
                        self._monitors.discard(monitor)


class HandshakeMonitor:
    """Watches a client socket's connection events, to say why no reply came.

    ZeroMQ retries a refused handshake silently, so a client of a CURVE server
    that refuses it just waits; the socket monitor is where the reason shows.
    Its events are taken by the owner's calls and, between them, by the
    process's drain thread (see _MonitorDrain), under one lock.
    """

    EVENTS = (zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
              | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_DISCONNECTED
              | zmq.EVENT_CONNECT_RETRIED)

    def __init__(self, sock: zmq.Socket, curve: bool) -> None:
        self.curve = curve
        self._sock = sock
        self._monitor = sock.get_monitor_socket(self.EVENTS)
        self.connected = self.succeeded = False
        self.failure: tuple[int, int] | None = None  # (event, value) of the last failed handshake
        self.vague = 0  # failed handshakes without detail: a first one may be followed by a precise one
        self.disconnects = 0  # live connections (handshake done) that dropped: what was queued on one is gone
        self.connect_retries = 0  # connection attempts that failed (refused: nothing listens) and are retried
        self._live = False
        # the monitor socket is read by its owner's thread and the drain's. Re-entrant: a garbage collection that
        # the drain's read sets off can run a dropped client's finalizer (unclosed_clients.py), which closes this
        # very monitor on the same thread (its read then ends on the closed socket, which the drain expects)
        self._lock = threading.RLock()
        self._closed = False
        _DRAIN.add(self)

    def poll(self) -> None:
        """Take the events that arrived so far."""
        with self._lock:
            if not self._closed:
                self._take_events()

    def _take_events(self) -> None:
        while self._monitor.poll(0):
            event = monitor_event(self._monitor.recv_multipart())
            kind = event["event"]
            if kind == zmq.EVENT_CONNECTED:
                self.connected = True
            elif kind == zmq.EVENT_DISCONNECTED:  # (a refused handshake's drop is said by refused() instead)
                self.disconnects += self._live
                self._live = False
            elif kind == zmq.EVENT_CONNECT_RETRIED:
                self.connect_retries += 1
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.succeeded, self.failure, self.vague, self._live = True, None, 0, True
            else:
                self.failure = (kind, event["value"])
                self.vague += kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL

    @property
    def live(self) -> bool:
        """A handshake succeeded and that connection is still up (as of the events taken so far)."""
        return self._live

    def refused(self) -> str | None:
        """Why the server refused the handshake, when it did (a retry will not help), else None."""
        self.poll()
        if self.failure is None or (self.failure[0] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL and self.vague < 2):
            return None  # ZeroMQ retries within 100 ms; the retry often says more
        kind, value = self.failure
        if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (f"the server refused this client's key (CURVE authentication failed, status {value}): "
                    "its public key must be in the server's curve.clients_dir (--client-key)")
        if kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and not self.curve:
            return "the server uses CURVE and this client does not: give --server-key (and --client-key)"
        if kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            return "the server does not use CURVE (or another security mechanism): drop --server-key"
        if not self.curve:
            return ("the handshake failed: if the server uses CURVE, give --server-key (and --client-key); else the "
                    f"endpoint is not {WRONG_SOCKET}")
        return "the CURVE handshake failed: is --server-key the server's public key?"

    def explain(self) -> str:
        """Why nothing came back: a refused handshake, nobody listening, or a connected but silent server."""
        reason = self.refused()
        if reason is not None:
            return reason
        if self.succeeded and not self._live:  # it was there: the connection dropped and no new one took
            return ("the connection dropped and nothing answers there now: has the service stopped or moved? "
                    "(a restart there is reconnected to by itself)")
        if self.succeeded:
            return "connected, but the service did not answer in time (busy?)"
        if self.connected:
            return (f"connected, but the handshake did not complete: an authentication failure, or the endpoint is "
                    f"not {WRONG_SOCKET}")
        return "nothing answered the connection: is the service running there?"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if not self._sock.closed:
                self._sock.disable_monitor()
            self._monitor.close(linger=0)


_DRAIN = _MonitorDrain()


def curve_client(sock: zmq.Socket, server_public_key: bytes | None,
                 client_keypair: tuple[bytes, bytes] | None = None) -> None:
    """Make `sock` a CURVE client of the server with that public key (no-op without one).

    Without `client_keypair` a throwaway keypair is made: enough for a server
    without an allow-list, refused by one with it.
    """
    if client_keypair is not None and not server_public_key:
        raise ValueError("a client keypair needs the server's public key too")
    if server_public_key:
        public, secret = client_keypair or zmq.curve_keypair()
        sock.curve_serverkey = server_public_key
        sock.curve_publickey = public
        sock.curve_secretkey = secret
